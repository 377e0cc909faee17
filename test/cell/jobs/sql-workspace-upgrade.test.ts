/**
 * Issue 36, the upgrade path: a SQL workspace an earlier version kept as a
 * schema of the cells' database (its role, its tables, its effect records, a
 * function of its own, its secrets in the clear) is moved into a database of
 * its own when a cell starts: its data and records are there, the old schema
 * is gone, its function no longer runs, its secrets are sealed. Without
 * pg_dump and pg_restore the move is refused and the workspace's jobs fail
 * `workspace_not_migrated`, running nothing in the cells' database. The cell
 * runs as a user with CREATEROLE and CREATEDB only, as docs/jobs.md asks.
 * PostgreSQL only.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { wsNames } from '../../../cell/jobs/sandbox/pg-workspace.ts';
import { adminQuery, dropWorkspaceDatabases, pgServerUrl, workspaceDb } from '../../helpers/postgres.ts';
import { inProcessCell, TEST_ENGINE, type InProcess } from '../../helpers/inproc.ts';
import { waitFinished } from './_wait.ts';

const RUNS = '/api/public/v1/admin/jobs/runs';
const skip = TEST_ENGINE !== 'postgres';

let server: string;
let user: string;
let dbName: string;
let url: string;
/** The owner's key, printed by the first start on the store. */
let key: string;
const dirs: string[] = [];

before(async () => {
  if (skip) return;
  server = await pgServerUrl();
  const tag = randomBytes(4).toString('hex');
  user = `cell_np_${tag}`;
  dbName = `t_up_${process.pid}_${tag}`;
  // The least the docs ask for: a login role with CREATEROLE and CREATEDB, owning the cells' database.
  await adminQuery(server, `CREATE ROLE ${user} LOGIN CREATEROLE CREATEDB PASSWORD 'np'`);
  await adminQuery(server, `CREATE DATABASE ${dbName} OWNER ${user} TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'`);
  const u = new URL(server);
  u.username = user;
  u.password = 'np';
  u.pathname = `/${dbName}`;
  url = u.toString();
});

