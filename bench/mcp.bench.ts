/**
 * An agent's MCP tool call through the cell vs the same call made directly by
 * the reference SDK's client (issue 37), 16 calls at once, one run:
 * - the server: bench/mcp-server.mjs (the SDK's McpServer, Streamable HTTP,
 *   stateful sessions, SSE answers, no auth), in a process of its own;
 * - through the cell: the engine's tools port of a crew run
 *   (`teams.crewPorts(...).tools.call`, what an agent's tool call reaches once
 *   the engine's grant, value gate and mode let it through): egress, the
 *   network floor and posture, the identity, the session, the check of the
 *   live definition against the pin (list read again once a second, the
 *   default `definition_max_age_ms`), `tools/call` with the SDK's client;
 * - directly: the SDK's Client on its own session, `callTool`.
 * Short rounds alternate (direct, cell, strict, then the other way round) so
 * the machine's load falls on all alike, and each round's p50 is set against
 * the direct p50 of the same round; the figure is the median of those ratios.
 * Target: the cell adds at most 20 % to the direct call's p50. For
 * reference, a source with `definition_max_age_ms: 0` (the list read before
 * every call) is measured too, and the CPU this process spends per call
 * (the cell's own work, apart from the load of the machine).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { ToolCallContext } from '../core/engine/types.ts';
import { startCell } from '../cell/server.ts';
import { fmt, pct, spawnServer } from './_util.ts';

const CONCURRENCY = 16;
const CALLS = Number(process.env['BENCH_MCP_CALLS'] ?? 320);
const ROUNDS = Number(process.env['BENCH_MCP_ROUNDS'] ?? 16);
const quiet = { info() {}, warn() {}, error() {} };

/**
 * `calls` calls of `fn`, `CONCURRENCY` at a time: each call's latency (ms), the calls per second, and
 * the CPU this process spent per call (µs: the client's side of the call, the cell's work included
 * when it goes through the cell; the server runs in a process of its own).
 */
async function measure(fn: () => Promise<unknown>, calls: number): Promise<{ lat: number[]; rate: number; cpuUs: number }> {
  const lat: number[] = [];
  let started = 0;
  const worker = async () => {
    while (started < calls) {
      started++;
      const t0 = performance.now();
      await fn();
      lat.push(performance.now() - t0);
    }
  };
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const cpu = process.cpuUsage(cpu0);
  return { lat, rate: calls / ((performance.now() - t0) / 1000), cpuUs: (cpu.user + cpu.system) / calls };
}

const median = (xs: number[]) => pct(xs, 50);

