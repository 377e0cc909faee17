/**
 * Resume after a restart, on the engine under test (embedded, or PostgreSQL
 * with CELL_TEST_STORE=postgres), against the real cell process: the cell is
 * SIGKILLed while a crew run's model call is in flight, then the same cell
 * (same id, same data) is started again, alone. The run completes by itself,
 * with no recover: the finished step is reused, the call in flight is asked
 * again once and flagged (`flags.reissued`, `data.reissued` on its record), the
 * journal verifies, and the takeover is counted as a restart, never as a self
 * takeover. Needs `node scripts/build.mjs` first.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startCellProcess, type CellProcess } from '../helpers/cell-process.ts';
import { startOpenAIServer, type FakeOpenAI } from '../fixtures/openai-server.ts';
import { T, ok, provider, roleOf, team, type Api } from '../helpers/teams.ts';
import { httpApi, metric, metricsUrl, until, verifiedJournal } from './_runs.ts';

let ai: FakeOpenAI;
const procs: CellProcess[] = [];
before(async () => {
  ai = await startOpenAIServer({ apiKey: 'sk-fake' });
});
after(async () => {
  for (const p of procs) await p.kill().catch(() => undefined);
  procs[0]?.cleanup();
  await ai.close();
});

test('SIGKILL during a model call, the same cell restarted alone: the run completes by itself, the call re-issued once and flagged', {
  timeout: 60_000,
}, async () => {
  const args = ['--cell-id', 'cell-r', '--metrics-port', '0'];
  const a = await startCellProcess({ args });
  procs.push(a);
  const apiA: Api = httpApi(a.url, a.adminKey);
  await provider(apiA, ai);
  let hang = true;
  ai.setResponder((req) => {
    const role = roleOf(req);
    if (role === 's2' && hang) return { content: 'too late', delayMs: 60_000 };
    return { content: `${role} done` };
  });
  const tm = await team(apiA, 'sequential', [{ role: 's1' }, { role: 's2' }, { role: 's3' }]);
  const run = await ok(apiA, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'task' });
  assert.equal(run.stalled, false);
  await until('the s2 model call', async () => (ai.requests.some((r) => roleOf(r.body) === 's2') ? true : undefined));
  await a.kill('SIGKILL');

  hang = false;
  const b = await startCellProcess({ dataDir: a.dataDir, args });
  procs.push(b);
  const apiB = httpApi(b.url, a.adminKey);
  const done = await until('the run to finish after the restart', async () => {
    const s = await ok(apiB, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
    return ['completed', 'failed', 'refused', 'cancelled'].includes(s.state) ? s : undefined;
  });
  assert.equal(done.state, 'completed', JSON.stringify(done.error));
  assert.equal(done.output, 's3 done');
  assert.equal(done.stalled, false);
  const calls = (role: string) => ai.requests.filter((r) => roleOf(r.body) === role).length;
  assert.equal(calls('s1'), 1, 's1 finished before the kill: its recorded answer is reused');
  assert.equal(calls('s2'), 2, 's2 was in flight: asked again once');
  assert.equal(calls('s3'), 1);
  const reissued = done.flags.reissued as { step_id: string; kind: string }[];
  assert.equal(reissued.length, 1, JSON.stringify(done.flags));
  assert.match(reissued[0]!.step_id, /s2|n/);

  const { records, verdict } = await verifiedJournal(apiB, b.url, run.run_id);
  assert.deepEqual(verdict, { ok: true });
  assert.ok(
    records.some((r) => r.kind === 'taken_over'),
    'the restarted cell took its run back (a new epoch)',
  );
  assert.ok(!records.some((r) => r.kind === 'recovered'), 'nobody had to recover it');
  assert.equal(records.filter((r) => r.data?.['reissued'] === true).length, 1);
  assert.equal(records.at(-1)!.kind, 'run_finished');
  for (const [i, r] of records.entries()) assert.equal(r.seq, i + 1);

  const url = metricsUrl(b);
  assert.equal(await metric(url, 'cell_run_takeovers_total', { previous: 'restart' }), 1);
  assert.equal(await metric(url, 'cell_run_takeovers_total', { previous: 'self' }), 0);
  assert.equal(await metric(url, 'cell_runs_stalled', { kind: 'crew' }), 0);
  await b.stop();
});
