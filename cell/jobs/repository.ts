/**
 * Every SQL statement of the jobs module: definitions (scheduled jobs), their
 * fires, published endpoints and the SQL workspaces' secrets, with the row decoders. The run table and
 * the journal belong to the runs module (cell/runs/repository.ts).
 * Statements stay in the dialect both engines run (docs/storage.md).
 */
import { count, json, jsonOrNull, num, numOrNull, object, str, strOrNull, stringArray, anyJson } from '../store/decode.ts';
import type { Reader, Row, Tx } from '../store/types.ts';
import type { DefinitionJobType } from './shapes.ts';

// ---------------------------------------------------------------- definitions

export interface Definition {
  schedule_id: string;
  name: string;
  job_type: DefinitionJobType;
  workspace_id: string;
  spec: unknown;
  cron: string;
  timezone: string;
  catch_up: 'once' | 'skip';
  enabled: boolean;
  deleted_at: number | null;
  next_fire_at: number | null;
  last_fire_at: number | null;
  last_run_id: string | null;
  fire_count: number;
  skip_count: number;
  lease_owner: string | null;
  lease_until: number | null;
  created_by: string;
  /** The principal the definition acts as: whoever last created, changed or enabled it. */
  author_id: string;
  /** JSON selectors: the author's effective authority when authoring; null for definitions from before it was recorded. */
  author_authority: string | null;
  /** The API key (`api_key:<id>`) the author acted through, when its credential derives from one; null otherwise. */
  author_root: string | null;
  /** Why a disabled definition is disabled: requested, author_archived / _deleted / _purged, author_inactive, author_lacks_permission, author_authority_unknown, author_lacks_authority, root_revoked, root_expired, root_lacks_permission, root_lacks_authority. */
  disabled_reason: string | null;
  created_at: number;
  updated_at: number;
}

const JOB_TYPES: readonly DefinitionJobType[] = ['compute', 'notebook', 'sql', 'agent', 'team'];

function decodeDefinition(r: Row): Definition {
  const jobType = str(r, 'job_type');
  if (!(JOB_TYPES as readonly string[]).includes(jobType)) throw new TypeError(`store row: unknown job_type ${jobType}`);
  const catchUp = str(r, 'catch_up');
  if (catchUp !== 'once' && catchUp !== 'skip') throw new TypeError(`store row: unknown catch_up ${catchUp}`);
  return {
    schedule_id: str(r, 'schedule_id'),
    name: str(r, 'name'),
    job_type: jobType as DefinitionJobType,
    workspace_id: str(r, 'workspace_id'),
    spec: json(r, 'spec', anyJson),
    cron: str(r, 'cron'),
    timezone: str(r, 'timezone'),
    catch_up: catchUp,
    enabled: num(r, 'enabled') === 1,
    deleted_at: numOrNull(r, 'deleted_at'),
    next_fire_at: numOrNull(r, 'next_fire_at'),
    last_fire_at: numOrNull(r, 'last_fire_at'),
    last_run_id: strOrNull(r, 'last_run_id'),
    fire_count: num(r, 'fire_count'),
    skip_count: num(r, 'skip_count'),
    lease_owner: strOrNull(r, 'lease_owner'),
    lease_until: numOrNull(r, 'lease_until'),
    created_by: str(r, 'created_by'),
    author_id: strOrNull(r, 'author_id') ?? str(r, 'created_by'),
    author_authority: strOrNull(r, 'author_authority'),
    author_root: strOrNull(r, 'author_root'),
    disabled_reason: strOrNull(r, 'disabled_reason'),
    created_at: num(r, 'created_at'),
    updated_at: num(r, 'updated_at'),
  };
}

const DEF_COLUMNS =
  'schedule_id, name, job_type, workspace_id, spec, cron, timezone, catch_up, enabled, deleted_at, next_fire_at, last_fire_at, ' +
  'last_run_id, fire_count, skip_count, lease_owner, lease_until, created_by, author_id, author_authority, author_root, disabled_reason, created_at, updated_at';

