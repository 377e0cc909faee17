/**
 * Where a lone crew run's wall time goes (issue 40), not part of `make bench`:
 * one cell (PostgreSQL, durable, or embedded with EMB=1), a 20-seat
 * sequential crew, RUNS runs one after another, each awaited on its event
 * stream as a client would; the fake model server notes when each call
 * arrives. Prints, as medians (then means, then 90th percentiles) of the runs after the first WARM: the launch's
 * answer (POST), the first model call, a step (one call to the next), the
 * last call to `run_finished`, and the whole run, in ms from the POST.
 *
 *   node scripts/build.mjs && node --import tsx bench/run-phases.ts   (BIN: another build; RUNS, default 120; WARM, default 40; EMB=1)
 */
import { startOpenAIServer } from '../test/fixtures/openai-server.ts';
import { startCellProcess } from '../test/helpers/cell-process.ts';
import { pgDatabase, startPgServer } from '../test/helpers/postgres.ts';
import { T } from '../test/helpers/teams.ts';
import { callCell, runEnded, sequentialCrew } from './_util.ts';

const RUNS = Number(process.env['RUNS'] ?? 120);
const WARM = Number(process.env['WARM'] ?? 40);
const calls: number[] = [];
const ai = await startOpenAIServer({
  apiKey: 'sk-fake',
  record: false,
  respond: () => {
    calls.push(performance.now());
    return { content: 'ok', usage: { prompt_tokens: 3, completion_tokens: 2 } };
  },
});
const pg = process.env['EMB'] ? null : await startPgServer({ durable: true });
const db = pg ? await pgDatabase(pg.url) : null;
const cell = await startCellProcess({
  args: [...(db ? ['--store', db.url, '--posture', 'multi-cell'] : []), '--log-level', 'warn'],
  ...(process.env['BIN'] ? { bin: process.env['BIN'] } : {}),
});
const call = (method: string, path: string, body?: unknown) => callCell(cell.url, cell.adminKey, method, path, body);
const crew = await sequentialCrew(ai, cell.adminKey, call);
type Phases = { launch: number; first: number; step: number; end: number; run: number };
const seen: Phases[] = [];
for (let k = 0; k < RUNS; k++) {
  calls.length = 0;
  const t0 = performance.now();
  const r = await call('POST', `${T}/crews/${crew}/runs`, { input: 'go' });
  if (r.status !== 201 && r.status !== 202) throw new Error(`launch ${r.status} ${r.text}`);
  const t1 = performance.now();
  const end = await runEnded(cell.url, cell.adminKey, r.body.run_id);
  if (end.outcome !== 'completed' || calls.length !== 20) throw new Error(`${end.outcome} after ${calls.length} calls`);
  const t2 = performance.now();
  seen.push({ launch: t1 - t0, first: calls[0]! - t0, step: (calls[19]! - calls[0]!) / 19, end: t2 - calls[19]!, run: t2 - t0 });
}
const median = (k: keyof Phases) => {
  const xs = seen
    .slice(WARM)
    .map((x) => x[k])
    .sort((a, b) => a - b);
  return xs[Math.floor(xs.length / 2)]!.toFixed(2);
};
// Means too: a throughput (the peers bench) pays for the slow runs a median leaves out.
const mean = (k: keyof Phases) => {
  const xs = seen.slice(WARM).map((x) => x[k]);
  return (xs.reduce((a, b) => a + b, 0) / xs.length).toFixed(2);
};
const p90 = (k: keyof Phases) => {
  const xs = seen
    .slice(WARM)
    .map((x) => x[k])
    .sort((a, b) => a - b);
  return xs[Math.floor(xs.length * 0.9)]!.toFixed(2);
};
const line = (f: (k: keyof Phases) => string) =>
  `POST answered ${f('launch')}, first model call ${f('first')}, a step ${f('step')}, last call to run_finished ${f('end')}, the run ${f('run')}`;
const engine = db ? 'PostgreSQL' : 'embedded';
console.log(`ms, medians of ${RUNS - WARM} runs (${engine}): ${line(median)}`);
console.log(`ms, means: ${line(mean)}`);
console.log(`ms, 90th percentiles: ${line(p90)}`);
await cell.kill('SIGTERM');
cell.cleanup();
await ai.close();
process.exit(0);
