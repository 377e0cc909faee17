/**
 * Tables of the cluster module: the members of the group of cells that share
 * one store (docs/multi-cell.md). One row per cell id that ever started on the
 * store; its heartbeat is the only write a cell makes to stay a member (one
 * write per cell per interval, never one per run).
 */
import type { Migration } from '../store/types.ts';

export const CLUSTER_MIGRATIONS: readonly Migration[] = [
  {
    id: 'cluster-001-cells',
    sql: `CREATE TABLE cells (
      cell_id TEXT PRIMARY KEY,
      region TEXT NOT NULL,
      clearance INTEGER NOT NULL,
      topology TEXT NOT NULL,
      posture TEXT NOT NULL,
      url TEXT,
      heartbeat_ms INTEGER NOT NULL,
      lease_ms INTEGER NOT NULL,
      started_at INTEGER NOT NULL,
      heartbeat_at INTEGER NOT NULL,
      stopped_at INTEGER
    )`,
  },
  {
    // member_key: SHA-256 of the secret in the member's data directory (an impostor with the same
    // --cell-id cannot beat or stop its row); clock_offset_ms: the cell's clock minus the database's,
    // as it measured at its last heartbeat.
    id: 'cluster-002-member-key-clock-offset',
    sql: `ALTER TABLE cells ADD COLUMN member_key TEXT;
    ALTER TABLE cells ADD COLUMN clock_offset_ms INTEGER`,
  },
];
