/**
 * The storage fold (cell/runs/repository.ts foldStorage): every run's unfolded
 * share is summed into the cell's and the workspaces' totals and subtracted
 * from the share, in one statement for all the runs, on both engines.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { foldStorage } from '../../../cell/runs/repository.ts';
import { inProcessCell } from '../../helpers/inproc.ts';

test('the fold moves every unfolded share into the totals, workspace by workspace, and leaves none behind', async () => {
  const t = await inProcessCell();
  try {
    const total = async (scope: string) =>
      Number((await t.row('SELECT bytes FROM storage_totals WHERE scope = ?', [scope]))?.['bytes'] ?? 0);
    const cellBefore = await total('cell');
    const shares: [string, string | null, number][] = [
      ['run_fold_a', 'ws-fold-1', 100],
      ['run_fold_b', 'ws-fold-1', 250],
      ['run_fold_c', 'ws-fold-2', 7],
      ['run_fold_d', null, 1000],
    ];
    await t.core.store.write(async (tx) => {
      for (const [id, ws, n] of shares)
        await tx.run('INSERT INTO run_storage (run_id, workspace_id, bytes, unfolded) VALUES (?, ?, ?, ?)', [id, ws, n, n]);
    });
    await t.core.store.write((tx) => foldStorage(tx), { isolation: 'row-locks' });
    assert.equal((await total('cell')) - cellBefore, 1357, 'the cell total gained every share');
    assert.equal(await total('workspace:ws-fold-1'), 350);
    assert.equal(await total('workspace:ws-fold-2'), 7);
    const left = await t.rows("SELECT run_id, unfolded, bytes FROM run_storage WHERE run_id LIKE 'run_fold_%' ORDER BY run_id");
    assert.deepEqual(
      left.map((r) => [r['run_id'], Number(r['unfolded']), Number(r['bytes'])]),
      shares.map(([id, , n]) => [id, 0, n]),
      'each share is subtracted, the run bytes kept',
    );
    // A share added after a fold is folded by the next one, once.
    await t.core.store.write((tx) =>
      tx.run("UPDATE run_storage SET unfolded = unfolded + 5, bytes = bytes + 5 WHERE run_id = 'run_fold_c'"),
    );
    await t.core.store.write((tx) => foldStorage(tx), { isolation: 'row-locks' });
    await t.core.store.write((tx) => foldStorage(tx), { isolation: 'row-locks' });
    assert.equal(await total('workspace:ws-fold-2'), 12);
    assert.equal((await total('cell')) - cellBefore, 1362);
  } finally {
    await t.close();
  }
});
