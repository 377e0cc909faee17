/**
 * The storage fold (cell/runs/repository.ts foldStorage): every run's unfolded
 * share (run_storage_unfolded) is summed into its run's count (run_storage)
 * and the cell's and the workspaces' totals, subtracted from the share, and a
 * share left at nothing is removed, on both engines; and the migration that
 * moved the shares out of run_storage (runs-009) keeps every byte counted.
 */
import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';
import { MIGRATIONS } from '../../../cell/migrations.ts';
import pg from 'pg';
import { addStorage, addStorages, foldStorage, runStorageBytes, storageUsage } from '../../../cell/runs/repository.ts';
import { openStore } from '../../../cell/store/open.ts';
import { inProcessCell } from '../../helpers/inproc.ts';
import { ENGINES } from '../store/_util.ts';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

test('the fold moves every unfolded share into its run and the totals, workspace by workspace, and leaves none behind', async () => {
  const t = await inProcessCell();
  try {
    const total = async (scope: string) =>
      Number((await t.row('SELECT bytes FROM storage_totals WHERE scope = ?', [scope]))?.['bytes'] ?? 0);
    const cellBefore = await total('cell');
    const usageBefore = await storageUsage(t.core.store, 'ws-fold-1');
    const shares: [string, string | null, number][] = [
      ['run_fold_a', 'ws-fold-1', 100],
      ['run_fold_b', 'ws-fold-1', 250],
      ['run_fold_c', 'ws-fold-2', 7],
      ['run_fold_d', null, 1000],
    ];
    await t.core.store.write(async (tx) => {
      // run_fold_a was folded before: its count keeps what it had.
      await tx.run('INSERT INTO run_storage (run_id, workspace_id, bytes) VALUES (?, ?, ?)', ['run_fold_a', 'ws-fold-1', 40]);
      for (const [id, ws, n] of shares) await addStorage(tx, id, ws, n);
    });
    assert.equal(await runStorageBytes(t.core.store, 'run_fold_a'), 140, 'a run counts its folded bytes and its share');
    assert.equal(await runStorageBytes(t.core.store, 'run_fold_b'), 250);
    assert.equal(await runStorageBytes(t.core.store, 'run_fold_none'), null, 'a run never metered');
    const usage = await storageUsage(t.core.store, 'ws-fold-1');
    assert.deepEqual(
      { cell: usage.cell - usageBefore.cell, workspace: usage.workspace - usageBefore.workspace },
      { cell: 1357, workspace: 350 },
      'the limits read the shares before they are folded',
    );

    await t.core.store.write((tx) => foldStorage(tx), { isolation: 'row-locks' });
    assert.equal((await total('cell')) - cellBefore, 1357 + (usageBefore.cell - cellBefore), 'the cell total gained every share');
    assert.equal(await total('workspace:ws-fold-1'), 350);
    assert.equal(await total('workspace:ws-fold-2'), 7);
    const counts = await t.rows("SELECT run_id, bytes FROM run_storage WHERE run_id LIKE 'run_fold_%' ORDER BY run_id");
    assert.deepEqual(
      counts.map((r) => [r['run_id'], Number(r['bytes'])]),
      [
        ['run_fold_a', 140],
        ['run_fold_b', 250],
        ['run_fold_c', 7],
        ['run_fold_d', 1000],
      ],
      "each share is added to its run's count",
    );
    assert.deepEqual(await t.rows('SELECT run_id FROM run_storage_unfolded'), [], 'no share is left');
    assert.deepEqual(await storageUsage(t.core.store, 'ws-fold-1'), usage, 'the storage in use did not change');
    assert.equal(await runStorageBytes(t.core.store, 'run_fold_a'), 140);

    // A share added after a fold is folded by the next one, once.
    await t.core.store.write((tx) => addStorage(tx, 'run_fold_c', 'ws-fold-2', 5));
    assert.equal(await runStorageBytes(t.core.store, 'run_fold_c'), 12);
    await t.core.store.write((tx) => foldStorage(tx), { isolation: 'row-locks' });
    assert.equal(await t.core.store.write((tx) => foldStorage(tx), { isolation: 'row-locks' }), 0, 'nothing left to fold');
    assert.equal(await total('workspace:ws-fold-2'), 12);
    assert.equal(await runStorageBytes(t.core.store, 'run_fold_c'), 12);
  } finally {
    await t.close();
  }
});

