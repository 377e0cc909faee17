import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell } from '../../helpers/inproc.ts';
import { RunClosedError } from '../../../cell/runs/journal.ts';
import { verifyJournal } from '../../../core/journal/verify.ts';
import type { JournalRecord } from '../../../core/journal/record.ts';

test('journal: appends are sealed, chained, durable and verify; finish closes the journal', async () => {
  const t = await inProcessCell();
  try {
    const runs = t.modules.runs.runs;
    const runId = await t.core.store.write((tx) =>
      runs.createRunTx(tx, { kind: 'job', job_type: 'compute', requester: 'p1', spec: { code: '1' }, at: t.clock.now() }),
    );
    assert.equal((await runs.getRun(runId))?.state, 'queued');
    const seen: JournalRecord[] = [];
    const unsub = await runs.subscribe(runId, 0, (r) => seen.push(r));
    await Promise.all([
      runs.appendJournal(runId, { step_id: 'run', kind: 'run_started' }),
      runs.appendJournal(runId, { step_id: 's1', kind: 'step', data: { n: 1 } }),
      runs.appendJournal(runId, { step_id: 's2', kind: 'step', data: { n: 2 } }),
    ]);
    assert.equal(await runs.finishRun(runId, 'completed', { output: { ok: 1 } }), true);
    assert.equal(await runs.finishRun(runId, 'failed'), false, 'first finisher wins');
    await assert.rejects(runs.appendJournal(runId, { step_id: 'late', kind: 'step' }), RunClosedError);
    const recs = await runs.readJournal(runId);
    assert.deepEqual(
      recs.map((r) => r.seq),
      [1, 2, 3, 4],
    );
    assert.equal(recs.at(-1)!.kind, 'run_finished');
    assert.deepEqual(
      seen.map((r) => r.seq),
      [1, 2, 3, 4],
      'live subscriber saw every record once, in order',
    );
    unsub();
    const keys = new Map(t.modules.iam.iam.identityKeys().map((k) => [k.kid, k.jwk]));
    assert.deepEqual(await verifyJournal(recs, (kid) => keys.get(kid)), { ok: true });
    const run = (await runs.getRun(runId))!;
    assert.equal(run.state, 'completed');
    assert.deepEqual(run.output, { ok: 1 });
    // Resume after seq 2: backlog 3, 4 only.
    const resumed: number[] = [];
    (await runs.subscribe(runId, 2, (r) => resumed.push(r.seq)))();
    assert.deepEqual(resumed, [3, 4]);
    assert.equal((await runs.listRuns({ limit: 10, offset: 0 })).total, 1);
  } finally {
    await t.close();
  }
});

test('cancel: idempotent, records cancel_requested once, aborts the driver', async () => {
  const t = await inProcessCell();
  try {
    const runs = t.modules.runs.runs;
    const runId = await t.core.store.write((tx) =>
      runs.createRunTx(tx, { kind: 'job', requester: 'p1', spec: {}, state: 'running', at: t.clock.now() }),
    );
    const d = runs.registerDriver(runId);
    let aborted = false;
    d.signal.addEventListener('abort', () => {
      aborted = true;
      setTimeout(() => d.release(), 5);
    });
    const a = await runs.requestCancel(runId, 'p2');
    assert.equal(aborted, true);
    assert.equal(a?.state, 'cancelled');
    const b = await runs.requestCancel(runId, 'p2');
    assert.equal(b?.state, 'cancelled');
    assert.equal(b?.updated_at, a?.updated_at);
    const kinds = (await runs.readJournal(runId)).map((r) => r.kind);
    assert.deepEqual(kinds, ['cancel_requested', 'run_finished']);
    assert.equal(await runs.requestCancel('run_ffffffffffffffffffff', 'p2'), undefined);
  } finally {
    await t.close();
  }
});
