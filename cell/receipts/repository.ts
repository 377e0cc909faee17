/**
 * Every SQL statement of the receipts module: the run log's pending heads,
 * its head row, its leaves and its perfect-subtree nodes (schema.ts).
 */
import { num, str } from '../store/decode.ts';
import type { Reader, Row, Tx } from '../store/types.ts';

export interface PendingHead {
  run_id: string;
  journal_head: string;
  graph_hash: string;
  source: string;
  at: number;
}

export interface LogHead {
  size: number;
  /** Hex SHA-256. */
  root: string;
}

export interface LeafRow extends PendingHead {
  idx: number;
  leaf_hash: string;
}

const decodeLeaf = (r: Row): LeafRow => ({
  idx: num(r, 'idx'),
  run_id: str(r, 'run_id'),
  journal_head: str(r, 'journal_head'),
  graph_hash: str(r, 'graph_hash'),
  source: str(r, 'source'),
  leaf_hash: str(r, 'leaf_hash'),
  at: num(r, 'at'),
});

/** Queues a run's head for the log (idempotent per run). */
export async function insertPending(tx: Tx, h: PendingHead): Promise<void> {
  await tx.run(
    'INSERT INTO run_log_pending (run_id, journal_head, graph_hash, source, at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id) DO NOTHING',
    [h.run_id, h.journal_head, h.graph_hash, h.source, h.at],
  );
}

/** The oldest pending heads. */
export async function pending(db: Reader, limit: number): Promise<PendingHead[]> {
  return (
    await db.all('SELECT run_id, journal_head, graph_hash, source, at FROM run_log_pending ORDER BY at, run_id LIMIT ?', [limit])
  ).map((r) => ({
    run_id: str(r, 'run_id'),
    journal_head: str(r, 'journal_head'),
    graph_hash: str(r, 'graph_hash'),
    source: str(r, 'source'),
    at: num(r, 'at'),
  }));
}

/** Whether a run waits to be appended. */
export async function isPending(db: Reader, runId: string): Promise<boolean> {
  return (await db.get('SELECT run_id FROM run_log_pending WHERE run_id = ?', [runId])) !== undefined;
}

/** Takes runs off the queue: one statement a run, all sent at once. */
export async function deletePending(tx: Tx, runIds: readonly string[]): Promise<void> {
  await Promise.all(runIds.map((id) => tx.run('DELETE FROM run_log_pending WHERE run_id = ?', [id])));
}

/** Locks the head row (the sequencer's first statement: appends of every cell serialize on it). */
export async function lockHead(tx: Tx, at: number): Promise<LogHead> {
  // Both sent at once: the read runs after the lock, in the same round trip.
  const [, h] = await Promise.all([tx.run('UPDATE run_log_head SET updated_at = ? WHERE id = 1', [at]), head(tx)]);
  return h;
}

export async function head(db: Reader): Promise<LogHead> {
  const r = await db.get('SELECT size, root FROM run_log_head WHERE id = 1');
  if (!r) throw new TypeError('run_log_head is missing its row');
  return { size: num(r, 'size'), root: str(r, 'root') };
}

export async function setHead(tx: Tx, h: LogHead, at: number): Promise<void> {
  await tx.run('UPDATE run_log_head SET size = ?, root = ?, updated_at = ? WHERE id = 1', [h.size, h.root, at]);
}

/** Run ids among `runIds` the log holds already (in a transaction: one statement a run, all sent at once). */
export async function logged(tx: Tx, runIds: readonly string[]): Promise<Set<string>> {
  const found = await Promise.all(runIds.map((id) => tx.get('SELECT idx FROM run_log_leaves WHERE run_id = ?', [id])));
  return new Set(runIds.filter((_, i) => found[i] !== undefined));
}

export async function insertLeaf(tx: Tx, l: LeafRow): Promise<void> {
  await tx.run('INSERT INTO run_log_leaves (idx, run_id, journal_head, graph_hash, source, leaf_hash, at) VALUES (?, ?, ?, ?, ?, ?, ?)', [
    l.idx,
    l.run_id,
    l.journal_head,
    l.graph_hash,
    l.source,
    l.leaf_hash,
    l.at,
  ]);
}

export async function insertNode(tx: Tx, level: number, idx: number, hash: string): Promise<void> {
  await tx.run('INSERT INTO run_log_nodes (level, idx, hash) VALUES (?, ?, ?)', [level, idx, hash]);
}

/**
 * The hashes of perfect nodes, by `level:idx`: a statement a level (200 nodes at most each). In a
 * transaction (`tx`) they are sent at once, on its one connection; from the pool, one after another,
 * so that one reader holds one connection at a time.
 */
export async function nodes(
  db: Reader,
  ids: readonly { level: number; index: number }[],
  opts: { together?: boolean } = {},
): Promise<Map<string, string>> {
  const byLevel = new Map<number, number[]>();
  for (const n of ids) byLevel.set(n.level, [...(byLevel.get(n.level) ?? []), n.index]);
  const reads: (() => Promise<Row[]>)[] = [];
  for (const [level, idxs] of byLevel) {
    const unique = [...new Set(idxs)];
    for (let i = 0; i < unique.length; i += 200) {
      const part = unique.slice(i, i + 200);
      reads.push(() =>
        db.all(`SELECT level, idx, hash FROM run_log_nodes WHERE level = ? AND idx IN (${part.map(() => '?').join(', ')})`, [
          level,
          ...part,
        ]),
      );
    }
  }
  const out = new Map<string, string>();
  const add = (rows: Row[]) => {
    for (const r of rows) out.set(`${num(r, 'level')}:${num(r, 'idx')}`, str(r, 'hash'));
  };
  if (opts.together) for (const rows of await Promise.all(reads.map((read) => read()))) add(rows);
  else for (const read of reads) add(await read());
  return out;
}

export async function leafByRun(db: Reader, runId: string): Promise<LeafRow | undefined> {
  const r = await db.get('SELECT idx, run_id, journal_head, graph_hash, source, leaf_hash, at FROM run_log_leaves WHERE run_id = ?', [
    runId,
  ]);
  return r ? decodeLeaf(r) : undefined;
}

export async function leafByHash(db: Reader, leafHash: string): Promise<LeafRow | undefined> {
  const r = await db.get(
    'SELECT idx, run_id, journal_head, graph_hash, source, leaf_hash, at FROM run_log_leaves WHERE leaf_hash = ? ORDER BY idx LIMIT 1',
    [leafHash],
  );
  return r ? decodeLeaf(r) : undefined;
}

/** Leaves in index order, for monitors. */
export async function leaves(db: Reader, offset: number, limit: number): Promise<LeafRow[]> {
  return (
    await db.all(
      'SELECT idx, run_id, journal_head, graph_hash, source, leaf_hash, at FROM run_log_leaves WHERE idx >= ? ORDER BY idx LIMIT ?',
      [offset, limit],
    )
  ).map(decodeLeaf);
}
