/** Tables of the jobs module: definitions (scheduled jobs) and their fires, published endpoints. Migration ids are never renamed. */
import type { Migration } from '../store/types.ts';

const DEFINITIONS_MIGRATIONS: readonly Migration[] = [
  {
    id: 'jobs-001-definitions',
    sql: `CREATE TABLE job_definitions (
      schedule_id TEXT PRIMARY KEY,
      name TEXT NOT NULL,
      job_type TEXT NOT NULL,
      workspace_id TEXT NOT NULL,
      spec TEXT NOT NULL,
      cron TEXT NOT NULL,
      timezone TEXT NOT NULL,
      catch_up TEXT NOT NULL,
      enabled INTEGER NOT NULL,
      deleted_at INTEGER,
      next_fire_at INTEGER,
      last_fire_at INTEGER,
      last_run_id TEXT,
      fire_count INTEGER NOT NULL DEFAULT 0,
      skip_count INTEGER NOT NULL DEFAULT 0,
      lease_owner TEXT,
      lease_until INTEGER,
      created_by TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL
    );
    CREATE INDEX job_definitions_due ON job_definitions (next_fire_at) WHERE enabled = 1 AND deleted_at IS NULL;
    CREATE TABLE job_fires (
      schedule_id TEXT NOT NULL,
      fire_at INTEGER NOT NULL,
      state TEXT NOT NULL,
      run_id TEXT,
      detail TEXT,
      cell_id TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      PRIMARY KEY (schedule_id, fire_at)
    );
    CREATE INDEX job_fires_pending ON job_fires (state);`,
  },
  {
    // Who a definition acts as, within which authority, and why it is disabled.
    // Definitions authored before this have no recorded authority: they are
    // disabled at their next fire (author_authority_unknown) until re-enabled.
    id: 'jobs-002-definition-authors',
    sql: `ALTER TABLE job_definitions ADD COLUMN author_id TEXT;
    ALTER TABLE job_definitions ADD COLUMN author_authority TEXT;
    ALTER TABLE job_definitions ADD COLUMN disabled_reason TEXT;
    UPDATE job_definitions SET author_id = created_by;
    UPDATE job_definitions SET disabled_reason = 'requested' WHERE enabled = 0;
    CREATE INDEX job_definitions_by_author ON job_definitions (author_id) WHERE deleted_at IS NULL;`,
  },
];

const ENDPOINTS_MIGRATIONS: readonly Migration[] = [
  {
    id: 'jobs-002-endpoints',
    sql: `CREATE TABLE job_endpoints (
      endpoint_id TEXT PRIMARY KEY,
      name TEXT NOT NULL,
      job_type TEXT NOT NULL,
      workspace_id TEXT NOT NULL,
      spec TEXT NOT NULL,
      rate_limit_rpm INTEGER NOT NULL,
      required_scopes TEXT NOT NULL,
      input_schema TEXT,
      mode TEXT NOT NULL,
      sync_timeout_ms INTEGER NOT NULL,
      created_by TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      deleted_at INTEGER
    );`,
  },
];

const SQL_WORKSPACE_MIGRATIONS: readonly Migration[] = [
  {
    // Per workspace SQL database: the key that names its jobs' effect records
    // (never shown to a job, so a job cannot forge another run's record) and,
    // on the PostgreSQL engine, the password of the login role its jobs run as.
    id: 'jobs-003-sql-workspaces',
    sql: `CREATE TABLE job_sql_workspaces (
      workspace_id TEXT PRIMARY KEY,
      effect_key TEXT NOT NULL,
      role_password TEXT NOT NULL,
      created_at INTEGER NOT NULL
    );`,
  },
];

const DEFINITION_ROOT_MIGRATIONS: readonly Migration[] = [
  {
    // The API key a definition was last authored through (`api_key:<id>`), when its
    // credential derives from one: the definition lives, and is capped, with that key
    // (definition-authority.ts). Null for a console session or a key-less token.
    id: 'jobs-004-definition-root',
    sql: 'ALTER TABLE job_definitions ADD COLUMN author_root TEXT;',
  },
];

export const JOBS_MIGRATIONS: readonly Migration[] = [
  ...DEFINITIONS_MIGRATIONS,
  ...ENDPOINTS_MIGRATIONS,
  ...SQL_WORKSPACE_MIGRATIONS,
  ...DEFINITION_ROOT_MIGRATIONS,
];
