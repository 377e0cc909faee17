/**
 * Issue 36, findings 9 and 10, on the PostgreSQL engine: what a SQL job does
 * in its workspace's database reaches no cell of the group (their change
 * channel, their advisory locks, their database), what used to escape the
 * workspace quota counts (large objects, temporary tables, sequences), a job
 * changes neither its own role nor the records that make earlier jobs apply
 * exactly once, and the workspace's secrets are sealed in the store. Each
 * attack here worked against main at ba6d9b9. Skipped on the embedded engine
 * (test/cell/jobs/sandbox/sql.test.ts has its cousins there).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { openSecret, readSecretsKeyFile } from '../../../cell/custody/api.ts';
import { provisionWorkspace, workspaceDbComment } from '../../../cell/jobs/sandbox/pg-provision.ts';
import { wsNames } from '../../../cell/jobs/sandbox/pg-workspace.ts';
import { CHANGE_CHANNEL, MIGRATION_LOCK_KEY } from '../../../cell/store/postgres.ts';
import { groupSecretsKeyFile } from '../../helpers/cell-process.ts';
import { adminQuery, workspaceDb } from '../../helpers/postgres.ts';
import { inProcessCell, TEST_ENGINE, type InProcess } from '../../helpers/inproc.ts';
import { groupConfig } from './_group.ts';
import { waitFinished } from './_wait.ts';

const RUNS = '/api/public/v1/admin/jobs/runs';
const skip = TEST_ENGINE !== 'postgres';
const GROUP = groupConfig(!skip);

let a: InProcess;
let b: InProcess;
let url: string;
let db: string;
const dirs: string[] = [];

async function peer(cellId: string, config: Record<string, unknown> = {}): Promise<InProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'cell-reach-'));
  dirs.push(dir);
  return inProcessCell({ clock: a.clock, config: { cellId, storeUrl: url, dataDir: dir, ...GROUP, ...config } });
}

before(async () => {
  if (skip) return;
  a = await inProcessCell({ config: { cellId: 'cell-a', ...GROUP } });
  url = a.core.config.storeUrl!;
  db = String((await a.rows('SELECT current_database() AS d'))[0]!['d']);
  b = await peer('cell-b');
});

after(async () => {
  if (skip) return;
  await b?.close();
  await a?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function submit(on: InProcess, ws: string, spec: Record<string, unknown>): Promise<string> {
  const r = await on.request('POST', RUNS, { token: a.adminKey, body: { job_type: 'sql', workspace_id: ws, spec } });
  assert.equal(r.status, 202, r.text);
  return r.body.run_id as string;
}

async function sql(on: InProcess, ws: string, spec: Record<string, unknown>, timeoutMs = 60_000): Promise<any> {
  const id = await submit(on, ws, spec);
  await waitFinished(on.modules.runs.runs, id, timeoutMs);
  return (await on.request('GET', `${RUNS}/${id}`, { token: a.adminKey })).body;
}

/** The URL of a workspace's database for the server's superuser (the test's own eyes). */
const wsDbUrl = (ws: string) => workspaceDb(url, ws).url;

const statements = (...s: string[]) => ({ statements: s.map((x) => ({ sql: x })) });

