/**
 * The MCP endpoint's cost over the HTTP API (issue 38): one crew run, end to
 * end, as a client gets its output, p50 latency with 16 clients at once
 * (target: MCP ≤ 1.2× the HTTP API).
 *
 * - HTTP API: `POST /admin/agent-teams/crews/{id}/runs` (201, the run is
 *   driven in the background), then the run's event stream until
 *   `run_finished` (bench/_util.ts runEnded: how a client learns the run
 *   ended), then `GET …/runs/{run_id}` for the output.
 * - MCP: `tools/call` of the crew's tool on /mcp with the reference SDK's
 *   client (Streamable HTTP, its own session per client), which answers when
 *   the run ends, with the output and a signed receipt.
 * The crew has one seat; the model (test/fixtures/openai-server.ts, in this
 * process) answers at once. The cell is the real program (dist/cell.mjs),
 * its rate limit out of the way; clients, model and cell share the machine.
 * Short rounds alternate in pairs (HTTP then MCP, MCP then HTTP, …) after a
 * warm-up of each, so a change of the machine's load falls on both modes alike; p50 and p99 are
 * over every call of a mode's rounds, and the ratio is also given as the
 * median of each pair of rounds' p50s. The CPU a run costs the cell (and
 * this process: the clients and the model) is measured beside it: it moves
 * far less with the machine's load than a latency does.
 */
import { loadavg } from 'node:os';
import { request } from 'undici';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startOpenAIServer } from '../test/fixtures/openai-server.ts';
import { httpApi, ok, T } from '../test/helpers/teams.ts';
import { cpuSeconds, fmt, pct, runEnded, startBenchCell } from './_util.ts';

const CLIENTS = 16;
const CALLS = 4;
const ROUNDS = 9;

