/**
 * SQL jobs on the PostgreSQL engine: each workspace's SQL database is a
 * PostgreSQL database of its own on the store's server (pg-provision.ts makes
 * it ready), the same for every cell of the group, and its jobs run there as
 * the workspace's own login role.
 *
 * Isolation is PostgreSQL's, not text checks. A database of its own: the
 * job's NOTIFYs, advisory locks, large objects, temporary tables and catalog
 * rows stay in it, so a job cannot flood the cells' change channel, hold a
 * lock a cell waits for, or keep data the quota does not count. Its role:
 * owns its schema `ws_<hash>` and holds no other privilege (no CREATE on the
 * database, nothing on the cell's schema but its two effect functions), is a
 * member of no role (`SET ROLE` goes nowhere) and may connect only to its own
 * database there. Catalogs stay readable: a job sees its own database's.
 *
 * On top of that, each entry of a job is one statement (the extended query
 * protocol refuses a second one) whose first keyword is in an allow-list
 * (pg-statements.ts): a job cannot end its own transaction, change its session
 * or its role, copy through the server, or create code (functions,
 * procedures, languages). What a job could still reach through code of an
 * earlier version is checked before COMMIT: a job that wrote a role, a role's
 * setting or a database (pg_authid, pg_auth_members, pg_db_role_setting,
 * pg_database: it holds their lock until it ends) is refused and rolled back.
 *
 * A job is one transaction on its own connection: jobs of one workspace run
 * one at a time across the group (a transaction-scoped advisory lock in its
 * database), with `statement_timeout` at the job's time cap and, past it or on
 * cancel, the backend terminated from the cell's connection (the transaction
 * then rolls back). Exactly once: in the same transaction the job records its
 * result with `cell.record_effect` under the step's effect key, in a table the
 * job can neither change nor delete from; a job run again finds the record and
 * returns the recorded result, running nothing. The job's COMMIT is
 * synchronous (flushed before it returns), as the store's are, so an effect
 * the journal records as done survives a server crash. The database may not
 * grow past what the workspace's quota leaves (`workspace_quota`, nothing
 * committed): its size on disk (`pg_database_size`), less what an empty
 * database takes (template0's), counts, so large objects, sequences,
 * temporary tables and catalog rows count with the tables.
 */
import pg from 'pg';
import type { Logger } from '../../context.ts';
import type { SqlOutcome, SqlParam, SqlStatementResult, SqlTask } from './sql.ts';
import { isConnectionLost } from '../../store/postgres.ts';
import { refusal } from './pg-statements.ts';
import { provisionWorkspace, WorkspaceNotMigrated, type WsNames } from './pg-provision.ts';

export { wsNames } from './pg-provision.ts';

export interface PgSqlTask extends Omit<SqlTask, 'dbPath'> {
  workspaceId: string;
  /** The workspace role's password (job_sql_workspaces, opened). */
  rolePassword: string;
  timeLimitMs: number;
}