test('a flood of NOTIFYs on the cells’ change channel from a job reaches no cell', { skip }, async () => {
  let heardForged = 0;
  let heardRuns = 0;
  const unhear = b.core.store.onChange((c) => {
    if (c.tables.has('forged_by_job')) heardForged++;
    else if (c.remote && c.tables.has('runs')) heardRuns++;
  });
  try {
    // 200,000 distinct notifications (PostgreSQL folds identical ones of a transaction into one), each a
    // well-formed change of another "cell".
    const r = await sql(a, 'flood', {
      sql: `SELECT count(pg_notify('${CHANGE_CHANNEL}', json_build_object('i', 'not-a-cell', 't', json_build_array('forged_by_job'), 'n', g)::text))
              FROM generate_series(1, 200000) g`,
      time_limit_ms: 60_000,
    });
    assert.equal(r.state, 'completed', JSON.stringify(r.error));
    assert.deepEqual(r.output.results[0].rows, [[200000]]);
    // Notifications of one channel arrive in commit order: once cell b hears a change of cell a made after
    // the job committed, whatever the job sent would have come before it.
    const seen = heardRuns;
    const marker = await submit(a, 'flood-marker', { sql: 'SELECT 1' });
    const deadline = Date.now() + 30_000;
    while (heardRuns === seen && Date.now() < deadline) await new Promise((res) => setTimeout(res, 20));
    assert.ok(heardRuns > seen, 'cell b hears cell a');
    await waitFinished(a.modules.runs.runs, marker);
    assert.equal(heardForged, 0, 'no notification of the job reached a cell');
    assert.deepEqual(await b.core.store.health(), { ok: true });
  } finally {
    unhear();
  }
});

test('a job holding the cells’ migration lock delays no cell’s start', { skip }, async () => {
  const id = await submit(a, 'locker', {
    sql: 'SELECT pg_advisory_xact_lock($1::bigint), pg_sleep(30)',
    params: [MIGRATION_LOCK_KEY],
    time_limit_ms: 60_000,
  });
  try {
    // The job holds the key (in whatever database it runs in) and sleeps.
    const deadline = Date.now() + 30_000;
    let where: number | undefined;
    while (where === undefined && Date.now() < deadline) {
      const r = await adminQuery(
        url,
        `SELECT l.database FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid
          WHERE s.application_name = 'agent-cell-job' AND l.locktype = 'advisory' AND l.granted
            AND ((l.classid::bigint << 32) | l.objid::bigint) = ${MIGRATION_LOCK_KEY}`,
      );
      where = r.rows[0]?.database;
      if (where === undefined) await new Promise((res) => setTimeout(res, 20));
    }
    assert.ok(where !== undefined, 'the job took the lock');
    const cellsDb = (await adminQuery(url, 'SELECT oid FROM pg_database WHERE datname = current_database()')).rows[0].oid;
    assert.notEqual(where, cellsDb, "the job's lock is not in the cells' database");
    const free = await adminQuery(url, `SELECT pg_try_advisory_lock(${MIGRATION_LOCK_KEY}) AS got, pg_advisory_unlock_all()`);
    assert.equal(free.rows[0].got, true, "the cells' migration lock is free");
    // A cell starts (and takes that lock to migrate) while the job still sleeps with it.
    const c = await peer('cell-c');
    try {
      const run = (await a.request('GET', `${RUNS}/${id}`, { token: a.adminKey })).body;
      assert.equal(run.state, 'running', 'the cell started before the job let go');
    } finally {
      await c.close();
    }
  } finally {
    await a.request('POST', `${RUNS}/${id}/cancel`, { token: a.adminKey });
    await waitFinished(a.modules.runs.runs, id);
  }
});

