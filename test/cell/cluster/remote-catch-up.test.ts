/**
 * What a cell does when it hears another cell's journal appends (issue 21, the
 * group's cost per step): the notification names the runs appended to
 * (store WriteOptions.subjects), so a cell reads the journal of the runs its
 * subscribers follow only when one of them is named, not at every append of
 * any run of the group; a followed run's records still all arrive, in order.
 * Two in-process cells on one PostgreSQL database (PostgreSQL only: the
 * embedded engine has no group).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { startCell, type RunningCell } from '../../../cell/server.ts';
import type { JournalRecord } from '../../../core/journal/record.ts';
import { groupSecretsKeyFile } from '../../helpers/cell-process.ts';
import { TEST_ENGINE } from '../../helpers/inproc.ts';
import { pgDatabase } from '../../helpers/postgres.ts';

const quiet = { info() {}, warn() {}, error() {} };

async function until<T>(what: string, fn: () => T | null | undefined | false, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('a cell reads the journal of a run it follows only when another cell appended to that run', {
  skip: TEST_ENGINE !== 'postgres',
}, async () => {
  const db = await pgDatabase();
  const dirs: string[] = [];
  const cells: RunningCell[] = [];
  const start = async (cellId: string) => {
    const dir = mkdtempSync(join(tmpdir(), 'catch-up-'));
    dirs.push(dir);
    const c = await startCell({
      config: { dataDir: dir, cellId, storeUrl: db.url, posture: 'multi-cell', secretsKeyFile: groupSecretsKeyFile() },
      listen: false,
      log: quiet,
    });
    cells.push(c);
    return c;
  };
  try {
    const a = await start('cell-a');
    const b = await start('cell-b');
    const runsA = a.modules.runs.runs;
    const runsB = b.modules.runs.runs;
    const create = () =>
      a.core.store.write((tx) =>
        runsA.createRunTx(tx, { kind: 'job', job_type: 'compute', requester: 'p1', spec: { code: '1' }, at: Date.now() }),
      );
    const followed = await create();
    const other = await create();
    // Cell b's reads of a run's journal tail (the catch-up's statement), by run.
    const reads = new Map<string, number>();
    const store = b.core.store as unknown as { all: (sql: string, params?: unknown[]) => Promise<unknown[]> };
    const all = store.all.bind(store);
    store.all = (sql, params) => {
      if (sql.startsWith('SELECT record FROM journal WHERE run_id = ? AND seq > ?')) {
        const id = String(params?.[0]);
        reads.set(id, (reads.get(id) ?? 0) + 1);
      }
      return all(sql, params);
    };
    const seen: JournalRecord[] = [];
    const unsub = await runsB.subscribe(followed, 0, (r) => seen.push(r));
    const backlog = reads.get(followed) ?? 0;
    // Another run's appends on cell a: b hears them (one batched notification or more) and reads nothing.
    const heardBefore = (b.core.store as unknown as { stats: { remoteChanges: number } }).stats.remoteChanges;
    for (let i = 1; i <= 5; i++) await runsA.appendJournal(other, { step_id: `s${i}`, kind: 'step', data: { n: i } });
    await until(
      'b to hear the other run',
      () => (b.core.store as unknown as { stats: { remoteChanges: number } }).stats.remoteChanges > heardBefore,
    );
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(reads.get(followed) ?? 0, backlog, 'no read of the followed run for appends to another run');
    assert.equal(reads.get(other) ?? 0, 0, 'no read of a run nobody on b follows');
    // The followed run's appends on cell a reach b's subscriber, every record once, in order.
    await runsA.appendJournal(followed, { step_id: 'run', kind: 'run_started' });
    await runsA.appendJournal(followed, { step_id: 's1', kind: 'step', data: { n: 1 } });
    await runsA.finishRun(followed, 'completed', { output: { ok: 1 } });
    await until('b to deliver the followed run to its end', () => seen.at(-1)?.kind === 'run_finished');
    assert.deepEqual(
      seen.map((r) => r.seq),
      [1, 2, 3],
    );
    assert.ok((reads.get(followed) ?? 0) > backlog, 'the followed run was read when named');
    unsub();
  } finally {
    for (const c of cells.reverse()) await c.stop().catch(() => undefined);
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
    await db.drop();
  }
});
