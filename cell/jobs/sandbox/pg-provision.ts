/**
 * A SQL workspace's PostgreSQL database, made ready once per process before
 * its first job (pg-workspace.ts runs the jobs), by the cell's own user:
 *
 * - the workspace's login role `cellws_<hash>` (CREATEROLE): no attribute,
 *   no membership, its settings reset, its password the sealed one the store
 *   keeps; the cell's user is made a member (to give it its objects and to
 *   stop its backends);
 * - its database, also named `cellws_<hash>` (CREATEDB), made from template0
 *   with the cells' database's encoding and collation: its channels, advisory
 *   locks, large objects and catalogs are its own, so nothing a job does there
 *   reaches the cells' database. Only the role and the cell connect to it
 *   (CONNECT revoked from PUBLIC); the role's schema `ws_<hash>` is the one
 *   place it may create anything;
 * - the schema `cell`, the cell's: the table of effect records and the two
 *   functions the role's jobs reach it through (`cell.effect(key)`,
 *   `cell.record_effect(key, result)`, SECURITY DEFINER): a job may read the
 *   record of a key it names and add one, never change or remove one (old
 *   records are pruned by the server's clock inside `record_effect`);
 * - a repair of what a restore without owners (`pg_restore --no-owner`) or an
 *   earlier version left: every object of the schema is given back to the
 *   role, the grants are set again, and a routine (function, procedure) found
 *   in the schema is made unexecutable by the role (a job could create one
 *   before: it runs statements no check sees, and at COMMIT as a deferred
 *   trigger).
 *
 * A workspace of an earlier version (its schema `ws_<hash>` in the cells'
 * database) is moved first: the schema is copied with pg_dump and pg_restore
 * (pg-tools.ts) into the new database, its effect records into `cell`, and
 * the old schema is dropped. Without the tools the move is refused and the
 * workspace's jobs fail `workspace_not_migrated` (nothing runs in the cells'
 * database any more).
 *
 * Cells of a group make a workspace ready one at a time (a session advisory
 * lock in the cells' database); every step is idempotent, so a cell that died
 * half-way is finished after by the next.
 */
import { createHash } from 'node:crypto';
import pg from 'pg';
import type { Logger } from '../../context.ts';
import { copySchema, findPgTools, libpqTarget } from './pg-tools.ts';
import { EFFECT_RECORD_TTL_MS } from './sql.ts';

/** A workspace's role, its database (the same name) and its schema in that database. */
export interface WsNames {
  role: string;
  database: string;
  schema: string;
}

/** Names of a workspace of the cells' database `database` (roles and databases are per server: the hash binds them to it). */
export function wsNames(database: string, workspaceId: string): WsNames {
  const h = (s: string) => createHash('sha256').update(s).digest('hex').slice(0, 24);
  const role = `cellws_${h(`${database}\n${workspaceId}`)}`;
  return { role, database: role, schema: `ws_${h(workspaceId)}` };
}

/** A workspace of an earlier version that could not be moved into its own database: its jobs do not run. */
export class WorkspaceNotMigrated extends Error {
  override readonly name = 'WorkspaceNotMigrated';
}

/** The comment on a workspace's database: who it belongs to, for an operator (and the tests' clean-up). */
export function workspaceDbComment(cellsDb: string, workspaceId: string): string {
  return `agent-cell SQL workspace of database ${cellsDb}: ${workspaceId}`;
}

export interface ProvisionOptions {
  /** The store's URL (the cell's user, the cells' database). */
  url: string;
  log: Logger;
  pgBinDir: string | null;
}

const id = (s: string) => pg.escapeIdentifier(s);
const lit = (s: string) => pg.escapeLiteral(s);

/** A client of the cell's user on database `database` of the store's server. */
async function clientOn(url: string, database: string): Promise<pg.Client> {
  const u = new URL(url);
  u.pathname = `/${encodeURIComponent(database)}`;
  const c = new pg.Client({ connectionString: u.toString(), application_name: 'agent-cell-workspaces' });
  c.on('error', () => {
    /* reported by the query in flight */
  });
  await c.connect();
  return c;
}

/**
 * Makes workspace `workspaceId` ready (see above) with `admin`, a connection of the cell's user to the
 * cells' database; `password` is the role's. Returns its names.
 */
