/**
 * PostgreSQL for tests: one database per test file on the server that
 * `make` started for the whole run (its URL in CELL_TEST_PG_URL), or, when
 * that is unset (a file run by hand), on a private server started for this
 * process by scripts/pg-test-server.sh and stopped when the process exits.
 * Durability tests ask for their own server (`startPgServer({ durable: true })`):
 * fsync on, and theirs to restart.
 *
 * @example
 * const pg = await pgDatabase();          // in before(); skip the suite if pg.skip is a string
 * after(() => pg.drop());
 * const store = await openStore({ engine: 'postgres', url: pg.url }, { migrations });
 */
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import { wsNames } from '../../cell/jobs/sandbox/pg-provision.ts';

const SCRIPT = fileURLToPath(new URL('../../scripts/pg-test-server.sh', import.meta.url));
const run = promisify(execFile);

export interface PgServer {
  /** URL of the server's `postgres` database (superuser `postgres`, no password, loopback only). */
  url: string;
  dir: string;
  durable: boolean;
  /** `pg_ctl restart -m immediate`: a crash of the server, then its recovery. */
  restartImmediate(): Promise<void>;
  /** `pg_ctl stop -m immediate`: the server crashes and stays down until `startAgain()`. */
  stopImmediate(): Promise<void>;
  startAgain(): Promise<void>;
  stop(): Promise<void>;
}

/** Starts a server of this process's own (installed with apt when missing and root). */
export async function startPgServer(opts: { durable?: boolean; settings?: readonly string[] } = {}): Promise<PgServer> {
  // `settings`: more server settings (`name=value`, e.g. a preloaded library for a bench), kept for restarts.
  const env = opts.settings?.length ? { ...process.env, PG_EXTRA_SETTINGS: opts.settings.map((x) => `-c ${x}`).join(' ') } : process.env;
  const { stdout } = await run(SCRIPT, ['start', ...(opts.durable ? ['--durable'] : [])], { maxBuffer: 1 << 20, env });
  const url = /^CELL_TEST_PG_URL=(.+)$/m.exec(stdout)?.[1];
  const dir = /^CELL_TEST_PG_DIR=(.+)$/m.exec(stdout)?.[1];
  if (!url || !dir) throw new Error(`pg-test-server.sh start printed no URL: ${stdout}`);
  let stopped = false;
  const stopSync = () => {
    if (stopped) return;
    stopped = true;
    try {
      execFileSync(SCRIPT, ['stop', dir], { stdio: 'ignore' });
    } catch {
      // Best effort at exit: the directory is a temp dir.
    }
  };
  process.once('exit', stopSync);
  return {
    url,
    dir,
    durable: opts.durable ?? false,
    restartImmediate: async () => {
      await run(SCRIPT, ['restart-immediate', dir]);
    },
    stopImmediate: async () => {
      await run(SCRIPT, ['stop-immediate', dir]);
    },
    startAgain: async () => {
      await run(SCRIPT, ['start-again', dir]);
    },
    stop: async () => {
      if (stopped) return;
      stopped = true;
      process.off('exit', stopSync);
      await run(SCRIPT, ['stop', dir]);
    },
  };
}

let shared: Promise<string> | undefined;

/** The server of this run: CELL_TEST_PG_URL, or a private one started once for this process. */
export function pgServerUrl(): Promise<string> {
  const env = process.env['CELL_TEST_PG_URL'];
  if (env) return Promise.resolve(env);
  shared ??= startPgServer().then((s) => s.url);
  return shared;
}

export interface PgDatabase {
  /** URL of the new, empty database. */
  url: string;
  name: string;
  /** Drops the database (ending its connections). Idempotent. */
  drop(): Promise<void>;
}

/** Runs `sql` on the server's maintenance database. */
export async function adminQuery(serverUrl: string, sql: string): Promise<pg.QueryResult> {
  const c = new pg.Client({ connectionString: serverUrl });
  c.on('error', () => undefined);
  await c.connect();
  try {
    return await c.query(sql);
  } finally {
    await c.end();
  }
}