test('large objects, temporary tables and sequences count toward the workspace quota; the cells’ database keeps none', {
  skip,
}, async () => {
  const q = await peer('cell-quota', { workspaceQuotaBytes: 4 * 1024 * 1024 });
  try {
    // 20 large objects of 512 KiB of hex text each (compressed, still well past 4 MiB).
    const lo = await sql(q, 'lo', {
      sql: `SELECT count(lo_from_bytea(0, convert_to((SELECT string_agg(md5(g::text || ':' || i::text), '') FROM generate_series(1, 16384) g), 'UTF8')))
              FROM generate_series(1, 20) i`,
    });
    assert.equal(lo.state, 'failed', JSON.stringify(lo.output));
    assert.equal(lo.error.reason, 'workspace_quota', JSON.stringify(lo.error));
    assert.equal(
      (await adminQuery(url, 'SELECT count(*)::int AS n FROM pg_largeobject_metadata')).rows[0].n,
      0,
      "none in the cells' database",
    );
    assert.equal((await adminQuery(wsDbUrl('lo'), 'SELECT count(*)::int AS n FROM pg_largeobject_metadata')).rows[0].n, 0, 'rolled back');

    const temp = await sql(q, 'temp', {
      sql: "CREATE TEMP TABLE big AS SELECT md5(g::text) || repeat('x', 500) AS v FROM generate_series(1, 20000) g",
    });
    assert.equal(temp.state, 'failed', JSON.stringify(temp.output));
    assert.equal(temp.error.reason, 'workspace_quota', JSON.stringify(temp.error));

    // 100 sequences a job (8 KiB each and their catalog rows): the quota ends it within 8 jobs.
    let refused: any;
    for (let j = 0; j < 8 && !refused; j++) {
      const r = await sql(q, 'seq', statements(...Array.from({ length: 100 }, (_, i) => `CREATE SEQUENCE s_${j}_${i}`)));
      if (r.state === 'failed') refused = r;
      else assert.equal(r.state, 'completed', JSON.stringify(r.error));
    }
    assert.ok(refused, 'sequences count toward the quota');
    assert.equal(refused.error.reason, 'workspace_quota', JSON.stringify(refused.error));

    // What a workspace needs still fits: a table and its rows.
    const fits = await sql(q, 'fits', statements('CREATE TABLE t (n INTEGER)', 'INSERT INTO t SELECT g FROM generate_series(1, 1000) g'));
    assert.equal(fits.state, 'completed', JSON.stringify(fits.error));
  } finally {
    await q.close();
  }
});

test('a job changes neither its role’s password nor its settings, through a function of its own or one it finds', { skip }, async () => {
  const ready = await sql(a, 'role', { sql: 'CREATE TABLE t (n INTEGER)' });
  assert.equal(ready.state, 'completed', JSON.stringify(ready.error));
  const { role } = wsNames(db, 'role');
  const authid = async () =>
    (
      await adminQuery(
        url,
        `SELECT a.rolpassword, (SELECT array_agg(setconfig) FROM pg_db_role_setting s WHERE s.setrole = a.oid)::text AS settings
           FROM pg_authid a WHERE a.rolname = '${role}'`,
      )
    ).rows[0];
  const before = await authid();
  // The attack of the finding: a plpgsql function of its own that alters its role.
  const own = await sql(
    a,
    'role',
    statements(
      "CREATE FUNCTION pwn() RETURNS void LANGUAGE plpgsql AS $$ BEGIN EXECUTE 'ALTER ROLE ' || quote_ident(current_user) || ' PASSWORD ''pwned'''; END $$",
      'SELECT pwn()',
    ),
  );
  assert.equal(own.state, 'failed');
  assert.equal(own.error.reason, 'statement_refused', JSON.stringify(own.error));
  assert.equal(own.error.details.refused, 'CREATE FUNCTION');
  // Code it did not write (an operator's, or an earlier version's) that alters the role: found before COMMIT.
  await adminQuery(
    wsDbUrl('role'),
    `CREATE SCHEMA fx; GRANT USAGE ON SCHEMA fx TO ${role};
     CREATE FUNCTION fx.pwn() RETURNS void LANGUAGE plpgsql AS $$ BEGIN EXECUTE 'ALTER ROLE ' || quote_ident(current_user) || ' PASSWORD ''pwned'''; END $$;
     CREATE FUNCTION fx.slow() RETURNS void LANGUAGE plpgsql AS $$ BEGIN EXECUTE 'ALTER ROLE ' || quote_ident(current_user) || ' SET statement_timeout = 0'; END $$`,
  );
  for (const attack of ['SELECT fx.pwn()', 'SELECT fx.slow()']) {
    const r = await sql(a, 'role', statements('INSERT INTO t VALUES (1)', attack));
    assert.equal(r.state, 'failed', attack);
    assert.equal(r.error.reason, 'statement_refused', JSON.stringify(r.error));
    assert.equal(r.error.details.refused, 'role_change', attack);
  }
  assert.deepEqual(await authid(), before, 'the role is as the cell set it');
  const later = await sql(b, 'role', { sql: 'SELECT count(*) FROM t' });
  assert.equal(later.state, 'completed', JSON.stringify(later.error));
  assert.deepEqual(later.output.results[0].rows, [[0]], 'nothing of the refused jobs was kept');
});

