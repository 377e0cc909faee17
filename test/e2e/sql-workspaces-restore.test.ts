/**
 * Issue 36, finding 5: the documented PostgreSQL backup and restore
 * (docs/operations.md, "Backup and restore", the two shell blocks run as they
 * are written there, with the real pg_dump, psql and pg_restore) keeps SQL
 * workspaces working: a cell on the restored database runs SQL jobs that read
 * the workspaces' data and write to it (serial and identity columns, views,
 * indexes), where the restore of main at ba6d9b9 failed every such job with
 * `permission denied for table _cell_effects`. PostgreSQL only.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { test } from 'node:test';
import { groupSecretsKeyFile, startCellProcess, type CellProcess } from '../helpers/cell-process.ts';
import { TEST_ENGINE } from '../helpers/inproc.ts';
import { adminQuery, dropWorkspaceDatabases, pgServerUrl } from '../helpers/postgres.ts';

const RUNS = '/api/public/v1/admin/jobs/runs';
const PG_BIN = '/usr/lib/postgresql/15/bin';
const exec = promisify(execFile);

/** The shell block of docs/operations.md whose first line is `# <title>…`. */
function docBlock(title: string): string {
  const doc = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
  for (const m of doc.matchAll(/```sh\n([\s\S]*?)```/g)) if (m[1]!.startsWith(`# ${title}`)) return m[1]!;
  throw new Error(`docs/operations.md has no sh block starting '# ${title}'`);
}

async function bash(script: string, cwd: string, env: Record<string, string>): Promise<void> {
  try {
    await exec('bash', ['-euo', 'pipefail', '-c', script], {
      cwd,
      env: { ...process.env, PATH: `${PG_BIN}:${process.env['PATH']}`, ...env },
    });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`);
  }
}

async function call(cell: CellProcess, key: string, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(cell.url + path, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return text ? JSON.parse(text) : undefined;
}

async function sql(cell: CellProcess, key: string, ws: string, statements: string[]): Promise<any> {
  const r = await call(cell, key, 'POST', RUNS, {
    job_type: 'sql',
    workspace_id: ws,
    spec: { statements: statements.map((s) => ({ sql: s })) },
  });
  assert.ok(r.run_id, JSON.stringify(r));
  for (let i = 0; i < 1200; i++) {
    const s = await call(cell, key, 'GET', `${RUNS}/${r.run_id}`);
    if (['completed', 'failed', 'cancelled', 'refused'].includes(s.state)) return s;
    await new Promise((res) => setTimeout(res, 25));
  }
  throw new Error(`run ${r.run_id} did not finish`);
}

test('the documented pg_dump / pg_restore round trip keeps every SQL workspace working', {
  skip: TEST_ENGINE !== 'postgres' ? 'PostgreSQL only' : false,
}, async () => {
  const work = mkdtempSync(join(tmpdir(), 'cell-ws-restore-'));
  const server = (await pgServerUrl()).replace(/\/[^/]*$/, '');
  const newDb = `t_restored_${process.pid}_${randomBytes(4).toString('hex')}`;
  const cell = await startCellProcess();
  const key = cell.adminKey;
  const storeUrl = /--store (\S+)/.exec(cell.proc.spawnargs.join(' '))![1]!;
  let again: CellProcess | undefined;
  try {
    const ledger = await sql(cell, key, 'ledger', [
      'CREATE TABLE entries (id SERIAL PRIMARY KEY, amount INTEGER NOT NULL)',
      'CREATE TABLE tags (id INTEGER GENERATED ALWAYS AS IDENTITY, tag TEXT)',
      'CREATE INDEX entries_amount ON entries (amount)',
      'CREATE VIEW totals AS SELECT sum(amount)::int AS total, count(*)::int AS n FROM entries',
      'INSERT INTO entries (amount) VALUES (10), (20)',
      "INSERT INTO tags (tag) VALUES ('first')",
    ]);
    assert.equal(ledger.state, 'completed', JSON.stringify(ledger.error));
    const notes = await sql(cell, key, 'notes.2026', ['CREATE TABLE notes (s TEXT)', "INSERT INTO notes VALUES ('kept')"]);
    assert.equal(notes.state, 'completed', JSON.stringify(notes.error));

    // The backup, while the cell serves; then the cell stops and the restore makes a new database.
    const dumps = join(work, 'dumps');
    mkdirSync(dumps);
    await bash(docBlock('PostgreSQL backup'), dumps, { CELL_STORE_URL: storeUrl });
    await cell.stop();
    await bash(docBlock('PostgreSQL restore'), dumps, { NEW_SERVER: server, NEW_DB: newDb });

    const dir = join(work, 'restored-dir');
    mkdirSync(dir);
    for (const f of readdirSync(cell.dataDir))
      if (f === 'cell-id' || /^member-.*\.key$/.test(f)) cpSync(join(cell.dataDir, f), join(dir, f));
    again = await startCellProcess({ dataDir: dir, args: ['--store', `${server}/${newDb}`, '--secrets-key-file', groupSecretsKeyFile()] });

    const after = await sql(again, key, 'ledger', [
      'INSERT INTO entries (amount) VALUES (5)',
      "INSERT INTO tags (tag) VALUES ('second')",
      'SELECT total, n FROM totals',
      'SELECT tag FROM tags ORDER BY id',
    ]);
    assert.equal(after.state, 'completed', JSON.stringify(after.error));
    assert.deepEqual(after.output.results[2].rows, [[35, 3]], 'the rows of before, and the new one once');
    assert.deepEqual(after.output.results[3].rows, [['first'], ['second']]);
    const read = await sql(again, key, 'notes.2026', ["INSERT INTO notes VALUES ('new')", 'SELECT s FROM notes ORDER BY s']);
    assert.equal(read.state, 'completed', JSON.stringify(read.error));
    assert.deepEqual(read.output.results[1].rows, [['kept'], ['new']]);
    // The restored workspaces are databases of the restored cells' database, not the original's.
    const owned = await adminQuery(
      `${server}/postgres`,
      `SELECT count(*)::int AS n FROM pg_database WHERE shobj_description(oid, 'pg_database') LIKE 'agent-cell SQL workspace of database ${newDb}:%'`,
    );
    assert.equal(owned.rows[0].n, 2);
  } finally {
    await again?.stop();
    again?.cleanup();
    await cell.stop();
    cell.cleanup();
    await adminQuery(`${server}/postgres`, `DROP DATABASE IF EXISTS ${newDb} WITH (FORCE)`).catch(() => undefined);
    await dropWorkspaceDatabases(`${server}/postgres`, newDb).catch(() => undefined);
    rmSync(work, { recursive: true, force: true });
  }
});