/**
 * The URL of SQL workspace `workspaceId`'s own database, for a cell on the database at `cellsDbUrl`
 * (same server and user; cell/jobs/sandbox/pg-provision.ts), and the workspace's schema there.
 */
export function workspaceDb(cellsDbUrl: string, workspaceId: string): { url: string; schema: string; role: string } {
  const u = new URL(cellsDbUrl);
  const names = wsNames(decodeURIComponent(u.pathname.slice(1)), workspaceId);
  u.pathname = `/${names.database}`;
  return { url: u.toString(), schema: names.schema, role: names.role };
}

/**
 * Drops the SQL workspace databases a cell on database `of` made (their comment names it:
 * cell/jobs/sandbox/pg-provision.ts workspaceDbComment), so a test run does not leave them behind.
 */
export async function dropWorkspaceDatabases(serverUrl: string, of: string): Promise<void> {
  const c = new pg.Client({ connectionString: serverUrl });
  c.on('error', () => undefined);
  await c.connect();
  try {
    const r = await c.query("SELECT datname FROM pg_database WHERE shobj_description(oid, 'pg_database') LIKE $1", [
      `agent-cell SQL workspace of database ${of}:%`,
    ]);
    for (const { datname } of r.rows as { datname: string }[])
      await c.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(datname)} WITH (FORCE)`);
  } finally {
    await c.end();
  }
}

/** A new empty database (UTF-8, C collation) on `serverUrl` (default: this run's server). */
export async function pgDatabase(serverUrl?: string): Promise<PgDatabase> {
  const server = serverUrl ?? (await pgServerUrl());
  const name = `t_${process.pid}_${randomBytes(4).toString('hex')}`;
  await adminQuery(server, `CREATE DATABASE ${name} TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'`);
  const u = new URL(server);
  u.pathname = `/${name}`;
  let dropped = false;
  return {
    url: u.toString(),
    name,
    drop: async () => {
      if (dropped) return;
      dropped = true;
      await adminQuery(server, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await dropWorkspaceDatabases(server, name);
    },
  };
}

/**
 * Why PostgreSQL tests cannot run here, or null when they can: the binaries
 * are present, or we are root and the script can install them.
 */
export function pgUnavailable(): string | null {
  if (process.env['CELL_TEST_PG_URL']) return null;
  try {
    execFileSync('bash', ['-c', 'test -x /usr/lib/postgresql/15/bin/initdb || command -v pg_config >/dev/null || test "$(id -u)" = 0'], {
      stdio: 'ignore',
    });
    return null;
  } catch {
    return 'PostgreSQL 15 is not installed and we are not root to install it (apt-get install postgresql-15)';
  }
}

/** A table held in an exclusive lock by a connection of the test (issue 22's outage tests). */
export interface TableLock {
  /**
   * Ends every connection of `application` (the cell's pool: 'agent-cell'; its SQL jobs':
   * 'agent-cell-job') that waits on a lock: the cell meets a lost connection there. Answers how many.
   */
  endWaiters(application?: string): Promise<number>;
  /** Lets the lock go (idempotent). */
  release(): Promise<void>;
}

/** Holds `table` (a name as SQL writes it) in ACCESS EXCLUSIVE mode until `release`. */
export async function lockTable(url: string, table: string): Promise<TableLock> {
  const holder = new pg.Client({ connectionString: url, application_name: 'test-holder' });
  await holder.connect();
  await holder.query('BEGIN');
  await holder.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
  let released: Promise<void> | undefined;
  return {
    async endWaiters(application = 'agent-cell') {
      const r = await adminQuery(
        url,
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '${application}' AND wait_event_type = 'Lock'`,
      );
      return r.rows.length;
    },
    release() {
      released ??= holder
        .query('COMMIT')
        .catch(() => undefined)
        .then(() => holder.end());
      return released;
    },
  };
}