for (const engine of ENGINES) {
  test(`runs-009 moves every unfolded share to run_storage_unfolded and leaves each run's count as it was (${engine.name})`, {
    skip: engine.skip,
  }, async () => {
    const place = await engine.fresh();
    cleanups.push(() => place.cleanup());
    const before = MIGRATIONS.filter((m) => m.id !== 'runs-009-unfolded-shares');
    assert.equal(before.length, MIGRATIONS.length - 1);
    const old = await openStore(place.config, { migrations: before, log: () => undefined });
    await old.write(async (tx) => {
      // As the runs-005 schema kept them: bytes is the run's whole count, unfolded the part not in the totals.
      const rows: [string, string | null, number, number][] = [
        ['run_m_a', 'ws-m', 900, 300],
        ['run_m_b', null, 50, 50],
        ['run_m_c', 'ws-m', 70, 0],
      ];
      for (const r of rows) await tx.run('INSERT INTO run_storage (run_id, workspace_id, bytes, unfolded) VALUES (?, ?, ?, ?)', r);
    });
    await old.close();
    const store = await openStore(place.config, { migrations: MIGRATIONS, log: () => undefined });
    cleanups.push(() => store.close());
    assert.deepEqual(
      (await store.all('SELECT run_id, workspace_id, bytes FROM run_storage_unfolded ORDER BY run_id')).map((r) => ({
        ...r,
        bytes: Number(r['bytes']),
      })),
      [
        { run_id: 'run_m_a', workspace_id: 'ws-m', bytes: 300 },
        { run_id: 'run_m_b', workspace_id: null, bytes: 50 },
      ],
    );
    for (const [id, n] of [
      ['run_m_a', 900],
      ['run_m_b', 50],
      ['run_m_c', 70],
    ] as const)
      assert.equal(await runStorageBytes(store, id), n, `${id} counts what it counted`);
    assert.deepEqual(await storageUsage(store, 'ws-m'), { cell: 350, workspace: 300 }, 'the shares not folded are still in use');
    const folded = await store.write((tx) => foldStorage(tx), { isolation: 'row-locks' });
    assert.equal(folded, 350);
    assert.deepEqual(await storageUsage(store, 'ws-m'), { cell: 350, workspace: 300 });
    assert.equal(await runStorageBytes(store, 'run_m_a'), 900);
  });
}

const postgres = ENGINES.find((e) => e.name === 'postgres')!;

/**
 * Lock order (PostgreSQL): the fold and a group of appends both take the shares' rows in run id order,
 * so neither holds one the other waits for while it waits for another (a deadlock, which PostgreSQL
 * breaks only after its deadlock_timeout). Another connection holds run_lock_a's share; the writer
 * under test must then wait there before it takes run_lock_b's, which a third connection can
 * still lock at once. The rows are inserted b first, so a plan reading the table in order would
 * take b first (as the fold's single UPDATE over every share did).
 */
for (const writer of ['the fold', 'a group of appends'] as const) {
  test(`${writer} takes the shares' rows in run id order (postgres)`, { skip: postgres.skip }, async () => {
    const place = await postgres.fresh();
    cleanups.push(() => place.cleanup());
    const store = await openStore(place.config, { migrations: MIGRATIONS, log: () => undefined });
    cleanups.push(() => store.close());
    await store.write(async (tx) => {
      await addStorage(tx, 'run_lock_b', 'ws', 20);
      await addStorage(tx, 'run_lock_a', 'ws', 10);
    });
    const url = (place.config as { url: string }).url;
    const holder = new pg.Client({ connectionString: url });
    const other = new pg.Client({ connectionString: url });
    await holder.connect();
    await other.connect();
    cleanups.push(async () => {
      await holder.end().catch(() => undefined);
      await other.end().catch(() => undefined);
    });
    await holder.query('BEGIN');
    await holder.query("UPDATE run_storage_unfolded SET bytes = bytes WHERE run_id = 'run_lock_a'");
    const written =
      writer === 'the fold'
        ? store.write((tx) => foldStorage(tx), { isolation: 'row-locks' })
        : store.write(
            (tx) =>
              addStorages(tx, [
                { runId: 'run_lock_b', workspaceId: 'ws', bytes: 2 },
                { runId: 'run_lock_a', workspaceId: 'ws', bytes: 1 },
              ]),
            { isolation: 'row-locks' },
          );
    // The writer is waiting for run_lock_a (held above) when run_lock_b is still free.
    for (let i = 0; i < 100; i++) {
      const w = await other.query(
        "SELECT COUNT(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
      );
      if (Number(w.rows[0].n) > 0) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    await other.query('BEGIN');
    await other.query("SET LOCAL lock_timeout = '2s'");
    await other.query("UPDATE run_storage_unfolded SET bytes = bytes WHERE run_id = 'run_lock_b'");
    await other.query('ROLLBACK');
    await holder.query('ROLLBACK');
    await written;
    if (writer === 'the fold') {
      assert.deepEqual(await store.all('SELECT run_id FROM run_storage_unfolded'), [], 'both shares folded');
      assert.equal(await runStorageBytes(store, 'run_lock_b'), 20);
    } else assert.equal(await runStorageBytes(store, 'run_lock_b'), 22);
  });
}