export async function provisionWorkspace(
  admin: pg.ClientBase,
  workspaceId: string,
  password: string,
  opts: ProvisionOptions,
): Promise<WsNames> {
  const info = (
    await admin.query(
      `SELECT current_database() AS db, pg_encoding_to_char(encoding) AS enc, datcollate, datctype
         FROM pg_database WHERE datname = current_database()`,
    )
  ).rows[0] as { db: string; enc: string; datcollate: string; datctype: string };
  const names = wsNames(info.db, workspaceId);
  const lock = `cell-workspace-provision:${names.role}`;
  await admin.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [lock]);
  try {
    await ensureRole(admin, names.role, password);
    const legacy = ((await admin.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [names.schema])).rowCount ?? 0) > 0;
    const found = (await admin.query('SELECT datallowconn FROM pg_database WHERE datname = $1', [names.database])).rows[0] as
      | { datallowconn: boolean }
      | undefined;
    let exists = found !== undefined;
    // Not open yet: made by a cell that died before it could set it up (nothing was moved into it).
    if (legacy && exists && (!found!.datallowconn || !(await isReady(opts.url, names.database)))) {
      // A move that did not finish: made again from the old schema, which is still whole.
      await admin.query(`DROP DATABASE ${id(names.database)} WITH (FORCE)`);
      exists = false;
    }
    if (!exists) {
      // A new database lets PUBLIC connect until that is revoked: any role of the server (another workspace's)
      // could connect in between. It is made refusing every connection, and opened once PUBLIC's grant is gone.
      await admin.query(
        `CREATE DATABASE ${id(names.database)} TEMPLATE template0 ENCODING ${lit(info.enc)} LC_COLLATE ${lit(info.datcollate)} LC_CTYPE ${lit(info.datctype)} ALLOW_CONNECTIONS false`,
      );
      // Named at once: a database left half made (a cell that died here) still says whose it is.
      await admin.query(`COMMENT ON DATABASE ${id(names.database)} IS ${lit(workspaceDbComment(info.db, workspaceId))}`);
    }
    // Also for one made by a cell that died before opening it.
    await admin.query(`REVOKE ALL ON DATABASE ${id(names.database)} FROM PUBLIC`);
    await admin.query(`ALTER DATABASE ${id(names.database)} ALLOW_CONNECTIONS true`);
    if (!exists && legacy) await moveLegacySchema(info.db, names, opts);
    await setUp(opts.url, names, workspaceDbComment(info.db, workspaceId));
    if (legacy) {
      await admin.query(`DROP SCHEMA ${id(names.schema)} CASCADE`);
      opts.log.info('moved a SQL workspace of an earlier version into a database of its own', {
        workspace_id: workspaceId,
        database: names.database,
      });
    }
    return names;
  } finally {
    // A connection that fails here is discarded by the caller: its session lock ends with it.
    await admin.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [lock]);
  }
}

/** The role: created once, its attributes, password and settings set again each time. */
async function ensureRole(admin: pg.ClientBase, role: string, password: string): Promise<void> {
  const exists = ((await admin.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [role])).rowCount ?? 0) > 0;
  if (!exists) await admin.query(`CREATE ROLE ${id(role)} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS`);
  await admin.query(`ALTER ROLE ${id(role)} WITH LOGIN NOCREATEDB NOCREATEROLE NOINHERIT PASSWORD ${lit(password)} CONNECTION LIMIT 64`);
  // Settings an earlier version set (search_path), or a job of one: the cell gives each session its own.
  await admin.query(`ALTER ROLE ${id(role)} RESET ALL`);
  const member = (await admin.query('SELECT pg_has_role(current_user, $1, $2) AS m', [role, 'MEMBER'])).rows[0].m as boolean;
  if (!member) await admin.query(`GRANT ${id(role)} TO CURRENT_USER`);
}

/** True when the workspace's database holds the cell's effect functions (set up, or restored whole). */
async function isReady(url: string, database: string): Promise<boolean> {
  const c = await clientOn(url, database);
  try {
    const r = await c.query(
      "SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'cell' AND p.proname = 'record_effect'",
    );
    return (r.rowCount ?? 0) > 0;
  } finally {
    await c.end().catch(() => undefined);
  }
}