export async function definitionById(db: Reader, id: string): Promise<Definition | undefined> {
  const r = await db.get(`SELECT ${DEF_COLUMNS} FROM job_definitions WHERE schedule_id = ?`, [id]);
  return r ? decodeDefinition(r) : undefined;
}

export async function listDefinitions(
  db: Reader,
  o: { limit: number; offset: number; includeDeleted: boolean },
): Promise<{ items: Definition[]; total: number }> {
  const w = o.includeDeleted ? '' : 'WHERE deleted_at IS NULL';
  const total = count(await db.get(`SELECT COUNT(*) AS n FROM job_definitions ${w}`));
  const items = (
    await db.all(`SELECT ${DEF_COLUMNS} FROM job_definitions ${w} ORDER BY created_at, schedule_id LIMIT ? OFFSET ?`, [o.limit, o.offset])
  ).map(decodeDefinition);
  return { items, total };
}

/**
 * Live (not deleted) definitions that use a crew: team definitions naming it
 * (`spec.crew_id`) and agent definitions pinning its graph (`spec.graph_id`).
 */
export async function definitionsUsingCrew(
  db: Reader,
  crewId: string,
  graphHash: string | null,
): Promise<{ schedule_id: string; job_type: 'team' | 'agent' }[]> {
  const like = (v: string) => `%${JSON.stringify(v)}%`;
  const rows = await db.all(
    `SELECT ${DEF_COLUMNS} FROM job_definitions WHERE deleted_at IS NULL AND job_type = 'team' AND spec LIKE ? ORDER BY created_at, schedule_id`,
    [like(crewId)],
  );
  if (graphHash !== null) {
    rows.push(
      ...(await db.all(
        `SELECT ${DEF_COLUMNS} FROM job_definitions WHERE deleted_at IS NULL AND job_type = 'agent' AND spec LIKE ? ORDER BY created_at, schedule_id`,
        [like(graphHash)],
      )),
    );
  }
  const out: { schedule_id: string; job_type: 'team' | 'agent' }[] = [];
  for (const d of rows.map(decodeDefinition)) {
    const spec = (d.spec ?? {}) as { crew_id?: unknown; graph_id?: unknown };
    if (d.job_type === 'team' && spec.crew_id === crewId) out.push({ schedule_id: d.schedule_id, job_type: 'team' });
    if (d.job_type === 'agent' && graphHash !== null && spec.graph_id === graphHash)
      out.push({ schedule_id: d.schedule_id, job_type: 'agent' });
  }
  return out;
}

/** What a new definition is written with (insertDefinition): the rest starts empty, its author set after. */
export type NewDefinition = Pick<
  Definition,
  | 'schedule_id'
  | 'name'
  | 'job_type'
  | 'workspace_id'
  | 'spec'
  | 'cron'
  | 'timezone'
  | 'catch_up'
  | 'enabled'
  | 'next_fire_at'
  | 'created_by'
  | 'created_at'
>;

export async function insertDefinition(tx: Tx, d: NewDefinition): Promise<void> {
  await tx.run(
    `INSERT INTO job_definitions (schedule_id, name, job_type, workspace_id, spec, cron, timezone, catch_up, enabled, deleted_at, next_fire_at,
      last_fire_at, last_run_id, fire_count, skip_count, lease_owner, lease_until, created_by, created_at, updated_at, disabled_reason)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, NULL, NULL, 0, 0, NULL, NULL, ?, ?, ?, ?)`,
    [
      d.schedule_id,
      d.name,
      d.job_type,
      d.workspace_id,
      JSON.stringify(d.spec),
      d.cron,
      d.timezone,
      d.catch_up,
      d.enabled ? 1 : 0,
      d.next_fire_at,
      d.created_by,
      d.created_at,
      d.created_at,
      d.enabled ? null : 'requested',
    ],
  );
}