after(async () => {
  if (skip) return;
  await adminQuery(server, `DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  await dropWorkspaceDatabases(server, dbName);
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function cell(config: Record<string, unknown> = {}, dataDir?: string): Promise<InProcess> {
  const dir = dataDir ?? mkdtempSync(join(tmpdir(), 'cell-upgrade-'));
  if (!dataDir) dirs.push(dir);
  return inProcessCell({ config: { cellId: 'cell-up', storeUrl: url, dataDir: dir, ...config } });
}

async function sql(on: InProcess, ws: string, spec: Record<string, unknown>): Promise<any> {
  const r = await on.request('POST', RUNS, { token: key, body: { job_type: 'sql', workspace_id: ws, spec } });
  assert.equal(r.status, 202, r.text);
  await waitFinished(on.modules.runs.runs, r.body.run_id, 60_000);
  return (await on.request('GET', `${RUNS}/${r.body.run_id}`, { token: key })).body;
}

/** What the earlier version made for a workspace, made here by hand with the cell's user (as that version did). */
async function legacyWorkspace(ws: string): Promise<{ role: string; schema: string; effectKey: string }> {
  const { role, schema } = wsNames(dbName, ws);
  const effectKey = randomBytes(32).toString('hex');
  const recordKey = createHash('sha256').update(`record of ${ws}`).digest('hex');
  await adminQuery(
    url,
    `CREATE ROLE ${role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS;
     ALTER ROLE ${role} WITH LOGIN PASSWORD 'legacy-password' CONNECTION LIMIT 64;
     GRANT ${role} TO CURRENT_USER;
     CREATE SCHEMA ${schema} AUTHORIZATION ${role};
     REVOKE ALL ON SCHEMA ${schema} FROM PUBLIC;
     ALTER ROLE ${role} SET search_path = ${schema};
     SET ROLE ${role};
     CREATE TABLE ${schema}.notes (n INTEGER, s TEXT);
     INSERT INTO ${schema}.notes VALUES (1, 'kept'), (2, 'also kept');
     CREATE TABLE ${schema}.items (id SERIAL PRIMARY KEY, name TEXT);
     INSERT INTO ${schema}.items (name) VALUES ('first');
     CREATE VIEW ${schema}.named AS SELECT name FROM ${schema}.items;
     CREATE FUNCTION ${schema}.pwn() RETURNS void LANGUAGE plpgsql AS $$ BEGIN EXECUTE 'ALTER ROLE ' || quote_ident(current_user) || ' PASSWORD ''pwned'''; END $$;
     CREATE TABLE ${schema}._cell_effects (key TEXT PRIMARY KEY, result TEXT NOT NULL, at BIGINT NOT NULL);
     INSERT INTO ${schema}._cell_effects VALUES ('${recordKey}', '[]', ${Date.now()});
     RESET ROLE;
     INSERT INTO job_sql_workspaces (workspace_id, effect_key, role_password, created_at) VALUES ('${ws}', '${effectKey}', 'legacy-password', 0);`,
  );
  return { role, schema, effectKey: recordKey };
}

const schemaInCellsDb = async (schema: string) =>
  (await adminQuery(url, `SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = '${schema}'`)).rows[0].n as number;

test('a workspace of an earlier version moves into a database of its own at start: data, records, no code, sealed secrets', {
  skip,
}, async () => {
  // A first start makes the store; the earlier version's workspaces are then made beside it.
  const dir = mkdtempSync(join(tmpdir(), 'cell-upgrade-'));
  dirs.push(dir);
  const first = await cell({}, dir);
  key = first.adminKey;
  await first.close();
  const legacy = await legacyWorkspace('old-ws');
  const stuck = await legacyWorkspace('stuck-ws');

  // Without pg_dump and pg_restore the move is refused: the job fails, nothing runs, the old schema stays whole.
  const empty = mkdtempSync(join(tmpdir(), 'no-pg-bin-'));
  dirs.push(empty);
  const without = await cell({ pgBinDir: empty }, dir);
  try {
    const r = await sql(without, 'stuck-ws', { sql: 'INSERT INTO notes VALUES (3, $1)', params: ['must not land'] });
    assert.equal(r.state, 'failed');
    assert.equal(r.error.reason, 'workspace_not_migrated', JSON.stringify(r.error));
    assert.match(r.error.message, /pg_dump/);
  } finally {
    await without.close();
  }
  assert.equal(await schemaInCellsDb(stuck.schema), 1);
  assert.deepEqual(
    (await adminQuery(url, `SELECT count(*)::int AS n FROM ${stuck.schema}.notes`)).rows[0].n,
    2,
    'nothing ran in the cells’ database',
  );

  const c = await cell({}, dir);
  try {
    // The job waits for the move the start began.
    const read = await sql(c, 'old-ws', { sql: 'SELECT n, s FROM notes ORDER BY n' });
    assert.equal(read.state, 'completed', JSON.stringify(read.error));
    assert.deepEqual(read.output.results[0].rows, [
      [1, 'kept'],
      [2, 'also kept'],
    ]);
    const write = await sql(c, 'old-ws', {
      statements: [{ sql: "INSERT INTO items (name) VALUES ('second')" }, { sql: 'SELECT name FROM named ORDER BY name' }],
    });
    assert.equal(write.state, 'completed', JSON.stringify(write.error));
    assert.deepEqual(write.output.results[1].rows, [['first'], ['second']], 'the sequence and the view came along, the role owns them');
    const code = await sql(c, 'old-ws', { sql: 'SELECT pwn()' });
    assert.equal(code.state, 'failed');
    assert.match(code.error.message, /permission denied for function pwn/, 'its own function no longer runs');
    // The old schema is gone from the cells' database; the effect record moved with the data.
    assert.equal(await schemaInCellsDb(legacy.schema), 0);
    const records = await adminQuery(workspaceDb(url, 'old-ws').url, 'SELECT key FROM cell.effects');
    assert.ok(
      records.rows.some((x) => x.key === legacy.effectKey),
      'the record of the earlier version is among the cell’s',
    );
    // Its secrets are sealed now, its password a new one.
    const row = (await c.rows("SELECT effect_key, role_password FROM job_sql_workspaces WHERE workspace_id = 'old-ws'"))[0]!;
    assert.equal(JSON.parse(String(row['role_password'])).sealed, 1);
    assert.equal(JSON.parse(String(row['effect_key'])).sealed, 1);
    // The one refused before moves now too.
    const later = await sql(c, 'stuck-ws', { sql: 'SELECT count(*) FROM notes' });
    assert.equal(later.state, 'completed', JSON.stringify(later.error));
    assert.deepEqual(later.output.results[0].rows, [[2]]);
    assert.equal(await schemaInCellsDb(stuck.schema), 0);
  } finally {
    await c.close();
  }
});
