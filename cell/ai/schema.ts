/** Tables of the AI module: provider secrets (sealed) and model providers. */
import type { Migration } from '../store/types.ts';

export const AI_MIGRATIONS: readonly Migration[] = [
  {
    id: 'ai-001-secrets',
    sql: 'CREATE TABLE ai_secrets (secret_id TEXT PRIMARY KEY, name TEXT NOT NULL, sealed BLOB NOT NULL, created_at INTEGER NOT NULL, created_by TEXT NOT NULL)',
  },
  {
    id: 'ai-002-providers',
    sql: `CREATE TABLE ai_providers (provider_id TEXT PRIMARY KEY, name TEXT NOT NULL, provider_type TEXT NOT NULL, default_model TEXT NOT NULL,
        base_url TEXT, api_key_secret_id TEXT, timeout_ms INTEGER NOT NULL, max_retries INTEGER NOT NULL,
        created_at INTEGER NOT NULL, created_by TEXT NOT NULL)`,
  },
  { id: 'ai-003-provider-stream', sql: 'ALTER TABLE ai_providers ADD COLUMN stream INTEGER NOT NULL DEFAULT 0' },
  {
    // One value sealed under the secrets key the store's secrets are sealed with, so a cell given another key
    // (a group member without the group's --secrets-key-file) is refused at start (cell/ai/secrets-key.ts).
    id: 'ai-004-secrets-key-check',
    sql: 'CREATE TABLE ai_secrets_key_check (id INTEGER PRIMARY KEY, sealed BLOB NOT NULL, created_at INTEGER NOT NULL)',
  },
];