export async function updateDefinition(
  tx: Tx,
  id: string,
  f: {
    name: string;
    workspace_id: string;
    spec: unknown;
    cron: string;
    timezone: string;
    catch_up: 'once' | 'skip';
    next_fire_at: number | null;
    at: number;
  },
): Promise<void> {
  await tx.run(
    'UPDATE job_definitions SET name = ?, workspace_id = ?, spec = ?, cron = ?, timezone = ?, catch_up = ?, next_fire_at = ?, updated_at = ? WHERE schedule_id = ?',
    [f.name, f.workspace_id, JSON.stringify(f.spec), f.cron, f.timezone, f.catch_up, f.next_fire_at, f.at, id],
  );
}

export async function setDefinitionEnabled(tx: Tx, id: string, on: boolean, next: number | null, at: number): Promise<void> {
  await tx.run('UPDATE job_definitions SET enabled = ?, next_fire_at = ?, disabled_reason = ?, updated_at = ? WHERE schedule_id = ?', [
    on ? 1 : 0,
    next,
    on ? null : 'requested',
    at,
    id,
  ]);
}

export async function softDeleteDefinition(tx: Tx, id: string, at: number): Promise<void> {
  await tx.run('UPDATE job_definitions SET deleted_at = ?, next_fire_at = NULL, updated_at = ? WHERE schedule_id = ?', [at, at, id]);
}

/** Live (not soft-deleted) definitions that act as `authorId`: what the per-principal quota counts. */
export async function countAuthored(db: Reader, authorId: string): Promise<number> {
  return count(await db.get('SELECT COUNT(*) AS n FROM job_definitions WHERE author_id = ? AND deleted_at IS NULL', [authorId]));
}

/**
 * Makes `authorId`, with its effective authority `authority`, the principal the definition acts as;
 * `root` is the API key it acted through (`api_key:<id>`), or null.
 */
export async function setAuthor(
  tx: Tx,
  scheduleId: string,
  authorId: string,
  authority: readonly string[],
  root: string | null,
): Promise<void> {
  await tx.run('UPDATE job_definitions SET author_id = ?, author_authority = ?, author_root = ? WHERE schedule_id = ?', [
    authorId,
    JSON.stringify(authority),
    root,
    scheduleId,
  ]);
}

/** Enabled, live definitions authored by `authorId`. */
export async function enabledAuthoredBy(tx: Tx, authorId: string): Promise<string[]> {
  return (
    await tx.all(
      'SELECT schedule_id FROM job_definitions WHERE author_id = ? AND enabled = 1 AND deleted_at IS NULL ORDER BY schedule_id',
      [authorId],
    )
  ).map((r) => str(r, 'schedule_id'));
}

export async function disableDefinition(tx: Tx, id: string, reason: string, at: number): Promise<void> {
  await tx.run('UPDATE job_definitions SET enabled = 0, next_fire_at = NULL, disabled_reason = ?, updated_at = ? WHERE schedule_id = ?', [
    reason,
    at,
    id,
  ]);
}

/** Disables the definition if its next fire is still `fireAt` (compare-and-set); false when something got there first. */
export async function disableAtFire(tx: Tx, id: string, fireAt: number, reason: string, at: number): Promise<boolean> {
  const r = await tx.run(
    'UPDATE job_definitions SET enabled = 0, next_fire_at = NULL, disabled_reason = ?, updated_at = ? WHERE schedule_id = ? AND next_fire_at = ? AND enabled = 1 AND deleted_at IS NULL',
    [reason, at, id, fireAt],
  );
  return r.changes > 0;
}

/**
 * When `cellId` may fire something next: the earliest next fire of any
 * enabled, live definition, or the end of another cell's lease on it when
 * that comes later (a definition it cannot claim yet is not due for it).
 */
export async function earliestFire(db: Reader, cellId: string): Promise<number | null> {
  const r = await db.get(
    `SELECT MIN(CASE WHEN lease_owner IS NOT NULL AND lease_owner <> ? AND lease_until > next_fire_at THEN lease_until ELSE next_fire_at END) AS t
     FROM job_definitions WHERE enabled = 1 AND deleted_at IS NULL`,
    [cellId],
  );
  return r ? numOrNull(r, 't') : null;
}

