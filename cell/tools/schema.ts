/** Tables of the tools module: the workspace storage of the kv tools (`tool_kv`). */
import type { Migration } from '../store/types.ts';

export const TOOLS_MIGRATIONS: readonly Migration[] = [
  {
    id: 'tools-001-kv',
    sql: `CREATE TABLE tool_kv (
      workspace_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, classification INTEGER NOT NULL DEFAULT 0,
      updated_at INTEGER NOT NULL, updated_by TEXT NOT NULL, PRIMARY KEY (workspace_id, key))`,
  },
  { id: 'tools-002-kv-compartments', sql: "ALTER TABLE tool_kv ADD COLUMN compartments TEXT NOT NULL DEFAULT '[]'" },
];