export default async function bench(): Promise<void> {
  const ai = await startOpenAIServer({ apiKey: 'sk-fake', respond: () => ({ content: 'done' }) });
  const cell = await startBenchCell();
  try {
    const api = httpApi(cell.url, cell.adminKey);
    const secret = await ok(api, 'POST', '/api/public/v1/admin/secrets', { name: 'k', value: 'sk-fake' });
    await ok(api, 'POST', '/api/public/v1/admin/ai/model-providers', {
      provider_type: 'openai-compatible',
      default_model: 'fake',
      base_url: `${ai.url}/v1`,
      api_key_secret_id: secret.secret_id,
      max_retries: 0,
    });
    const f = await ok(api, 'POST', `${T}/formations`, { name: 'one seat' });
    const cap = { allowed_tools: [], permission_mode: 'auto', clearance_level: 0 };
    const b = await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
      role_label: 'w',
      required_skills: [],
      authority_cap: cap,
    });
    const a = await ok(api, 'POST', `${T}/agents`, { source: 'scratch', role_label: 'w', authority_template: cap });
    await ok(api, 'POST', `${T}/agents/${a.agent_id}/budget-ledger`, { budget_limit: 1e12 });
    const crew = (await ok(api, 'POST', `${T}/crews`, { formation_id: f.formation_id, assignments: { [b.billet_id]: a.agent_id } }))
      .crew_id as string;
    const auth = { authorization: `Bearer ${cell.adminKey}` };

    /** One run over the HTTP API: launch, follow its events to the end, read its output. */
    const viaHttp = async () => {
      const started = await request(`${cell.url}${T}/crews/${crew}/runs`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ input: 'go' }),
      });
      const run = (await started.body.json()) as { run_id: string };
      if (started.statusCode !== 201) throw new Error(`run: ${started.statusCode} ${JSON.stringify(run)}`);
      const end = await runEnded(cell.url, cell.adminKey, run.run_id);
      if (end.outcome !== 'completed') throw new Error(`run ${run.run_id} ${end.outcome} ${end.reason}`);
      const r = await request(`${cell.url}${T}/crews/${crew}/runs/${run.run_id}`, { headers: auth });
      const body = (await r.body.json()) as { output: unknown };
      if (body.output !== 'done') throw new Error('no output');
    };
    const clients: Client[] = [];
    for (let i = 0; i < CLIENTS; i++) {
      const c = new Client({ name: `bench-${i}`, version: '1' });
      await c.connect(new StreamableHTTPClientTransport(new URL(`${cell.url}/mcp`), { requestInit: { headers: auth } }));
      clients.push(c);
    }
    /** One run over MCP: the crew's tool, answered when the run ends. */
    const viaMcp = async (c: Client) => {
      const r = await c.callTool({ name: `crew_${crew}`, arguments: { input: 'go' } });
      const s = r.structuredContent as { state?: string; output?: unknown; receipt?: unknown };
      if (s?.state !== 'completed' || s.output !== 'done' || !s.receipt) throw new Error(`mcp: ${JSON.stringify(r)}`);
    };

    const cpu = { http: { cell: 0, here: 0 }, mcp: { cell: 0, here: 0 } };
    const round = async (mode: 'http' | 'mcp', calls: number): Promise<number[]> => {
      const lat: number[] = [];
      const [cell0, here0] = [cpuSeconds(cell.proc.pid!), process.cpuUsage()];
      await Promise.all(
        clients.map(async (c) => {
          for (let i = 0; i < calls; i++) {
            const t0 = performance.now();
            await (mode === 'http' ? viaHttp() : viaMcp(c));
            lat.push(performance.now() - t0);
          }
        }),
      );
      const here = process.cpuUsage(here0);
      cpu[mode].cell += cpuSeconds(cell.proc.pid!) - cell0;
      cpu[mode].here += (here.user + here.system) / 1e6;
      return lat;
    };
    await round('http', 2);
    await round('mcp', 2);
    cpu.http = { cell: 0, here: 0 };
    cpu.mcp = { cell: 0, here: 0 };
    const http: number[] = [];
    const mcp: number[] = [];
    const pairs: number[] = [];
    const load0 = loadavg()[0]!;
    for (let r = 0; r < ROUNDS; r++) {
      // Each mode goes first in every other pair: neither inherits the other's tail more often.
      const first = r % 2 === 0 ? 'http' : 'mcp';
      const a = await round(first, CALLS);
      const b = await round(first === 'http' ? 'mcp' : 'http', CALLS);
      const [h, m] = first === 'http' ? [a, b] : [b, a];
      http.push(...h);
      mcp.push(...m);
      pairs.push(pct(m, 50) / pct(h, 50));
    }
    for (const c of clients) await c.close();
    const [h50, m50] = [pct(http, 50), pct(mcp, 50)];
    const runs = CLIENTS * CALLS * ROUNDS;
    const perRun = (c: { cell: number; here: number }) =>
      `cell ${fmt((c.cell / runs) * 1000, 2)} ms, clients and model ${fmt((c.here / runs) * 1000, 2)} ms`;
    console.log(
      `  ${CLIENTS} clients x ${CALLS} runs x ${ROUNDS} rounds per mode, one-seat crew, instant model; load ${load0.toFixed(1)} -> ${loadavg()[0]!.toFixed(1)}`,
    );
    console.log(`  HTTP API (POST run + events to run_finished + GET run): p50 ${fmt(h50, 1)} ms, p99 ${fmt(pct(http, 99), 1)} ms`);
    console.log(`  MCP tools/call (output + signed receipt):              p50 ${fmt(m50, 1)} ms, p99 ${fmt(pct(mcp, 99), 1)} ms`);
    console.log(`  ratio MCP/HTTP p50 ${fmt(m50 / h50, 2)}; median of the rounds' ratios ${fmt(pct(pairs, 50), 2)} (target <= 1.2)`);
    console.log(`  CPU a run, HTTP API: ${perRun(cpu.http)}`);
    console.log(`  CPU a run, MCP:      ${perRun(cpu.mcp)}`);
  } finally {
    await cell.stop();
    cell.cleanup();
    await ai.close();
  }
}