/** Definitions due at `now`, earliest first. */
export async function dueDefinitions(db: Reader, now: number, limit: number): Promise<{ schedule_id: string; next_fire_at: number }[]> {
  return (
    await db.all(
      'SELECT schedule_id, next_fire_at FROM job_definitions WHERE enabled = 1 AND deleted_at IS NULL AND next_fire_at <= ? ORDER BY next_fire_at, schedule_id LIMIT ?',
      [now, limit],
    )
  ).map((r) => ({ schedule_id: str(r, 'schedule_id'), next_fire_at: num(r, 'next_fire_at') }));
}

/**
 * Claims fire `at` of a definition (compare-and-set on next_fire_at and the
 * lease, so across a group of cells exactly one claims it): moves next_fire_at
 * to `next`, takes the lease, counts the fire (or the skip when `held`).
 * False when another cell or a change got there first.
 */
export async function claimFire(
  tx: Tx,
  id: string,
  at: number,
  f: { next: number | null; cellId: string; now: number; leaseUntil: number; held: boolean },
): Promise<boolean> {
  const held = f.held ? 1 : 0;
  const r = await tx.run(
    `UPDATE job_definitions SET next_fire_at = ?, lease_owner = ?, lease_until = ?,
       last_fire_at = CASE WHEN ? = 1 THEN last_fire_at ELSE ? END,
       fire_count = fire_count + (1 - ?),
       skip_count = skip_count + ?
     WHERE schedule_id = ? AND next_fire_at = ? AND enabled = 1 AND deleted_at IS NULL
       AND (lease_owner IS NULL OR lease_owner = ? OR lease_until <= ?)`,
    [f.next, f.cellId, f.leaseUntil, held, f.now, held, held, id, at, f.cellId, f.now],
  );
  return r.changes > 0;
}

export async function setLastRun(tx: Tx, id: string, runId: string): Promise<void> {
  await tx.run('UPDATE job_definitions SET last_run_id = ? WHERE schedule_id = ?', [runId, id]);
}

// ---------------------------------------------------------------- fires

export type FireState = 'fired' | 'pending' | 'dispatched' | 'refused' | 'skipped';

/** Records a fire once (a second record of the same fire is ignored). */
export async function recordFire(
  tx: Tx,
  f: { schedule_id: string; fire_at: number; state: FireState; run_id: string | null; detail: string | null; cell_id: string; at: number },
): Promise<void> {
  await tx.run(
    `INSERT INTO job_fires (schedule_id, fire_at, state, run_id, detail, cell_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (schedule_id, fire_at) DO NOTHING`,
    [f.schedule_id, f.fire_at, f.state, f.run_id, f.detail, f.cell_id, f.at],
  );
}

export async function settleFire(
  tx: Tx,
  id: string,
  fireAt: number,
  state: FireState,
  runId: string | null,
  detail: string | null,
): Promise<void> {
  await tx.run('UPDATE job_fires SET state = ?, run_id = ?, detail = ? WHERE schedule_id = ? AND fire_at = ?', [
    state,
    runId,
    detail,
    id,
    fireAt,
  ]);
}

export async function pendingFires(
  db: Reader,
  limit: number,
): Promise<{ schedule_id: string; fire_at: number; cell_id: string; created_at: number; run_id: string | null }[]> {
  return (
    await db.all(
      "SELECT schedule_id, fire_at, cell_id, created_at, run_id FROM job_fires WHERE state = 'pending' ORDER BY created_at, schedule_id LIMIT ?",
      [limit],
    )
  ).map((r) => ({
    schedule_id: str(r, 'schedule_id'),
    fire_at: num(r, 'fire_at'),
    cell_id: str(r, 'cell_id'),
    created_at: num(r, 'created_at'),
    run_id: strOrNull(r, 'run_id'),
  }));
}

/** When the oldest pending fire was recorded (or taken over), or null when none is pending. */
export async function oldestPendingFire(db: Reader): Promise<number | null> {
  const r = await db.get("SELECT MIN(created_at) AS t FROM job_fires WHERE state = 'pending'");
  return r ? numOrNull(r, 't') : null;
}

