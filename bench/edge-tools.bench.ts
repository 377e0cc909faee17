/**
 * Offline crews that act (issue 39, "Performance"), each beside a baseline measured in the same run:
 *  1. a tool-calling step on the tiny signed model (runtime/local-model.ts `chat`: node-llama-cpp's function
 *     calling, a named tool forced, the device catalog's `calc` and `kv.put` definitions) against a text-only
 *     step of the same output length (`complete`, the same system and user text flattened to a prompt):
 *     time per output token, target <= 1.3x; after a text prompt (the sequence shares nothing with the
 *     call), for the same seat's next conversation (its system prompt and function documentation already
 *     in the sequence), and for the same conversation again (a retried step, the same run again);
 *  2. cold start of `dist/edge serve` with a crew bundle whose seats hold the device's tools (its catalog
 *     built, the crew judged honourable) to the first answered request, against a bare node:http server
 *     spawned the same way: target <= 1.5x.
 * Needs `make edge` (edge-runtime/, dist/edge). Reports; never fails.
 */
import { spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { CALC, KV_PUT } from '../core/catalog/builtin.ts';
import type { ChatMessage } from '../core/engine/types.ts';
import { findRuntime, loadLocalSignedModel } from '../runtime/local-model.ts';
import { edgeWorld, SECRET, T0 } from '../test/edge/_edge-fixtures.ts';
import { signedTinyModel } from '../test/fixtures/tiny-model.ts';
import { listeningPort } from './_util.ts';

const fmt = (n: number, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ROOT = resolve(import.meta.dirname, '..');
const ROUNDS = 7;

async function timed<T>(f: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t0 = performance.now();
  const value = await f();
  return { ms: performance.now() - t0, value };
}

async function toolStep(): Promise<void> {
  const f = await signedTinyModel('bench-edge-tools-');
  const dir = f.dir;
  try {
    const model = await loadLocalSignedModel({
      modelPath: f.modelPath,
      manifestPath: f.manifestPath,
      publishers: f.publishers,
      scratchDir: dir,
    });
    try {
      for (const tool of [CALC, KV_PUT]) {
        const tools = [{ name: tool.name, description: tool.description, parameters: tool.parameters }];
        const conversation = (n: number): ChatMessage[] => [
          { role: 'system', content: 'You are the field recorder.' },
          { role: 'user', content: `Record the pressure reading of pump ${n}.` },
        ];
        // One run's calls (a partition): what they share of a prompt's start is evaluated once (runtime/local-model.ts).
        const req = (n: number) => ({
          messages: conversation(n),
          tools,
          toolChoice: { name: tool.name },
          maxTokens: 400,
          partition: 'run',
        });
        await model.chat(req(0)); // warm the runtime
        const first: number[] = [];
        const seat: number[] = [];
        const warm: number[] = [];
        const text: number[] = [];
        let out = 0;
        let input = 0;
        const prompt = (i: number) =>
          `${conversation(i)
            .map((m) => `${m.role}: ${m.content}`)
            .join('\n')}\nassistant:`;
        for (let i = 1; i <= ROUNDS; i++) {
          // After a text prompt (nothing shared), then the same seat's next conversation (its system prompt and
          // function documentation shared), then that conversation again (all of it shared).
          await model.complete(prompt(100 + i), 4, undefined, undefined, 'run');
          const f = await timed(() => model.chat(req(i)));
          const c = await timed(() => model.chat(req(1000 + i)));
          const w = await timed(() => model.chat(req(1000 + i)));
          out = f.value.outputTokens;
          input = f.value.inputTokens;
          const t = await timed(() => model.complete(prompt(i), out, undefined, undefined, 'run'));
          first.push(f.ms / out);
          seat.push(c.ms / c.value.outputTokens);
          warm.push(w.ms / w.value.outputTokens);
          text.push(t.ms / Math.max(1, t.value.outputTokens));
        }
        const [f, c, w, t] = [median(first), median(seat), median(warm), median(text)];
        const x = (v: number) => `${fmt(v * 1000)} µs (${fmt(v / t, 2)}x)`;
        console.log(
          `  ${tool.name} call (${out} output tokens, ${input} input), per output token: nothing shared ${x(f)}, ` +
            `the seat's next conversation ${x(c)}, the same conversation again ${x(w)}; text-only step ${fmt(t * 1000)} µs — target <= 1.3x`,
        );
      }
    } finally {
      await model.dispose();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The CPU a process used so far (user + system, ms; Linux /proc, 10 ms ticks). */
function cpuMsOf(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
}

/** Spawn to the first answered request: wall ms, and the CPU ms the process used by then. */
async function firstAnswer(
  cmd: string,
  args: string[],
  path: string,
  headers: Record<string, string>,
): Promise<{ ms: number; cpu: number }> {
  const t0 = performance.now();
  const proc = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, AGENT_CELL_EDGE_TEST_CLOCK: '1' } });
  const port = await listeningPort(proc, 30_000);
  const r = await fetch(`http://127.0.0.1:${port}${path}`, { headers });
  await r.arrayBuffer();
  const ms = performance.now() - t0;
  const cpu = cpuMsOf(proc.pid!);
  await new Promise<void>((res) => {
    proc.once('exit', () => res());
    proc.kill('SIGTERM');
  });
  if (r.status !== 200) throw new Error(`first request answered ${r.status}`);
  return { ms, cpu };
}

async function coldStartWithCrew(): Promise<void> {
  const edge = join(ROOT, 'dist/edge');
  const caps = { allowed_tools: ['calc', 'clock.now', 'kv.get', 'kv.put', 'http.get', 'http.request'], permission_mode: 'auto' as const };
  const w = await edgeWorld({ maxTokens: 16, workspaceId: 'ws_1', policies: { a: { authority_cap: caps }, b: { authority_cap: caps } } });
  // The baseline of bench/edge.bench.ts's cold start: a bare CommonJS node:http server (no ESM loader).
  const bare =
    "require('node:http').createServer((q,s)=>s.end('{}')).listen(0,'127.0.0.1',function(){console.log('listening '+this.address().port)})";
  try {
    // The device's clock set to the world's (its bundles are issued at T0).
    const args = [
      'serve',
      '--data',
      w.dir,
      '--bundle',
      w.keysPath,
      '--crew-bundle',
      w.crewPath,
      '--port',
      '0',
      `--now-offset-ms=${T0 + 1000 - Date.now()}`,
    ];
    const edgeRuns: { ms: number; cpu: number }[] = [];
    const bareRuns: { ms: number; cpu: number }[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      bareRuns.push(await firstAnswer(process.execPath, ['-e', bare], '/', {}));
      edgeRuns.push(await firstAnswer(edge, args, '/api/public/v1/edge/authz/edge.read', { authorization: `Bearer ${SECRET}` }));
    }
    const m = (xs: { ms: number; cpu: number }[], k: 'ms' | 'cpu') => median(xs.map((x) => x[k]));
    const [e, b, ec, bc] = [m(edgeRuns, 'ms'), m(bareRuns, 'ms'), m(edgeRuns, 'cpu'), m(bareRuns, 'cpu')];
    console.log(
      `  edge serve with a crew bundle and its catalog (6 tools), spawn to its first answered request: ${fmt(e)} ms, ${fmt(ec)} ms CPU; ` +
        `bare node:http ${fmt(b)} ms, ${fmt(bc)} ms CPU; ${fmt(e / b, 2)}x wall, ${fmt(ec / bc, 2)}x CPU — target <= 1.5x`,
    );
  } finally {
    rmSync(w.dir, { recursive: true, force: true });
  }
}

export default async function edgeToolsBench(): Promise<void> {
  try {
    findRuntime();
  } catch {
    console.log('  skipped: edge-runtime/ is not installed (make edge)');
    return;
  }
  await toolStep();
  await coldStartWithCrew();
}
