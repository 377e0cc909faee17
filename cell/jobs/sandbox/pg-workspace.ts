/**
 * SQL jobs on the PostgreSQL engine: each workspace's database is one
 * PostgreSQL schema in the group's database, the same for every cell, and its
 * jobs run as the workspace's own login role.
 *
 * Isolation is PostgreSQL's privilege system, not text checks: the role
 * `cellws_<hash>` owns its schema `ws_<hash>` (names: wsNames) and holds no
 * other privilege, so a job's SQL cannot read or write the cell's tables (no
 * grant on them), another workspace's schema (no USAGE on it) nor create
 * anything outside its schema; it is not a member of any role, so `SET ROLE`
 * and `set_config('role', …)` go nowhere, and `RESET ROLE` returns to itself.
 * The cell's own user creates the role (it needs CREATEROLE) and is granted
 * membership in it (to create the schema it owns and to stop its backends).
 * Catalogs stay readable to every role: a job can see the names of other
 * schemas' tables, never their rows.
 *
 * On top of that, each entry of a job is one statement (the extended query
 * protocol refuses a second one) whose first keyword is in an allow-list, so
 * a job cannot end its own transaction (COMMIT, ROLLBACK, PREPARE
 * TRANSACTION…), change its session (SET, RESET, DISCARD), copy through the
 * server (COPY) or change its role (ALTER ROLE/USER/GROUP): everything not
 * listed is refused (`statement_refused`).
 *
 * A job is one transaction on its own connection: jobs of one workspace run
 * one at a time across the group (a transaction-scoped advisory lock on the
 * workspace), with `statement_timeout` at the job's time cap and, past it or
 * on cancel, the backend terminated from the cell's connection (the
 * transaction then rolls back). Exactly once: in the same transaction the job
 * records its result in `_cell_effects` under the step's effect key; a job run
 * again finds the record and returns the recorded result, running nothing.
 * The job's COMMIT is synchronous (flushed before it returns), as the store's
 * are, so an effect the journal records as done survives a server crash.
 * The schema may not grow past what the workspace's quota leaves
 * (`workspace_quota`, nothing committed).
 */
import { createHash } from 'node:crypto';
import pg from 'pg';
import type { SqlOutcome, SqlParam, SqlStatementResult, SqlTask } from './sql.ts';
import { isConnectionLost } from '../../store/postgres.ts';
import { refusal } from './pg-statements.ts';
import { EFFECT_RECORD_TTL_MS } from './sql.ts';

export interface PgSqlTask extends Omit<SqlTask, 'dbPath'> {
  workspaceId: string;
  /** The workspace role's password (job_sql_workspaces). */
  rolePassword: string;
  timeLimitMs: number;
}

type Failure = {
  ok: false;
  reason: 'time_limit' | 'cancelled' | 'sandbox_crashed';
  message: string;
  logs: string[];
  duration_ms: number;
  /**
   * The server could not be reached or the connection was lost: nothing of the task was kept unless its
   * COMMIT was, and then its effect key says so, so the task may be run again once the server is back
   * (issue 22; cell/jobs/steps.ts runSqlStep).
   */
  unreachable?: true;
};

/** The role and schema of a workspace in database `database` (roles are cluster-wide, schemas per database). */
export function wsNames(database: string, workspaceId: string): { role: string; schema: string } {
  const h = (s: string) => createHash('sha256').update(s).digest('hex').slice(0, 24);
  return { role: `cellws_${h(`${database}\n${workspaceId}`)}`, schema: `ws_${h(workspaceId)}` };
}

