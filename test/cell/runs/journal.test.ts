import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell } from '../../helpers/inproc.ts';
import { createRunTx, getRun, listRuns } from '../../../cell/runs/runs.ts';
import { appendJournal, finishRun, readJournal, RunClosedError } from '../../../cell/runs/journal.ts';
import { subscribe } from '../../../cell/runs/events.ts';
import { registerDriver, requestCancel } from '../../../cell/runs/control.ts';
import { verifyJournal } from '../../../core/journal/verify.ts';
import { cellPublicJwks } from '../../../cell/iam/identity.ts';
import type { JournalRecord } from '../../../core/journal/record.ts';

test('journal: appends are sealed, chained, durable and verify; finish closes the journal', async () => {
  const t = await inProcessCell();
  try {
    const runId = await t.cell.store.write((tx) => createRunTx(tx, { kind: 'job', job_type: 'compute', requester: 'p1', spec: { code: '1' }, at: t.clock.now() }));
    assert.equal(getRun(t.cell, runId)?.state, 'queued');
    const seen: JournalRecord[] = [];
    const unsub = subscribe(t.cell, runId, 0, (r) => seen.push(r));
    await Promise.all([
      appendJournal(t.cell, runId, { step_id: 'run', kind: 'run_started' }),
      appendJournal(t.cell, runId, { step_id: 's1', kind: 'step', data: { n: 1 } }),
      appendJournal(t.cell, runId, { step_id: 's2', kind: 'step', data: { n: 2 } }),
    ]);
    assert.equal(await finishRun(t.cell, runId, 'completed', { output: { ok: 1 } }), true);
    assert.equal(await finishRun(t.cell, runId, 'failed'), false, 'first finisher wins');
    await assert.rejects(appendJournal(t.cell, runId, { step_id: 'late', kind: 'step' }), RunClosedError);
    const recs = readJournal(t.cell, runId);
    assert.deepEqual(recs.map((r) => r.seq), [1, 2, 3, 4]);
    assert.equal(recs.at(-1)!.kind, 'run_finished');
    assert.deepEqual(seen.map((r) => r.seq), [1, 2, 3, 4], 'live subscriber saw every record once, in order');
    unsub();
    const keys = new Map(cellPublicJwks(t.cell).map((k) => [k.kid, k.jwk]));
    assert.deepEqual(await verifyJournal(recs, (kid) => keys.get(kid)), { ok: true });
    const run = getRun(t.cell, runId)!;
    assert.equal(run.state, 'completed');
    assert.deepEqual(run.output, { ok: 1 });
    // Resume after seq 2: backlog 3, 4 only.
    const resumed: number[] = [];
    subscribe(t.cell, runId, 2, (r) => resumed.push(r.seq))();
    assert.deepEqual(resumed, [3, 4]);
    assert.equal(listRuns(t.cell, { limit: 10, offset: 0 }).total, 1);
  } finally {
    await t.close();
  }
});

test('cancel: idempotent, records cancel_requested once, aborts the driver', async () => {
  const t = await inProcessCell();
  try {
    const runId = await t.cell.store.write((tx) => createRunTx(tx, { kind: 'job', requester: 'p1', spec: {}, state: 'running', at: t.clock.now() }));
    const d = registerDriver(t.cell, runId);
    let aborted = false;
    d.signal.addEventListener('abort', () => { aborted = true; setTimeout(() => d.release(), 5); });
    const a = await requestCancel(t.cell, runId, 'p2');
    assert.equal(aborted, true);
    assert.equal(a?.state, 'cancelled');
    const b = await requestCancel(t.cell, runId, 'p2');
    assert.equal(b?.state, 'cancelled');
    assert.equal(b?.updated_at, a?.updated_at);
    const kinds = readJournal(t.cell, runId).map((r) => r.kind);
    assert.deepEqual(kinds, ['cancel_requested', 'run_finished']);
    assert.equal(await requestCancel(t.cell, 'run_ffffffffffffffffffff', 'p2'), undefined);
  } finally {
    await t.close();
  }
});
