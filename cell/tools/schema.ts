/**
 * Tables of the tools module: the workspace storage of the kv tools (`tool_kv`), the catalog's
 * sources (`tool_sources`: MCP servers whose tools the catalog imports) and the pins of their
 * imported tools (`tool_pins`: the reviewed definition and its content hash, docs/tools.md).
 */
import type { Migration } from '../store/types.ts';

export const TOOLS_MIGRATIONS: readonly Migration[] = [
  {
    id: 'tools-001-kv',
    sql: `CREATE TABLE tool_kv (
      workspace_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, classification INTEGER NOT NULL DEFAULT 0,
      updated_at INTEGER NOT NULL, updated_by TEXT NOT NULL, PRIMARY KEY (workspace_id, key))`,
  },
  { id: 'tools-002-kv-compartments', sql: "ALTER TABLE tool_kv ADD COLUMN compartments TEXT NOT NULL DEFAULT '[]'" },
  {
    id: 'tools-003-sources',
    sql: `CREATE TABLE tool_sources (
      source_id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, transport TEXT NOT NULL, url TEXT, auth TEXT NOT NULL,
      origin TEXT NOT NULL, description TEXT NOT NULL DEFAULT '', definition_max_age_ms INTEGER NOT NULL, timeout_ms INTEGER NOT NULL,
      bound_by TEXT, created_at INTEGER NOT NULL, created_by TEXT NOT NULL, updated_at INTEGER NOT NULL);
    CREATE TABLE tool_pins (
      source_id TEXT NOT NULL, tool TEXT NOT NULL, name TEXT NOT NULL UNIQUE, definition TEXT NOT NULL, pin TEXT NOT NULL,
      pinned_at INTEGER NOT NULL, pinned_by TEXT NOT NULL, PRIMARY KEY (source_id, tool))`,
  },
];