export default async function run(): Promise<void> {
  const load0 = loadavg()[0]!;
  const server = await spawnServer([resolve(import.meta.dirname, 'mcp-server.mjs')]);
  const url = `${server.url}/mcp`;
  const dir = mkdtempSync(join(tmpdir(), 'bench-mcp-'));
  const cell = await startCell({
    config: {
      dataDir: dir,
      cellId: 'bench-mcp',
      egressAllowPrivate: ['127.0.0.1/32'],
      rate: { capacity: 1e9, refillPerSecond: 1e9 },
    },
    log: quiet,
    listen: false,
  });
  const direct = new Client({ name: 'bench', version: '1' });
  try {
    const admin = cell.bootstrapSecret!;
    const register = async (body: Record<string, unknown>) => {
      const r = await cell.app.request('/api/public/v1/admin/catalog/sources', {
        method: 'POST',
        headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      if (r.status !== 201) throw new Error(`source registration: ${r.status} ${await r.text()}`);
      return (await r.json()) as { tools: { name: string; pin: string }[] };
    };
    const windowed = await register({ name: 'bench', url });
    const strict = await register({ name: 'strict', url, definition_max_age_ms: 0 });
    const port = cell.modules.teams.teams.crewPorts('run_00000000000000000001', 'w').tools!;
    const ctx = (pin: string): ToolCallContext => ({
      run_id: 'run_00000000000000000001',
      step_id: 'agent:s/tool/0.0',
      seat: 's',
      agent_id: 'agt_bench',
      authority: {
        allowed_tools: ['mcp.bench.lookup', 'mcp.strict.lookup'],
        clearance_level: 0,
        permission_mode: 'auto',
        data_grant_ids: [],
        egress_allowlist: [server.url],
        compartments: [],
        governing_contract_ids: [],
        budget_ceiling: null,
      },
      tool_pin: pin,
    });
    const viaCell = (name: string, pin: string) => () => port.call(name, { id: '42' }, ctx(pin));
    const cellCall = viaCell('mcp.bench.lookup', windowed.tools[0]!.pin);
    const strictCall = viaCell('mcp.strict.lookup', strict.tools[0]!.pin);
    await direct.connect(new StreamableHTTPClientTransport(new URL(url)));
    await direct.listTools();
    const directCall = () => direct.callTool({ name: 'lookup', arguments: { id: '42' } });
    // Warm-up: sessions open, code paths compiled.
    for (const f of [directCall, cellCall, strictCall]) await measure(f, 200);
    type Path = 'direct' | 'cell' | 'strict';
    const paths: [Path, () => Promise<unknown>][] = [
      ['direct', directCall],
      ['cell', cellCall],
      ['strict', strictCall],
    ];
    const all: Record<Path, number[]> = { direct: [], cell: [], strict: [] };
    const rates: Record<Path, number[]> = { direct: [], cell: [], strict: [] };
    const cpu: Record<Path, number[]> = { direct: [], cell: [], strict: [] };
    // Per round, the p50 of each path against the direct p50 of the same round: the machine's load
    // moves between rounds far more than within one.
    const ratios: Record<'cell' | 'strict', number[]> = { cell: [], strict: [] };
    for (let r = 0; r < ROUNDS; r++) {
      const p50: Partial<Record<Path, number>> = {};
      for (const [k, f] of r % 2 === 0 ? paths : [...paths].reverse()) {
        const m = await measure(f, CALLS);
        all[k].push(...m.lat);
        rates[k].push(m.rate);
        cpu[k].push(m.cpuUs);
        p50[k] = pct(m.lat, 50);
      }
      ratios.cell.push(p50.cell! / p50.direct!);
      ratios.strict.push(p50.strict! / p50.direct!);
    }
    const line = (k: Path, label: string) =>
      `  ${label}: p50 ${fmt(pct(all[k], 50), 2)} ms, p99 ${fmt(pct(all[k], 99), 2)} ms, ${fmt(median(rates[k]))} calls/s, ${fmt(median(cpu[k]))} µs CPU of this process per call`;
    console.log(
      `  ${CONCURRENCY} calls at once, ${ROUNDS} rounds of ${CALLS} calls per path (order alternating); load average ${fmt(load0, 1)} at the start, ${fmt(loadavg()[0]!, 1)} at the end`,
    );
    console.log(line('direct', 'SDK client, directly'));
    console.log(line('cell', "through the cell's tools port (definition_max_age_ms 1000, the default)"));
    console.log(line('strict', "through the cell's tools port (definition_max_age_ms 0: the list read before every call)"));
    console.log(
      `  cell / direct p50, median of the rounds: ${fmt(median(ratios.cell), 2)} (target <= 1.20; rounds ${fmt(Math.min(...ratios.cell), 2)}..${fmt(Math.max(...ratios.cell), 2)}); strict / direct: ${fmt(median(ratios.strict), 2)}`,
    );
    console.log(
      `  the cell's own work per call (CPU of this process, cell - direct): ${fmt(median(cpu.cell) - median(cpu.direct))} µs; strict: ${fmt(median(cpu.strict) - median(cpu.direct))} µs`,
    );
  } finally {
    await direct.close().catch(() => undefined);
    await cell.stop();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

// `node --import tsx bench/mcp.bench.ts` runs it alone.
if (import.meta.url === `file://${process.argv[1]}`) await run();
