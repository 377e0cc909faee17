/**
 * Tables of the runs module: the runs (crew and job runs, one id space),
 * their journals and content-addressed blobs, and the approvals shared by
 * every run that waits on the engine's approvals port (their tables keep the
 * names and migration ids they had under Agent Teams).
 */
import type { Migration } from '../store/types.ts';

export const RUNS_MIGRATIONS: readonly Migration[] = [
  {
    id: 'runs-001-runs',
    sql: `CREATE TABLE runs (
      run_id TEXT PRIMARY KEY,
      kind TEXT NOT NULL,
      job_type TEXT,
      crew_id TEXT,
      workspace_id TEXT,
      requester TEXT NOT NULL,
      state TEXT NOT NULL,
      graph_hash TEXT,
      spec TEXT NOT NULL,
      output TEXT,
      error TEXT,
      flags TEXT NOT NULL DEFAULT '{}',
      coordinator TEXT,
      source TEXT NOT NULL DEFAULT 'api',
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL,
      finished_at INTEGER
    );
    CREATE INDEX runs_by_created ON runs (created_at, run_id);
    CREATE INDEX runs_by_kind ON runs (kind, created_at, run_id);
    CREATE INDEX runs_by_state ON runs (state);`,
  },
  {
    id: 'runs-002-journal',
    sql: `CREATE TABLE journal (
      run_id TEXT NOT NULL,
      seq INTEGER NOT NULL,
      kind TEXT NOT NULL,
      record TEXT NOT NULL,
      PRIMARY KEY (run_id, seq)
    );
    CREATE TABLE journal_blobs (hash TEXT PRIMARY KEY, body TEXT NOT NULL);`,
  },
  {
    id: 'teams-010-approvals',
    sql: `CREATE TABLE team_approvals (run_id TEXT NOT NULL, step_id TEXT NOT NULL, principal TEXT NOT NULL, decision TEXT NOT NULL,
      comment TEXT, at INTEGER NOT NULL, PRIMARY KEY (run_id, step_id, principal))`,
  },
  {
    id: 'teams-011-approval-requests',
    sql: `CREATE TABLE team_approval_requests (run_id TEXT NOT NULL, step_id TEXT NOT NULL, body TEXT NOT NULL, at INTEGER NOT NULL,
      PRIMARY KEY (run_id, step_id))`,
  },
  {
    // The order runs were recorded in (lists page by it; PostgreSQL has no rowid), numbered
    // for existing runs by creation time; and the investigate flag as a column both engines
    // filter on (flags stays the whole set, as JSON text).
    id: 'runs-003-order-investigate',
    sql: `CREATE TABLE run_order (seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL UNIQUE);
    INSERT INTO run_order (run_id) SELECT run_id FROM runs ORDER BY created_at, run_id;
    ALTER TABLE runs ADD COLUMN investigate INTEGER NOT NULL DEFAULT 0;
    UPDATE runs SET investigate = 1 WHERE flags LIKE '%"investigate":{%';`,
  },
];