test('a job cannot rewrite the records that make earlier jobs apply exactly once', { skip }, async () => {
  const w = await sql(a, 'records', statements('CREATE TABLE t (n INTEGER)', 'INSERT INTO t VALUES (1)'));
  assert.equal(w.state, 'completed', JSON.stringify(w.error));
  const records = async () => (await adminQuery(wsDbUrl('records'), 'SELECT key, result, at FROM cell.effects ORDER BY key')).rows;
  const kept = await records();
  assert.equal(kept.length, 1, 'the write job recorded its effect');
  for (const attack of [
    'DELETE FROM _cell_effects',
    'DELETE FROM cell.effects',
    "UPDATE cell.effects SET result = '[]'",
    'TRUNCATE cell.effects',
    'ALTER TABLE cell.effects RENAME TO gone',
    'DROP SCHEMA cell CASCADE',
    "INSERT INTO cell.effects VALUES ('k', '[]', 0)",
  ]) {
    const r = await sql(b, 'records', statements('INSERT INTO t VALUES (2)', attack));
    assert.equal(r.state, 'failed', attack);
    assert.match(r.error.message, /permission denied|must be owner|does not exist/, attack);
  }
  assert.deepEqual(await records(), kept, 'the records are as the cell wrote them');
});

test('the workspace’s role password and effect key are sealed in the store; a store’s clear ones are sealed at start', {
  skip,
}, async () => {
  const r = await sql(a, 'sealed', { sql: 'SELECT 1' });
  assert.equal(r.state, 'completed', JSON.stringify(r.error));
  const key = readSecretsKeyFile(groupSecretsKeyFile());
  const open = (ws: string, column: string, stored: string) =>
    openSecret(key, `agent-cell workspace secret v1:${ws}:${column}`, Buffer.from(JSON.parse(stored).data, 'base64'));
  const row = (await a.rows("SELECT effect_key, role_password FROM job_sql_workspaces WHERE workspace_id = 'sealed'"))[0]!;
  for (const column of ['effect_key', 'role_password'] as const) {
    const stored = String(row[column]);
    assert.equal(JSON.parse(stored).sealed, 1, column);
    assert.match(open('sealed', column, stored), /^[0-9a-f]{48,64}$/, column);
  }
  // A row an earlier version kept in the clear: sealed by the next cell to start, with a new role password.
  const clearKey = 'a'.repeat(64);
  const clearPassword = 'b'.repeat(48);
  await a.core.store.write((tx) =>
    tx.run('INSERT INTO job_sql_workspaces (workspace_id, effect_key, role_password, created_at) VALUES (?, ?, ?, ?)', [
      'was-clear',
      clearKey,
      clearPassword,
      0,
    ]),
  );
  const c = await peer('cell-sealer');
  try {
    const after = (await a.rows("SELECT effect_key, role_password FROM job_sql_workspaces WHERE workspace_id = 'was-clear'"))[0]!;
    assert.equal(open('was-clear', 'effect_key', String(after['effect_key'])), clearKey, 'the effect key is kept');
    const password = open('was-clear', 'role_password', String(after['role_password']));
    assert.match(password, /^[0-9a-f]{48}$/);
    assert.notEqual(password, clearPassword, 'the password a copy of the old store holds is replaced');
    const job = await sql(c, 'was-clear', { sql: 'SELECT 1' });
    assert.equal(job.state, 'completed', JSON.stringify(job.error));
  } finally {
    await c.close();
  }
});

