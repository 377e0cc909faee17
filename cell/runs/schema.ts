/**
 * Tables of the runs module: the runs (crew and job runs, one id space),
 * their journals and content-addressed blobs, and the approvals shared by
 * every run that waits on the engine's approvals port (their tables keep the
 * names and migration ids they had under Agent Teams), and the operators' resolutions of
 * calls whose outcome was lost.
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
  {
    // What runs keep in the store, metered against the run cap and the workspace and cell
    // quotas (storage.ts). Runs recorded before metering are counted from their row and
    // their records (the step values they name are not counted). An embedded store that
    // applied the first, SQLite-only text of this migration keeps what it counted then.
    id: 'runs-003-storage',
    sql: `CREATE TABLE run_storage (run_id TEXT PRIMARY KEY, workspace_id TEXT, bytes INTEGER NOT NULL);
    CREATE TABLE storage_totals (scope TEXT PRIMARY KEY, bytes INTEGER NOT NULL);
    INSERT INTO run_storage (run_id, workspace_id, bytes)
      SELECT r.run_id, r.workspace_id,
        OCTET_LENGTH(r.spec) + COALESCE(OCTET_LENGTH(r.output), 0) + COALESCE(OCTET_LENGTH(r.error), 0)
        + COALESCE((SELECT SUM(OCTET_LENGTH(j.record)) FROM journal j WHERE j.run_id = r.run_id), 0)
      FROM runs r;
    INSERT INTO storage_totals (scope, bytes) SELECT 'cell', COALESCE(SUM(bytes), 0) FROM run_storage;
    INSERT INTO storage_totals (scope, bytes)
      SELECT 'workspace:' || workspace_id, SUM(bytes) FROM run_storage WHERE workspace_id IS NOT NULL GROUP BY workspace_id;`,
  },
  {
    // Run ownership in a group of cells (cell/runs/lease.ts): the cell holding the run's lease and
    // the lease's fencing token, and what the executing cell must meet (placement), so every claim,
    // a takeover included, enforces it. A run recorded before has no owner and no constraint.
    id: 'runs-004-lease',
    sql: `ALTER TABLE runs ADD COLUMN lease_owner TEXT;
    ALTER TABLE runs ADD COLUMN lease_epoch INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN need_clearance INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN need_topology TEXT NOT NULL DEFAULT '{}';`,
  },
  {
    // The hot path of a run (journal.ts): each append stamps the run's last journal progress
    // (a run with none for several leases is `stalled`), and meters into the run's own share
    // (`unfolded`: bytes not yet summed into storage_totals), which a background fold sums off
    // the path, so no step writes a row that all runs share (storage.ts).
    id: 'runs-005-hot-path',
    sql: `ALTER TABLE runs ADD COLUMN progress_at INTEGER;
    ALTER TABLE run_storage ADD COLUMN unfolded INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX run_storage_unfolded ON run_storage (unfolded);`,
  },
  {
    // An approval is consent to exactly what was approved (docs/security.md): each decision keeps
    // the deciding chain (the principal and the actors of the token it decided with, JSON) and the
    // digest of the step input it approved. Decisions from before have neither, and approve nothing.
    id: 'runs-006-approval-chains',
    sql: `ALTER TABLE team_approvals ADD COLUMN chain TEXT;
    ALTER TABLE team_approvals ADD COLUMN input_hash TEXT;`,
  },
  {
    // An operator's resolution of a side-effecting call whose outcome was lost (a run waiting
    // outcome_unknown, outcomes.ts): one per attempt of the call it resolves. The engine reads it
    // through its outcomes port when the run is driven again.
    id: 'runs-007-outcome-resolutions',
    sql: `CREATE TABLE run_outcome_resolutions (run_id TEXT NOT NULL, step_id TEXT NOT NULL, attempt INTEGER NOT NULL,
      resolution TEXT NOT NULL, result TEXT, principal TEXT NOT NULL, comment TEXT, at INTEGER NOT NULL,
      PRIMARY KEY (run_id, step_id, attempt))`,
  },
  {
    // Why a run ended badly, as a column the run lists filter on (issue 43: runs searched by failure
    // reason; no JSON functions in SQL): the error's reason, else its code. Written with the error
    // (repository.ts updateRunState); runs that ended before it are filled in from their stored error
    // when the module starts (backfillErrorReasons), since the dialect cannot read JSON.
    id: 'runs-008-error-reason',
    sql: `ALTER TABLE runs ADD COLUMN error_reason TEXT;
    CREATE INDEX runs_by_error_reason ON runs (error_reason);`,
  },
  {
    // The runs' storage shares not yet summed into the totals, in a table of their own (issue 40):
    // a row per run that wrote since the last fold, removed by the fold that sums it. The shares
    // were a column of run_storage (a row per run ever kept) under an index, which every append
    // updated: no update was HOT, and the limits' sum over the shares read every dead version the
    // index kept (0.2–0.5 ms a read under load). run_storage.bytes is now the run's folded bytes; a
    // run's count is that plus its share (repository.ts runStorageBytes).
    id: 'runs-009-unfolded-shares',
    sql: `DROP INDEX run_storage_unfolded;
    CREATE TABLE run_storage_unfolded (run_id TEXT PRIMARY KEY, workspace_id TEXT, bytes INTEGER NOT NULL);
    INSERT INTO run_storage_unfolded (run_id, workspace_id, bytes) SELECT run_id, workspace_id, unfolded FROM run_storage WHERE unfolded > 0;
    UPDATE run_storage SET bytes = bytes - unfolded WHERE unfolded > 0;
    ALTER TABLE run_storage DROP COLUMN unfolded;`,
  },
];
