/**
 * The takeover sweep's scans (cell/runs/repository.ts leasedElsewhere and
 * waitingElsewhere, issue 21): the cells whose lease still holds are left out
 * in SQL, so a busy group's heartbeat reads the few orphans, not every run in
 * flight; with nothing excluded, every candidate is read. Both engines.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { leasedElsewhere, waitingElsewhere } from '../../../cell/runs/repository.ts';
import { inProcessCell } from '../../helpers/inproc.ts';

test('leasedElsewhere and waitingElsewhere leave out the runs of the excluded cells', async () => {
  const t = await inProcessCell();
  try {
    const runs = t.modules.runs.runs;
    const make = async (state: string, owner: string | null, coordinator: string | null) => {
      const id = await t.core.store.write((tx) =>
        runs.createRunTx(tx, { kind: 'job', job_type: 'compute', requester: 'p1', spec: { code: '1' }, at: t.clock.now() }),
      );
      await t.core.store.write((tx) =>
        tx.run('UPDATE runs SET state = ?, lease_owner = ?, coordinator = ? WHERE run_id = ?', [state, owner, coordinator, id]),
      );
      return id;
    };
    const live = await make('running', 'cell-live', 'cell-live');
    const dead = await make('running', 'cell-dead', 'cell-dead');
    const free = await make('queued', null, null);
    const mine = await make('running', 'cell-me', 'cell-me');
    const waitLive = await make('waiting', null, 'cell-live');
    const waitDead = await make('waiting', null, 'cell-dead');
    const ids = (rs: { run_id: string }[]) => rs.map((r) => r.run_id).sort();
    assert.deepEqual(ids(await leasedElsewhere(t.core.store, 'job', ['cell-me', 'cell-live'])), [dead, free].sort());
    assert.deepEqual(ids(await leasedElsewhere(t.core.store, 'job', [])), [live, dead, free, mine].sort());
    assert.deepEqual(ids(await leasedElsewhere(t.core.store, 'crew', [])), []);
    assert.deepEqual(ids(await waitingElsewhere(t.core.store, 'job', ['cell-me', 'cell-live'])), [waitDead]);
    assert.deepEqual(ids(await waitingElsewhere(t.core.store, 'job', [])), [waitLive, waitDead].sort());
  } finally {
    await t.close();
  }
});