/** Copies the workspace's schema of the cells' database into its new database (pg_dump | pg_restore). */
async function moveLegacySchema(cellsDb: string, names: WsNames, opts: ProvisionOptions): Promise<void> {
  const tools = findPgTools(opts.pgBinDir);
  if (!tools) {
    throw new WorkspaceNotMigrated(
      `this workspace's SQL database is a schema of the cells' database (an earlier version): moving it needs pg_dump and pg_restore, found neither ${opts.pgBinDir ? `in ${opts.pgBinDir}` : 'on the PATH nor in the usual directories'} (--pg-bin-dir)`,
    );
  }
  try {
    await copySchema(tools, libpqTarget(opts.url, cellsDb), libpqTarget(opts.url, names.database), names.schema);
  } catch (err) {
    throw new WorkspaceNotMigrated(`moving this workspace's schema into its own database failed: ${(err as Error).message}`);
  }
}

/**
 * Inside the workspace's database, in one transaction: its privileges, the role's schema, the cell's
 * schema and functions, the records of an earlier version moved in, and the ownership repair.
 */
async function setUp(url: string, names: WsNames, comment: string): Promise<void> {
  const c = await clientOn(url, names.database);
  const role = id(names.role);
  const schema = id(names.schema);
  const now = '(extract(epoch FROM clock_timestamp()) * 1000)::bigint';
  try {
    await c.query('BEGIN');
    try {
      await c.query(`COMMENT ON DATABASE ${id(names.database)} IS ${lit(comment)}`);
      await c.query(`REVOKE ALL ON DATABASE ${id(names.database)} FROM PUBLIC`);
      await c.query(`GRANT CONNECT, TEMPORARY ON DATABASE ${id(names.database)} TO ${role}`);
      await c.query(`ALTER ROLE ${role} IN DATABASE ${id(names.database)} RESET ALL`);
      await c.query('REVOKE ALL ON SCHEMA public FROM PUBLIC');
      await c.query(`CREATE SCHEMA IF NOT EXISTS ${schema} AUTHORIZATION ${role}`);
      await c.query(`ALTER SCHEMA ${schema} OWNER TO ${role}`);
      await c.query(`REVOKE ALL ON SCHEMA ${schema} FROM PUBLIC`);
      await c.query('CREATE SCHEMA IF NOT EXISTS cell');
      await c.query('REVOKE ALL ON SCHEMA cell FROM PUBLIC');
      await c.query(`GRANT USAGE ON SCHEMA cell TO ${role}`);
      await c.query('CREATE TABLE IF NOT EXISTS cell.effects (key TEXT PRIMARY KEY, result TEXT NOT NULL, at BIGINT NOT NULL)');
      await c.query(`REVOKE ALL ON TABLE cell.effects FROM PUBLIC, ${role}`);
      // Fixed statements, values as parameters, a search_path the caller cannot change: a job calls them
      // with its own arguments and gains nothing but adding a record under a key it cannot compute.
      await c.query(
        `CREATE OR REPLACE FUNCTION cell.effect(k TEXT) RETURNS TEXT LANGUAGE sql STABLE SECURITY DEFINER
           SET search_path = pg_catalog, pg_temp
           AS $$ SELECT result FROM cell.effects WHERE key = k $$`,
      );
      await c.query(
        `CREATE OR REPLACE FUNCTION cell.record_effect(k TEXT, r TEXT) RETURNS VOID LANGUAGE sql SECURITY DEFINER
           SET search_path = pg_catalog, pg_temp
           AS $$ DELETE FROM cell.effects WHERE at < ${now} - ${EFFECT_RECORD_TTL_MS};
                 INSERT INTO cell.effects (key, result, at) VALUES (k, r, ${now}) $$`,
      );
      await c.query('REVOKE ALL ON FUNCTION cell.effect(TEXT), cell.record_effect(TEXT, TEXT) FROM PUBLIC');
      await c.query(`GRANT EXECUTE ON FUNCTION cell.effect(TEXT), cell.record_effect(TEXT, TEXT) TO ${role}`);
      await c.query(repairSql(names));
      await c.query('COMMIT');
    } catch (err) {
      await c.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  } finally {
    await c.end().catch(() => undefined);
  }
}

/**
 * One DO block, run by the cell's user: the effect records of an earlier version (`<schema>._cell_effects`)
 * moved into `cell.effects`; every object of the schema (and every large object) given to the role; every
 * routine of the schema written in a language (not a built-in) made unexecutable by the role and PUBLIC.
 */
function repairSql(names: WsNames): string {
  return `DO $repair$
DECLARE
  -- regrole prints as an identifier (quoted when it must be): formatted with %s, never %I.
  ws regrole := ${lit(names.role)}::regrole;
  sch text := ${lit(names.schema)};
  k record;
  r record;
BEGIN
  IF to_regclass(format('%I._cell_effects', sch)) IS NOT NULL THEN
    EXECUTE format('INSERT INTO cell.effects (key, result, at) SELECT key, result, at FROM %I._cell_effects ON CONFLICT (key) DO NOTHING', sch);
    EXECUTE format('DROP TABLE %I._cell_effects', sch);
  END IF;
  -- Tables first: their owned sequences, indexes and row types follow them.
  FOR r IN SELECT c.oid, c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = sch AND c.relkind IN ('r', 'p', 'f', 'v', 'm', 'c', 'S') ORDER BY c.relkind = 'S' LOOP
    IF (SELECT relowner FROM pg_class WHERE oid = r.oid) <> ws THEN
      EXECUTE format('ALTER %s %I.%I OWNER TO %s',
        CASE r.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'f' THEN 'FOREIGN TABLE'
                       WHEN 'S' THEN 'SEQUENCE' WHEN 'c' THEN 'TYPE' ELSE 'TABLE' END,
        sch, r.relname, ws::text);
    END IF;
  END LOOP;
  FOR r IN SELECT t.oid, t.typname, t.typtype FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
            WHERE n.nspname = sch AND t.typtype IN ('b', 'd', 'e', 'r')
              AND NOT EXISTS (SELECT 1 FROM pg_type e WHERE e.typarray = t.oid) LOOP
    IF (SELECT typowner FROM pg_type WHERE oid = r.oid) <> ws THEN
      EXECUTE format('ALTER %s %I.%I OWNER TO %s', CASE r.typtype WHEN 'd' THEN 'DOMAIN' ELSE 'TYPE' END, sch, r.typname, ws::text);
    END IF;
  END LOOP;
  FOR r IN SELECT p.oid FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = sch AND p.proowner <> ws LOOP
    EXECUTE format('ALTER ROUTINE %s OWNER TO %s', r.oid::regprocedure, ws::text);
  END LOOP;
  FOR r IN SELECT o.oid FROM pg_operator o JOIN pg_namespace n ON n.oid = o.oprnamespace WHERE n.nspname = sch AND o.oprowner <> ws LOOP
    EXECUTE format('ALTER OPERATOR %s OWNER TO %s', r.oid::regoperator, ws::text);
  END LOOP;
  FOR k IN SELECT * FROM (VALUES
      ('pg_collation', 'collname', 'collnamespace', 'collowner', 'COLLATION'),
      ('pg_conversion', 'conname', 'connamespace', 'conowner', 'CONVERSION'),
      ('pg_statistic_ext', 'stxname', 'stxnamespace', 'stxowner', 'STATISTICS'),
      ('pg_ts_config', 'cfgname', 'cfgnamespace', 'cfgowner', 'TEXT SEARCH CONFIGURATION'),
      ('pg_ts_dict', 'dictname', 'dictnamespace', 'dictowner', 'TEXT SEARCH DICTIONARY')) AS v(cat, name, ns, owner, what) LOOP
    FOR r IN EXECUTE format('SELECT x.%I AS name FROM pg_catalog.%I x JOIN pg_catalog.pg_namespace n ON n.oid = x.%I WHERE n.nspname = $1 AND x.%I <> $2',
                            k.name, k.cat, k.ns, k.owner) USING sch, ws LOOP
      EXECUTE format('ALTER %s %I.%I OWNER TO %s', k.what, sch, r.name, ws::text);
    END LOOP;
  END LOOP;
  FOR r IN SELECT oid FROM pg_largeobject_metadata WHERE lomowner <> ws LOOP
    EXECUTE format('ALTER LARGE OBJECT %s OWNER TO %s', r.oid, ws::text);
  END LOOP;
  FOR r IN SELECT p.oid FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace JOIN pg_language l ON l.oid = p.prolang
            WHERE n.nspname = sch AND l.lanname NOT IN ('internal', 'c') LOOP
    EXECUTE format('REVOKE ALL ON ROUTINE %s FROM PUBLIC, %s', r.oid::regprocedure, ws::text);
  END LOOP;
END
$repair$`;
}
