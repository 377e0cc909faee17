/**
 * Group commit under crashes (cell/runs/group-commit.ts), against the real
 * cell process: sixteen crew runs of eight sequential seats at once, whose
 * drivers' steps share transactions, and
 * - the cell SIGKILLed mid-load wherever the kill lands, then started again
 *   alone (on the engine under test: embedded, or PostgreSQL with
 *   CELL_TEST_STORE=postgres);
 * - the PostgreSQL server crashed mid-load (`pg_ctl stop -m immediate`, fsync
 *   on, a server of this file's own) and started again, the cell living on
 *   (once, in the embedded pass).
 * Every run completes; every journal verifies with contiguous seqs; nothing
 * acknowledged is lost: a seat whose successor was asked before the crash
 * (its step was durable, or the next call would not have left) is never asked
 * again, and each run asks again at most the one call it had in flight, flagged.
 * Needs `node scripts/build.mjs` first.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startCellProcess, type CellProcess } from '../helpers/cell-process.ts';
import { pgDatabase, pgUnavailable, startPgServer } from '../helpers/postgres.ts';
import { startOpenAIServer, type ChatRequestBody, type FakeOpenAI } from '../fixtures/openai-server.ts';
import { T, ok, provider, roleOf, team, type Api } from '../helpers/teams.ts';
import { crewRunEnded, httpApi, until, verifiedJournal } from './_runs.ts';

const RUNS = 16;
const SEATS = 8;

let ai: FakeOpenAI;
const procs: CellProcess[] = [];
before(async () => {
  ai = await startOpenAIServer({ apiKey: 'sk-fake' });
});
after(async () => {
  for (const p of procs) {
    await p.kill().catch(() => undefined);
    p.cleanup();
  }
  await ai.close();
});

/** The run a model request is for: its task tag travels from seat to seat in the answers. */
function tagOf(req: ChatRequestBody): string {
  const text = req.messages.map((m) => m.content ?? '').join('\n');
  return /\btask-\d+\b/.exec(text)?.[0] ?? '';
}

/** Seat number of a request (s1 … s8). */
const seatOf = (req: ChatRequestBody) => Number(roleOf(req).slice(1));

/** Sixteen runs of one crew on `cell`, launched at once; the model answers at once, naming the run. */
async function launch(cell: CellProcess): Promise<{ crew: string; runs: { runId: string; tag: string }[]; from: number }> {
  const api: Api = httpApi(cell.url, cell.adminKey);
  await provider(api, ai);
  ai.setResponder((req) => ({ content: `${roleOf(req)} of ${tagOf(req)}` }));
  const tm = await team(
    api,
    'sequential',
    Array.from({ length: SEATS }, (_, i) => ({ role: `s${i + 1}` })),
  );
  const from = ai.requests.length;
  const runs = await Promise.all(
    Array.from({ length: RUNS }, (_, i) =>
      ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: `task-${i}` }).then((r) => ({ runId: r.run_id as string, tag: `task-${i}` })),
    ),
  );
  // Mid-load: a third of the steps asked.
  await until('a third of the model calls', async () => (ai.requests.length - from >= (RUNS * SEATS) / 3 ? true : undefined), 60_000);
  return { crew: tm.crew, runs, from };
}

/**
 * What the group promises once `cell` has ended every run: `from` is the first model request of the
 * runs (the fake server's log is the file's), `askedBefore` how many had been made before the crash.
 */
async function check(cell: CellProcess, adminKey: string, l: Awaited<ReturnType<typeof launch>>, before: number) {
  const { crew, runs, from } = l;
  const askedBefore = ai.requests.slice(from, before).map((r) => r.body);
  const all = () => ai.requests.slice(from).map((r) => r.body);
  assert.ok(askedBefore.length < RUNS * SEATS, 'the crash landed before the runs ended');
  const api = httpApi(cell.url, adminKey);
  for (const { runId, tag } of runs) {
    const done = await crewRunEnded(api, crew, runId, 120_000);
    assert.equal(done.state, 'completed', `${tag}: ${JSON.stringify(done.error)}`);
    assert.equal(done.output, `s${SEATS} of ${tag}`);

    const { records, verdict } = await verifiedJournal(api, cell.url, runId);
    assert.deepEqual(verdict, { ok: true }, tag);
    for (const [i, r] of records.entries()) assert.equal(r.seq, i + 1, `${tag}: contiguous seqs`);
    assert.equal(records.at(-1)!.kind, 'run_finished');

    // The highest seat this run had asked before the crash: every seat before it was acknowledged.
    const seen = askedBefore.filter((q) => tagOf(q) === tag).map(seatOf);
    const reached = seen.length > 0 ? Math.max(...seen) : 0;
    const asked = (seat: number) => all().filter((q) => tagOf(q) === tag && seatOf(q) === seat).length;
    for (let s = 1; s < reached; s++) assert.equal(asked(s), 1, `${tag}: seat s${s} was acknowledged before the crash`);
    for (let s = reached + 1; s <= SEATS; s++) assert.equal(asked(s), 1, `${tag}: seat s${s} asked once after the crash`);
    const again = reached > 0 ? asked(reached) - 1 : 0;
    assert.ok(again <= 1, `${tag}: the call in flight asked again at most once (${again})`);
    // A call asked again is flagged; so is one whose intent (its reservation) was durable but which had not left yet.
    const flagged = records.filter((r) => r.data?.['reissued'] === true).length;
    assert.ok(flagged >= again && flagged <= 1, `${tag}: ${flagged} re-issues flagged, ${again} calls asked again`);
  }
}

test('SIGKILL during sixteen runs whose steps share commits: every run completes, nothing acknowledged is asked again', {
  timeout: 180_000,
}, async () => {
  const args = ['--cell-id', 'cell-g', '--metrics-port', '0'];
  const a = await startCellProcess({ args });
  procs.push(a);
  const l = await launch(a);
  await a.kill('SIGKILL');
  const before = ai.requests.length;

  const b = await startCellProcess({ dataDir: a.dataDir, args });
  procs.push(b);
  await check(b, a.adminKey, l, before);
  await b.stop();
});

test('the PostgreSQL server crashes during sixteen runs whose steps share commits: every run completes, nothing acknowledged is asked again', {
  timeout: 300_000,
  skip:
    process.env['CELL_TEST_STORE'] === 'postgres' ? 'runs once, in the embedded pass (a server of its own)' : (pgUnavailable() ?? false),
}, async () => {
  const server = await startPgServer({ durable: true });
  const db = await pgDatabase(server.url);
  let down = false;
  try {
    const cell = await startCellProcess({ args: ['--store', db.url] });
    procs.push(cell);
    const l = await launch(cell);
    // The answers from here on take 200 ms: on a quiet machine the runs' last two thirds took less than
    // the server's stop, and the crash then landed after they had ended.
    ai.setResponder((req) => ({ content: `${roleOf(req)} of ${tagOf(req)}`, delayMs: 200 }));
    await server.stopImmediate();
    down = true;
    const before = ai.requests.length;
    await server.startAgain();
    down = false;
    await check(cell, cell.adminKey, l, before);
    await cell.stop();
  } finally {
    if (down) await server.startAgain();
    await db.drop();
    await server.stop();
  }
});