type Failure = {
  ok: false;
  reason: 'time_limit' | 'cancelled' | 'sandbox_crashed' | 'workspace_not_migrated';
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

/**
 * The shared catalogs a job may not write (a role, its membership, its settings, a database): a write
 * holds a lock on the catalog stronger than a read's until the transaction ends. Schema-qualified names
 * and pg_catalog first in the search path: the check is the cell's, whatever the job defined.
 */
const SHARED_CATALOG_WRITES = `SELECT pg_catalog.string_agg(DISTINCT c.relname::pg_catalog.text, ', ')
  FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_class c ON c.oid = l.relation
 WHERE l.pid = pg_catalog.pg_backend_pid() AND l.locktype = 'relation' AND l.database = 0
   AND c.relname IN ('pg_authid', 'pg_auth_members', 'pg_db_role_setting', 'pg_database')
   AND l.mode <> 'AccessShareLock'`;

/** PostgreSQL's answers when the role cannot log in to its database (password, authorization, no database). */
const LOGIN_REFUSED = new Set(['28P01', '28000', '3D000']);

function cellValue(v: unknown): SqlParam {
  if (v === null || v === undefined) return null;
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return v;
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? String(v) : v.toISOString();
  if (Buffer.isBuffer(v)) return v.toString('base64');
  return JSON.stringify(v);
}

/** Runs the SQL jobs of the workspaces of one cells' database, each in its own database on that server. */
export class PgWorkspaces {
  readonly #url: string;
  readonly #admin: pg.Pool;
  readonly #log: Logger;
  readonly #pgBinDir: string | null;
  readonly #ready = new Map<string, Promise<WsNames>>();
  #baseline: Promise<number> | undefined;
  /** Last measured size of each workspace's database past an empty one's, bytes (the workspace's storage quota counts it). */
  readonly sizes = new Map<string, number>();
  #closed = false;

  /** `url`: the store's URL; the cell's user there creates the workspaces' roles (CREATEROLE) and databases (CREATEDB). */
  constructor(url: string, opts: { log: Logger; pgBinDir?: string | null }) {
    this.#url = url;
    this.#log = opts.log;
    this.#pgBinDir = opts.pgBinDir ?? null;
    this.#admin = new pg.Pool({ connectionString: url, max: 2, application_name: 'agent-cell-workspaces' });
    this.#admin.on('error', () => {
      /* an idle connection dropped: the pool opens a new one when next asked */
    });
  }

  /** Makes the workspace's role and database ready, once per process (again after `#forget`). */
  prepare(workspaceId: string, password: string): Promise<WsNames> {
    let p = this.#ready.get(workspaceId);
    if (!p) {
      p = this.#provisionNow(workspaceId, password);
      this.#ready.set(workspaceId, p);
      p.catch(() => this.#forget(workspaceId));
    }
    return p;
  }

  #forget(workspaceId: string): void {
    this.#ready.delete(workspaceId);
  }

  async #provisionNow(workspaceId: string, password: string): Promise<WsNames> {
    const c = await this.#admin.connect();
    let broken: Error | undefined;
    try {
      return await provisionWorkspace(c, workspaceId, password, { url: this.#url, log: this.#log, pgBinDir: this.#pgBinDir });
    } catch (err) {
      // Not back to the pool: its session advisory lock (if the unlock did not run) ends with it.
      broken = err as Error;
      throw err;
    } finally {
      c.release(broken);
    }
  }

  /** Schemas of the cells' database named like a workspace's of an earlier version (`ws_<hash>`). */
  async legacySchemas(): Promise<Set<string>> {
    const r = await this.#admin.query("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'ws\\_%'");
    return new Set(r.rows.map((x: { nspname: string }) => x.nspname));
  }

  /** What an empty workspace database takes (template0's size): not counted toward the quota. */
  #baselineBytes(): Promise<number> {
    this.#baseline ??= this.#admin.query("SELECT pg_database_size('template0') AS n").then(
      (r) => Number(r.rows[0]?.n ?? 0),
      (err: unknown) => {
        this.#baseline = undefined;
        throw err;
      },
    );
    return this.#baseline;
  }

  /** Stops a job's backend (time cap, cancel): its transaction rolls back. */
  async #terminate(pid: number | undefined): Promise<void> {
    if (pid === undefined) return;
    await this.#admin.query('SELECT pg_terminate_backend($1)', [pid]).catch(() => undefined);
  }

  /** A connected client of the workspace's role on its database; made ready again once when the role cannot log in. */
  async #connect(task: PgSqlTask): Promise<{ client: pg.Client; names: WsNames }> {
    for (let attempt = 0; ; attempt++) {
      const names = await this.prepare(task.workspaceId, task.rolePassword);
      const u = new URL(this.#url);
      u.username = names.role;
      u.password = task.rolePassword;
      u.pathname = `/${names.database}`;
      const client = new pg.Client({
        connectionString: u.toString(),
        application_name: 'agent-cell-job',
        options: `-c search_path=${pg.escapeIdentifier(names.schema)}`,
      });
      client.on('error', () => {
        /* reported by the query in flight */
      });
      try {
        await client.connect();
        return { client, names };
      } catch (err) {
        await client.end().catch(() => undefined);
        const code = (err as { code?: string }).code;
        // Its password, its database or its grant is not what the cell set (a restore, an operator, a role
        // changed before this version): set them again, once.
        if (attempt > 0 || code === undefined || !LOGIN_REFUSED.has(code)) throw err;
        this.#forget(task.workspaceId);
      }
    }
  }

  /** Runs a job's statements as one transaction in the workspace's database. */
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
    let client: pg.Client;
    let baseline: number;
    try {
      ({ client } = await this.#connect(task));
      baseline = await this.#baselineBytes();
    } catch (err) {
      if (err instanceof WorkspaceNotMigrated) return fail('workspace_not_migrated', err.message);
      const f = fail(
        'sandbox_crashed',
        `the workspace's database could not be prepared: ${err instanceof Error ? err.message.slice(0, 500) : String(err)}`,
      );
      return isConnectionLost(err) ? { ...f, unreachable: true } : f;
    }
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
    const last = Math.max(0, task.statements.length - 1);
    try {
      await client.query('BEGIN');
      // One job of a workspace at a time across the group; the time cap starts once the job holds it.
      await client.query("SELECT pg_advisory_xact_lock(hashtextextended('cell-workspace-job', 0))");
      if (signal?.aborted) onAbort();
      timer = setTimeout(
        () => stop(fail('time_limit', `the task ran longer than its time cap of ${task.timeLimitMs} ms and was stopped`)),
        task.timeLimitMs,
      );
      await client.query(`SET LOCAL statement_timeout = ${Math.max(1, Math.floor(task.timeLimitMs))}`);
      if (task.effectKey !== undefined) {
        const r = await client.query('SELECT cell.effect($1::text) AS result', [task.effectKey]);
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
      // The cell's statements from here, in one round trip: names resolve in pg_catalog (and are qualified),
      // whatever the job set; the COMMIT is durable before the step is recorded done, whatever the server's
      // default or what the job set (a commit acknowledged from memory only is lost if the server crashes,
      // and the journal would then record an effect that never happened).
      const checked = (await client.query(
        `SET LOCAL search_path = pg_catalog, pg_temp; SET LOCAL synchronous_commit = on;
         SELECT (${SHARED_CATALOG_WRITES}) AS written, pg_catalog.pg_database_size(pg_catalog.current_database()) AS size`,
      )) as unknown as pg.QueryResult[];
      const row = checked[checked.length - 1]?.rows[0] as { written: string | null; size: string | number } | undefined;
      if (row?.written) {
        await client.query('ROLLBACK');
        return {
          ok: false,
          reason: 'statement_refused',
          message: `the job wrote ${row.written} (a role, its settings or a database, through a function): a job changes its own database's objects only`,
          statement: last,
          refused: 'role_change',
          duration_ms: Date.now() - started,
        };
      }
      const size = Math.max(0, Number(row?.size ?? 0) - baseline);
      if (task.maxDbBytes !== undefined && size + resultBytes > task.maxDbBytes) {
        await client.query('ROLLBACK');
        return {
          ok: false,
          reason: 'workspace_quota',
          message: `the workspace database would grow past the ${task.maxDbBytes} bytes its storage quota leaves it`,
          statement: last,
          duration_ms: Date.now() - started,
        };
      }
      if (task.effectKey !== undefined) {
        await client.query('SELECT cell.record_effect($1::text, $2::text)', [task.effectKey, JSON.stringify(results)]);
      }
      if (stopped) throw new Error('stopped');
      committing = true;
      clearTimeout(timer);
      await client.query('COMMIT');
      this.sizes.set(task.workspaceId, size);
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
        // Not an answer of the server: the connection or the database could not be reached.
        return fail('sandbox_crashed', `the workspace database could not be reached: ${message.slice(0, 300)}`);
      }
      return {
        ok: false,
        reason: 'sql_error',
        message: message.slice(0, 1000),
        statement: Math.min(index, last),
        duration_ms: Date.now() - started,
      };
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      await client.end().catch(() => undefined);
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#admin.end().catch(() => undefined);
  }
}