/**
 * Takes over a pending fire for `cellId` (compare-and-set on who held it and
 * since when: of cells taking it at once, one wins). `created_at` becomes the
 * time it was taken over. False when another cell got there first or it left
 * `pending`.
 */
export async function claimPendingFire(
  tx: Tx,
  f: { schedule_id: string; fire_at: number; cell_id: string; created_at: number },
  cellId: string,
  at: number,
): Promise<boolean> {
  const r = await tx.run(
    "UPDATE job_fires SET cell_id = ?, created_at = ? WHERE schedule_id = ? AND fire_at = ? AND state = 'pending' AND cell_id = ? AND created_at = ?",
    [cellId, at, f.schedule_id, f.fire_at, f.cell_id, f.created_at],
  );
  return r.changes > 0;
}

/** Fires of a definition, newest first. */
export async function firesOf(
  db: Reader,
  id: string,
  limit: number,
): Promise<{ fire_at: number; state: string; run_id: string | null; detail: string | null; cell_id: string }[]> {
  return (
    await db.all('SELECT fire_at, state, run_id, detail, cell_id FROM job_fires WHERE schedule_id = ? ORDER BY fire_at DESC LIMIT ?', [
      id,
      limit,
    ])
  ).map((r) => ({
    fire_at: num(r, 'fire_at'),
    state: str(r, 'state'),
    run_id: strOrNull(r, 'run_id'),
    detail: strOrNull(r, 'detail'),
    cell_id: str(r, 'cell_id'),
  }));
}

// ---------------------------------------------------------------- published endpoints

export interface Endpoint {
  endpoint_id: string;
  name: string;
  job_type: 'compute' | 'notebook';
  workspace_id: string;
  spec: Record<string, unknown>;
  rate_limit_rpm: number;
  required_scopes: string[];
  input_schema: Record<string, unknown> | null;
  mode: 'sync' | 'async';
  sync_timeout_ms: number;
  created_by: string;
  created_at: number;
  deleted_at: number | null;
}

const ENDPOINT_COLUMNS =
  'endpoint_id, name, job_type, workspace_id, spec, rate_limit_rpm, required_scopes, input_schema, mode, sync_timeout_ms, created_by, created_at, deleted_at';

function decodeEndpoint(r: Row): Endpoint {
  const jobType = str(r, 'job_type');
  const mode = str(r, 'mode');
  if (jobType !== 'compute' && jobType !== 'notebook') throw new TypeError(`store row: unknown endpoint job_type ${jobType}`);
  if (mode !== 'sync' && mode !== 'async') throw new TypeError(`store row: unknown endpoint mode ${mode}`);
  return {
    endpoint_id: str(r, 'endpoint_id'),
    name: str(r, 'name'),
    job_type: jobType,
    workspace_id: str(r, 'workspace_id'),
    spec: json(r, 'spec', object),
    rate_limit_rpm: num(r, 'rate_limit_rpm'),
    required_scopes: json(r, 'required_scopes', stringArray),
    input_schema: jsonOrNull(r, 'input_schema', object),
    mode,
    sync_timeout_ms: num(r, 'sync_timeout_ms'),
    created_by: str(r, 'created_by'),
    created_at: num(r, 'created_at'),
    deleted_at: numOrNull(r, 'deleted_at'),
  };
}

/** A live (not unpublished) endpoint. */
export async function endpointById(db: Reader, id: string): Promise<Endpoint | undefined> {
  const r = await db.get(`SELECT ${ENDPOINT_COLUMNS} FROM job_endpoints WHERE endpoint_id = ? AND deleted_at IS NULL`, [id]);
  return r ? decodeEndpoint(r) : undefined;
}

export async function listEndpoints(db: Reader, limit: number, offset: number): Promise<{ items: Endpoint[]; total: number }> {
  const total = count(await db.get('SELECT COUNT(*) AS n FROM job_endpoints WHERE deleted_at IS NULL'));
  const items = (
    await db.all(
      `SELECT ${ENDPOINT_COLUMNS} FROM job_endpoints WHERE deleted_at IS NULL ORDER BY created_at, endpoint_id LIMIT ? OFFSET ?`,
      [limit, offset],
    )
  ).map(decodeEndpoint);
  return { items, total };
}

