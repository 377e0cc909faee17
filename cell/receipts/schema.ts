/**
 * Tables of the receipts module: the run log (docs/receipts.md), one
 * append-only Merkle log of finished runs' heads per store, so one for a
 * whole group of cells on PostgreSQL.
 * - `run_log_pending`: a finished run's head, written in the transaction that
 *   ends the run (or imports a device's journal); no row all runs share.
 * - `run_log_head` (one row): the tree's size and root; the sequencer locks it,
 *   so appends from every cell of a group are serialized.
 * - `run_log_leaves`: leaf index -> the run's head (one leaf per run id).
 * - `run_log_nodes`: the hash of every perfect subtree (level 0: the leaves),
 *   from which any proof is read without rehashing the tree.
 */
import type { Migration } from '../store/types.ts';

export const RECEIPTS_MIGRATIONS: readonly Migration[] = [
  {
    id: 'receipts-001-run-log',
    sql: `CREATE TABLE run_log_pending (
      run_id TEXT PRIMARY KEY,
      journal_head TEXT NOT NULL,
      graph_hash TEXT NOT NULL,
      source TEXT NOT NULL,                 -- cell:<cell id> or edge:<device id>
      at INTEGER NOT NULL
    );
    CREATE TABLE run_log_head (id INTEGER PRIMARY KEY, size INTEGER NOT NULL, root TEXT NOT NULL, updated_at INTEGER NOT NULL);
    INSERT INTO run_log_head (id, size, root, updated_at) VALUES (1, 0, 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855', 0);
    CREATE TABLE run_log_leaves (
      idx INTEGER PRIMARY KEY,
      run_id TEXT NOT NULL UNIQUE,
      journal_head TEXT NOT NULL,
      graph_hash TEXT NOT NULL,
      source TEXT NOT NULL,
      leaf_hash TEXT NOT NULL,              -- hex
      at INTEGER NOT NULL
    );
    CREATE INDEX run_log_leaves_hash ON run_log_leaves (leaf_hash);
    CREATE TABLE run_log_nodes (level INTEGER NOT NULL, idx INTEGER NOT NULL, hash TEXT NOT NULL, PRIMARY KEY (level, idx));`,
  },
];
