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
    // Providers can change (PATCH): when they were last changed, and whose right to the secret a
    // call relies on (the principal that last chose the pair base_url + secret; the registrant until then).
    id: 'ai-004-provider-lifecycle',
    sql: `ALTER TABLE ai_providers ADD COLUMN updated_at INTEGER;
    UPDATE ai_providers SET updated_at = created_at;
    ALTER TABLE ai_providers ADD COLUMN bound_by TEXT;
    UPDATE ai_providers SET bound_by = created_by;`,
  },
  {
    // One value sealed under the secrets key the store's secrets are sealed with, so a cell given another key
    // (a group member without the group's --secrets-key-file) is refused at start (moved to custody_key_check by custody-001: cell/custody/key-check.ts).
    id: 'ai-005-secrets-key-check',
    sql: 'CREATE TABLE ai_secrets_key_check (id INTEGER PRIMARY KEY, sealed BLOB NOT NULL, created_at INTEGER NOT NULL)',
  },
  {
    // Secret metadata (issue 14): when the value was last replaced, and last opened for a provider call.
    id: 'ai-006-secret-rotation-and-use',
    sql: `ALTER TABLE ai_secrets ADD COLUMN rotated_at INTEGER;
    ALTER TABLE ai_secrets ADD COLUMN last_used_at INTEGER;
    CREATE INDEX ai_providers_secret ON ai_providers(api_key_secret_id)`,
  },
];