export async function insertEndpoint(tx: Tx, e: Endpoint): Promise<void> {
  await tx.run(`INSERT INTO job_endpoints (${ENDPOINT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, [
    e.endpoint_id,
    e.name,
    e.job_type,
    e.workspace_id,
    JSON.stringify(e.spec),
    e.rate_limit_rpm,
    JSON.stringify(e.required_scopes),
    e.input_schema === null ? null : JSON.stringify(e.input_schema),
    e.mode,
    e.sync_timeout_ms,
    e.created_by,
    e.created_at,
    e.deleted_at,
  ]);
}

export async function unpublishEndpoint(tx: Tx, id: string, at: number): Promise<void> {
  await tx.run('UPDATE job_endpoints SET deleted_at = ? WHERE endpoint_id = ?', [at, id]);
}

// ---------------------------------------------------------------- SQL workspaces

/**
 * A workspace SQL database's secrets as stored: the key naming its effect records and its PostgreSQL
 * role's password, each sealed (cell/jobs/workspace-secrets.ts; in the clear in a store of an earlier version).
 */
export interface SqlWorkspaceSecrets {
  effect_key: string;
  role_password: string;
}

/** The workspace's secrets, recorded as `fresh` the first time (the first writer of the group wins). */
export async function sqlWorkspaceSecrets(
  tx: Tx,
  workspaceId: string,
  fresh: SqlWorkspaceSecrets,
  at: number,
): Promise<SqlWorkspaceSecrets> {
  await tx.run(
    'INSERT INTO job_sql_workspaces (workspace_id, effect_key, role_password, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (workspace_id) DO NOTHING',
    [workspaceId, fresh.effect_key, fresh.role_password, at],
  );
  const r = await tx.get('SELECT effect_key, role_password FROM job_sql_workspaces WHERE workspace_id = ?', [workspaceId]);
  if (!r) throw new TypeError(`job_sql_workspaces has no row for ${workspaceId} after its insert`);
  return { effect_key: str(r, 'effect_key'), role_password: str(r, 'role_password') };
}

/** Every workspace that ever ran SQL (has secrets), by id. */
export async function sqlWorkspaceIds(db: Reader): Promise<string[]> {
  return (await db.all('SELECT workspace_id FROM job_sql_workspaces ORDER BY workspace_id')).map((r) => str(r, 'workspace_id'));
}

/** Workspaces after `after` (by id) whose secrets are still in the clear (not a sealed JSON object), at most `limit`. */
export async function clearWorkspaceSecrets(
  db: Reader,
  after: string,
  limit: number,
): Promise<({ workspace_id: string } & SqlWorkspaceSecrets)[]> {
  const rows = await db.all(
    "SELECT workspace_id, effect_key, role_password FROM job_sql_workspaces WHERE workspace_id > ? AND (effect_key NOT LIKE '{%' OR role_password NOT LIKE '{%') ORDER BY workspace_id LIMIT ?",
    [after, limit],
  );
  return rows.map((r) => ({
    workspace_id: str(r, 'workspace_id'),
    effect_key: str(r, 'effect_key'),
    role_password: str(r, 'role_password'),
  }));
}

/** Replaces a row's secrets by their sealed forms, if they are still `was` (another cell may have sealed it first). */
export async function resealWorkspaceSecrets(
  tx: Tx,
  workspaceId: string,
  was: SqlWorkspaceSecrets,
  sealed: SqlWorkspaceSecrets,
): Promise<void> {
  await tx.run(
    'UPDATE job_sql_workspaces SET effect_key = ?, role_password = ? WHERE workspace_id = ? AND effect_key = ? AND role_password = ?',
    [sealed.effect_key, sealed.role_password, workspaceId, was.effect_key, was.role_password],
  );
}