/** Type parsers of job results: a bigint (`count(*)`) as a number when it is a safe integer, as text past that. */
const JOB_TYPES = {
  getTypeParser: ((oid: number, format?: string) =>
    oid === 20
      ? (v: string) => {
          const n = Number(v);
          return Number.isSafeInteger(n) ? n : v;
        }
      : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

function cellValue(v: unknown): SqlParam {
  if (v === null || v === undefined) return null;
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return v;
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? String(v) : v.toISOString();
  if (Buffer.isBuffer(v)) return v.toString('base64');
  return JSON.stringify(v);
}

/** Runs the SQL jobs of workspaces stored in one PostgreSQL database. */
export class PgWorkspaces {
  readonly #url: string;
  readonly #admin: pg.Pool;
  readonly #ready = new Map<string, Promise<{ role: string; schema: string }>>();
  /** Last measured size of each workspace's schema, bytes (the workspace's storage quota counts it). */
  readonly sizes = new Map<string, number>();
  #closed = false;

  /** `url`: the store's URL; the cell's user there creates the workspaces' roles and schemas. */
  constructor(url: string) {
    this.#url = url;
    this.#admin = new pg.Pool({ connectionString: url, max: 2, application_name: 'agent-cell-workspaces' });
    this.#admin.on('error', () => {
      /* an idle connection dropped: the pool opens a new one when next asked */
    });
  }

  /** Creates the workspace's role and schema once (the group serialises on an advisory lock); sets the role's password. */
  #provision(workspaceId: string, password: string): Promise<{ role: string; schema: string }> {
    let p = this.#ready.get(workspaceId);
    if (!p) {
      p = this.#provisionNow(workspaceId, password);
      this.#ready.set(workspaceId, p);
      p.catch(() => this.#ready.delete(workspaceId));
    }
    return p;
  }

  async #provisionNow(workspaceId: string, password: string): Promise<{ role: string; schema: string }> {
    const c = await this.#admin.connect();
    try {
      const db = String((await c.query('SELECT current_database() AS d')).rows[0].d);
      const names = wsNames(db, workspaceId);
      const role = pg.escapeIdentifier(names.role);
      const schema = pg.escapeIdentifier(names.schema);
      await c.query('BEGIN');
      try {
        await c.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`cell-workspace-provision:${names.role}`]);
        const exists = (await c.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [names.role])).rowCount;
        if (!exists) {
          await c.query(`CREATE ROLE ${role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS`);
        }
        await c.query(`ALTER ROLE ${role} WITH LOGIN PASSWORD ${pg.escapeLiteral(password)} CONNECTION LIMIT 64`);
        const member = (await c.query('SELECT pg_has_role(current_user, $1, $2) AS m', [names.role, 'MEMBER'])).rows[0].m;
        if (!member) await c.query(`GRANT ${role} TO CURRENT_USER`);
        await c.query(`CREATE SCHEMA IF NOT EXISTS ${schema} AUTHORIZATION ${role}`);
        await c.query(`ALTER SCHEMA ${schema} OWNER TO ${role}`);
        await c.query(`REVOKE ALL ON SCHEMA ${schema} FROM PUBLIC`);
        await c.query(`ALTER ROLE ${role} SET search_path = ${schema}`);
        await c.query('COMMIT');
      } catch (err) {
        await c.query('ROLLBACK').catch(() => undefined);
        throw err;
      }
      return names;
    } finally {
      c.release();
    }
  }

  /** Stops a job's backend (time cap, cancel): its transaction rolls back. */
  async #terminate(pid: number | undefined): Promise<void> {
    if (pid === undefined) return;
    await this.#admin.query('SELECT pg_terminate_backend($1)', [pid]).catch(() => undefined);
  }

  /** Runs a job's statements as one transaction in the workspace's schema. */
  async run(task: PgSqlTask, signal?: AbortSignal): Promise<SqlOutcome | Failure> {
    const started = Date.now();
    const fail = (reason: Failure['reason'], message: string): Failure => ({
      ok: false,
      reason,
      message,
      logs: [],
      duration_ms: Date.now() - started,
    });
    if (this.#closed) return fail('sandbox_crashed', 'the cell is stopping');
    if (signal?.aborted) return fail('cancelled', 'the run was cancelled');
    let names: { role: string; schema: string };
    try {
      names = await this.#provision(task.workspaceId, task.rolePassword);
    } catch (err) {
      const f = fail(
        'sandbox_crashed',
        `the workspace's schema could not be prepared: ${err instanceof Error ? err.message : String(err)}`,
      );
      return isConnectionLost(err) ? { ...f, unreachable: true } : f;
    }
    const u = new URL(this.#url);
    u.username = names.role;
    u.password = task.rolePassword;
    const client = new pg.Client({
      connectionString: u.toString(),
      application_name: 'agent-cell-job',
      options: `-c search_path=${pg.escapeIdentifier(names.schema)}`,
    });
    client.on('error', () => {
      /* reported by the query in flight */
    });
    let stopped: Failure | null = null;
    let committing = false;
    const stop = (f: Failure) => {
      if (committing || stopped) return;
      stopped = f;
      void this.#terminate((client as unknown as { processID?: number }).processID);
    };
    const onAbort = () => stop(fail('cancelled', 'the run was cancelled while the task ran'));
    signal?.addEventListener('abort', onAbort, { once: true });
    let timer: ReturnType<typeof setTimeout> | undefined;
    let index = 0;
    try {
      await client.connect();
      await client.query('BEGIN');
      // One job of a workspace at a time across the group; the time cap starts once the job holds it.
      await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`cell-workspace-job:${names.role}`]);
      if (signal?.aborted) onAbort();
      timer = setTimeout(
        () => stop(fail('time_limit', `the task ran longer than its time cap of ${task.timeLimitMs} ms and was stopped`)),
        task.timeLimitMs,
      );
      await client.query(`SET LOCAL statement_timeout = ${Math.max(1, Math.floor(task.timeLimitMs))}`);
      await client.query('CREATE TABLE IF NOT EXISTS _cell_effects (key TEXT PRIMARY KEY, result TEXT NOT NULL, at BIGINT NOT NULL)');
      if (task.effectKey !== undefined) {
        const r = await client.query('SELECT result FROM _cell_effects WHERE key = $1', [task.effectKey]);
        const v = r.rows[0]?.result;
        if (typeof v === 'string') {
          await client.query('ROLLBACK');
          return { ok: true, results: JSON.parse(v) as SqlStatementResult[], duration_ms: Date.now() - started, replayed: true };
        }
      }
      const results: SqlStatementResult[] = [];
      let resultBytes = 0;
      const maxResultBytes = task.maxResultBytes ?? Infinity;
      for (; index < task.statements.length; index++) {
        const s = task.statements[index]!;
        const refused = refusal(s.sql);
        if (refused) {
          await client.query('ROLLBACK');
          return {
            ok: false,
            reason: 'statement_refused',
            message: refused.message,
            statement: index,
            refused: refused.refused,
            duration_ms: Date.now() - started,
          };
        }
        if (s.params !== undefined && !Array.isArray(s.params)) {
          await client.query('ROLLBACK');
          return {
            ok: false,
            reason: 'statement_refused',
            message: 'named parameters are not available on the PostgreSQL engine: pass params as an array and use $1, $2, …',
            statement: index,
            refused: 'named_params',
            duration_ms: Date.now() - started,
          };
        }
        const rows: SqlParam[][] = [];
        let truncatedBy: SqlStatementResult['truncated_by'];
        // The extended protocol, which refuses a second statement in the entry.
        const q = new pg.Query({
          text: s.sql,
          values: s.params ?? [],
          rowMode: 'array',
          queryMode: 'extended',
          types: JOB_TYPES,
        } as pg.QueryConfig);
        const done = new Promise<pg.QueryResult>((resolve, reject) => {
          q.on('row', (row: unknown[]) => {
            if (truncatedBy !== undefined) return;
            if (rows.length >= task.rowLimit) {
              truncatedBy = 'row_limit';
              return;
            }
            const out = row.map(cellValue);
            const size = Buffer.byteLength(JSON.stringify(out), 'utf8') + 1;
            if (resultBytes + size > maxResultBytes) {
              truncatedBy = 'byte_limit';
              return;
            }
            resultBytes += size;
            rows.push(out);
          });
          q.on('end', (r: pg.QueryResult) => resolve(r));
          q.on('error', reject);
        });
        client.query(q);
        const r = await done;
        if (client.getTransactionStatus() !== 'T') throw new Error('the transaction ended inside the job');
        const columns = (r.fields ?? []).map((f) => f.name);
        results.push({
          columns,
          rows,
          truncated: truncatedBy !== undefined,
          ...(truncatedBy ? { truncated_by: truncatedBy } : {}),
          changes: columns.length === 0 ? (r.rowCount ?? 0) : 0,
        });
      }
      const now = task.now ?? Date.now();
      if (task.effectKey !== undefined) {
        await client.query('DELETE FROM _cell_effects WHERE at < $1', [now - EFFECT_RECORD_TTL_MS]);
        await client.query('INSERT INTO _cell_effects (key, result, at) VALUES ($1, $2, $3)', [
          task.effectKey,
          JSON.stringify(results),
          now,
        ]);
      }
      if (task.maxDbBytes !== undefined) {
        const size = await this.#schemaSize(client, names.schema);
        if (size + resultBytes > task.maxDbBytes) {
          await client.query('ROLLBACK');
          return {
            ok: false,
            reason: 'workspace_quota',
            message: `the workspace database would grow past the ${task.maxDbBytes} bytes its storage quota leaves it`,
            statement: Math.max(0, task.statements.length - 1),
            duration_ms: Date.now() - started,
          };
        }
        this.sizes.set(task.workspaceId, size);
      }
      if (stopped) throw new Error('stopped');
      committing = true;
      clearTimeout(timer);
      // Durable before the step is recorded done, whatever the server's default or what the job set
      // (set_config): a commit acknowledged from memory only is lost if the server crashes, and the
      // journal would then record an effect that never happened.
      await client.query('SET LOCAL synchronous_commit = on');
      await client.query('COMMIT');
      return { ok: true, results, duration_ms: Date.now() - started };
    } catch (err) {
      if (stopped) return { ...(stopped as Failure), duration_ms: Date.now() - started };
      await client.query('ROLLBACK').catch(() => undefined);
      const message = err instanceof Error ? err.message : String(err);
      const code = (err as { code?: string }).code;
      if (isConnectionLost(err))
        return { ...fail('sandbox_crashed', `the workspace database could not be reached: ${message.slice(0, 300)}`), unreachable: true };
      if (code === '57014') return fail('time_limit', `the task ran longer than its time cap of ${task.timeLimitMs} ms and was stopped`);
      if (code === undefined && !committing && index === 0 && !/transaction ended/.test(message)) {
        // Not an answer of the server: the connection or the schema could not be reached.
        return fail('sandbox_crashed', `the workspace database could not be reached: ${message.slice(0, 300)}`);
      }
      return { ok: false, reason: 'sql_error', message: message.slice(0, 1000), statement: index, duration_ms: Date.now() - started };
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      await client.end().catch(() => undefined);
    }
  }

  /** Bytes the schema's tables (with their indexes and TOAST) take, as this transaction sees them. */
  async #schemaSize(client: pg.Client, schema: string): Promise<number> {
    const r = await client.query(
      `SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint AS n
         FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace
        WHERE ns.nspname = $1 AND c.relkind IN ('r', 'm')`,
      [schema],
    );
    return Number(r.rows[0]?.n ?? 0);
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#admin.end().catch(() => undefined);
  }
}