test('a cell sets the sealed password on a workspace role again when it starts; the role reaches its own workspace database only', {
  skip,
}, async () => {
  const r = await sql(a, 'relog', { sql: 'CREATE TABLE t (n INTEGER)' });
  assert.equal(r.state, 'completed', JSON.stringify(r.error));
  const { role } = wsNames(db, 'relog');
  // Someone changed the role's password behind the cell (an earlier version's job could): jobs still run.
  await adminQuery(url, `ALTER ROLE ${role} PASSWORD 'changed-behind'`);
  const before = (await adminQuery(url, `SELECT rolpassword FROM pg_authid WHERE rolname = '${role}'`)).rows[0].rolpassword;
  const c = await peer('cell-relog');
  try {
    const later = await sql(c, 'relog', { sql: 'INSERT INTO t VALUES (1)' });
    assert.equal(later.state, 'completed', JSON.stringify(later.error));
  } finally {
    await c.close();
  }
  const now = (await adminQuery(url, `SELECT rolpassword FROM pg_authid WHERE rolname = '${role}'`)).rows[0].rolpassword;
  assert.notEqual(now, before, 'the cell set the sealed password again');
  // And the role reaches its own database only.
  const conn = new pg.Client({ connectionString: url });
  await conn.connect();
  try {
    const grants = await conn.query(
      // Reaching a database: the right to connect, on one that admits connections (one being made admits none).
      "SELECT datname FROM pg_database WHERE datname LIKE 'cellws\\_%' AND datallowconn AND has_database_privilege($1, datname, 'CONNECT')",
      [role],
    );
    assert.deepEqual(
      grants.rows.map((x) => x.datname),
      [wsNames(db, 'relog').database],
      'of the workspace databases, its own',
    );
  } finally {
    await conn.end();
  }
});

test('a new workspace database admits no other role at any moment of its making; one a cell left unopened is opened', {
  skip,
}, async () => {
  const probe = `reach_probe_${process.pid}`;
  await adminQuery(url, `DROP ROLE IF EXISTS ${probe}`);
  await adminQuery(url, `CREATE ROLE ${probe} NOLOGIN`);
  const admin = new pg.Client({ connectionString: url });
  const eyes = new pg.Client({ connectionString: url });
  await admin.connect();
  await eyes.connect();
  const log = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined } as never;
  try {
    // After each statement the provisioner sends: could a role of the server other than the workspace's connect now?
    const open: string[] = [];
    const watched = new Proxy(admin, {
      get(target, key) {
        if (key !== 'query') return Reflect.get(target, key);
        return async (...args: unknown[]) => {
          const r = await (target.query as (...a: unknown[]) => Promise<unknown>)(...args);
          const { database } = wsNames(db, 'made-closed');
          const now = await eyes.query(
            `SELECT datallowconn AND has_database_privilege($1, datname, 'CONNECT') AS open FROM pg_database WHERE datname = $2`,
            [probe, database],
          );
          if (now.rows[0]?.open === true) open.push(String(args[0]).slice(0, 60));
          return r;
        };
      },
    });
    const names = await provisionWorkspace(watched as pg.Client, 'made-closed', 'p'.repeat(48), { url, log, pgBinDir: null });
    assert.deepEqual(open, [], 'no statement left the new database open to every role');
    const done = await eyes.query('SELECT datallowconn FROM pg_database WHERE datname = $1', [names.database]);
    assert.equal(done.rows[0].datallowconn, true, 'opened for its own role once made');

    // A cell that died between making the database and opening it: the next provisioning opens it.
    const left = wsNames(db, 'left-closed').database;
    await adminQuery(url, `CREATE DATABASE ${left} ALLOW_CONNECTIONS false`);
    await adminQuery(url, `COMMENT ON DATABASE ${left} IS '${workspaceDbComment(db, 'left-closed')}'`);
    const r = await sql(a, 'left-closed', { sql: 'SELECT 1' });
    assert.equal(r.state, 'completed', JSON.stringify(r.error));
    const grants = await eyes.query(
      "SELECT datname FROM pg_database WHERE datname LIKE 'cellws\\_%' AND datallowconn AND has_database_privilege($1, datname, 'CONNECT')",
      [probe],
    );
    assert.deepEqual(grants.rows, [], 'no workspace database lets any other role connect');
  } finally {
    await admin.end();
    await eyes.end();
    await adminQuery(url, `DROP ROLE IF EXISTS ${probe}`).catch(() => undefined);
  }
});
