/**
 * Tables of the custody module: the group's key check, a known value sealed
 * under the group's secrets key by the first process that starts on the store
 * (cell/custody/key-check.ts). It was the ai module's (`ai_secrets_key_check`,
 * ai-005), recorded only once a provider secret was sealed and only on
 * PostgreSQL; custody-001 moves the value recorded there, so a group's cells
 * keep proving their key against the same check.
 */
import type { Migration } from '../store/types.ts';

export const CUSTODY_MIGRATIONS: readonly Migration[] = [
  {
    id: 'custody-001-key-check',
    sql: `CREATE TABLE custody_key_check (id INTEGER PRIMARY KEY, sealed BLOB NOT NULL, created_at INTEGER NOT NULL);
    INSERT INTO custody_key_check (id, sealed, created_at) SELECT id, sealed, created_at FROM ai_secrets_key_check;
    DROP TABLE ai_secrets_key_check`,
  },
];
