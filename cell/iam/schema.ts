/** Tables of the IAM module: principals, custom roles, API keys, tombstones, audit, the cell's keys. */
import type { Migration } from '../store/types.ts';

export const IAM_MIGRATIONS: readonly Migration[] = [
  {
    id: 'iam-001-principals',
    sql: `CREATE TABLE principals (
      id TEXT PRIMARY KEY, kind TEXT NOT NULL, name TEXT NOT NULL UNIQUE, status TEXT NOT NULL,
      roles TEXT NOT NULL, password_hash TEXT, created_at INTEGER NOT NULL, created_by TEXT,
      status_changed_at INTEGER);
    CREATE TABLE roles (name TEXT PRIMARY KEY, permissions TEXT NOT NULL, description TEXT,
      created_at INTEGER NOT NULL, created_by TEXT NOT NULL);`,
  },
  {
    id: 'iam-002-api-keys',
    sql: `CREATE TABLE api_keys (
      id TEXT PRIMARY KEY, owner_id TEXT NOT NULL, name TEXT NOT NULL, hash TEXT NOT NULL UNIQUE,
      prev_hash TEXT, prev_not_after INTEGER, scopes TEXT NOT NULL, rate_limit_rpm INTEGER,
      allowed_ips TEXT NOT NULL, allowed_regions TEXT NOT NULL, status TEXT NOT NULL,
      created_at INTEGER NOT NULL, created_by TEXT NOT NULL, expires_at INTEGER,
      rotated_at INTEGER, revoked_at INTEGER, deleted_at INTEGER);
    CREATE INDEX api_keys_owner ON api_keys(owner_id);
    CREATE INDEX api_keys_prev_hash ON api_keys(prev_hash);
    CREATE TABLE key_tombstones (key_id TEXT PRIMARY KEY, owner_id TEXT NOT NULL, at INTEGER NOT NULL, reason TEXT NOT NULL);`,
  },
  {
    id: 'iam-003-audit',
    sql: `CREATE TABLE audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER NOT NULL, actor TEXT NOT NULL,
      action TEXT NOT NULL, target TEXT NOT NULL, outcome TEXT NOT NULL, details TEXT);`,
  },
  {
    id: 'iam-004-cell-keys',
    sql: `CREATE TABLE cell_keys (kid TEXT PRIMARY KEY, purpose TEXT NOT NULL, private_jwk TEXT NOT NULL,
      public_jwk TEXT NOT NULL, created_at INTEGER NOT NULL, retired_at INTEGER);`,
  },
  {
    // Envelope ceilings (core/authority/ceiling.ts). Existing principals hold the least
    // authority, except the bootstrap owner; a key's NULL cap is its owner's full ceiling.
    id: 'iam-005-authority-ceilings',
    sql: `ALTER TABLE principals ADD COLUMN authority TEXT NOT NULL DEFAULT '{}';
    UPDATE principals SET authority = '"unbounded"' WHERE roles LIKE '%"owner"%';
    ALTER TABLE api_keys ADD COLUMN authority TEXT;`,
  },
  {
    // Requests-per-minute buckets a group of cells shares (cell/iam/rate-buckets.ts): one row per
    // credential (or endpoint) with an rpm, while it is not full; full rows are pruned.
    id: 'iam-006-rate-buckets',
    sql: `CREATE TABLE iam_rate_buckets (bucket_key TEXT PRIMARY KEY, tokens REAL NOT NULL, at INTEGER NOT NULL);
    CREATE INDEX iam_rate_buckets_at ON iam_rate_buckets (at);`,
  },
  {
    // Identity keys per cell: each cell of a group signs its journals with a key of its own,
    // so a record's signer names the cell that wrote it. A key recorded before (no cell id)
    // becomes the key of the first cell that starts after this migration (iam.ts ensureIdentity).
    id: 'iam-007-cell-keys-per-cell',
    sql: `ALTER TABLE cell_keys ADD COLUMN cell_id TEXT;
    CREATE INDEX cell_keys_by_cell ON cell_keys (purpose, cell_id);`,
  },
];
