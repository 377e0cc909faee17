// Security review, finding 10: the sql job's refusal list was a text-prefix
// regex, so a leading comment (`/**/ATTACH ...`, `/**/COMMIT`) walked past it.
// The statement is now judged on what SQLite itself prepared: its first keyword
// in SQLite's normalized form, one statement per entry. Each refusal leaves the
// workspace database file exactly as it was.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runSql, type SqlOutcome, type SqlTask } from '../../../../cell/jobs/sandbox/sql.ts';
import { workspaceDbPath } from '../../../../cell/jobs/steps.ts';
import { inProcessCell, TEST_ENGINE, type InProcess } from '../../../helpers/inproc.ts';

const SQLITE_ONLY =
  TEST_ENGINE === 'postgres'
    ? 'SQLite dialect and files: on PostgreSQL a workspace database is a schema (test/cell/jobs/sql-workspaces.test.ts)'
    : false;
import { waitFinished } from '../_wait.ts';

let dir: string;
let db: string;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sql-refusals-'));
  db = join(dir, 'sql.sqlite');
  const r = await runSql(task(['CREATE TABLE t (x TEXT)', "INSERT INTO t VALUES ('seed')"]));
  assert.equal(r.ok, true, JSON.stringify(r));
});
after(() => rmSync(dir, { recursive: true, force: true }));

function task(sqls: string[]): SqlTask {
  return { dbPath: db, statements: sqls.map((sql) => ({ sql })), rowLimit: 100 };
}
const fileHash = () => createHash('sha256').update(readFileSync(db)).digest('hex');
const rows = async () => {
  const r = await runSql(task(['SELECT x FROM t ORDER BY rowid']));
  assert.ok(r.ok);
  return r.results[0]!.rows.map((row) => row[0]);
};

/** Runs `[INSERT marker, attack]` and asserts the refusal and that the file did not change. */
async function refused(attack: string, refusedAs: string): Promise<SqlOutcome> {
  const before = fileHash();
  const r = await runSql(task(["INSERT INTO t VALUES ('marker')", attack]));
  assert.equal(r.ok, false, `${JSON.stringify(attack)} must be refused`);
  assert.equal(!r.ok && r.reason, 'statement_refused', `${JSON.stringify(attack)}: ${JSON.stringify(r)}`);
  assert.equal(!r.ok && r.refused, refusedAs, JSON.stringify(attack));
  assert.equal(!r.ok && r.statement, 1, 'names the entry');
  assert.equal(fileHash(), before, `${JSON.stringify(attack)}: the database file is untouched`);
  return r;
}

test('exactly once: a job run again under the same effect key returns its recorded result and applies nothing', async () => {
  const once = (key: string) =>
    runSql({ ...task(["INSERT INTO t VALUES ('once')", "SELECT count(*) FROM t WHERE x = 'once'"]), effectKey: key });
  const first = await once('k1');
  assert.ok(first.ok && !first.replayed, JSON.stringify(first));
  const hash = fileHash();
  const again = await once('k1');
  assert.ok(again.ok && again.replayed === true, JSON.stringify(again));
  assert.deepEqual(again.ok && again.results, first.ok && first.results, 'the recorded result, as the first run returned it');
  assert.equal(fileHash(), hash, 'the file is untouched by the replay');
  // Another step (another key) does apply: the record is what told them apart.
  const other = await once('k2');
  assert.ok(other.ok && !other.replayed);
  assert.deepEqual(other.ok && other.results[1]!.rows, [[2]]);
  // A job that failed recorded nothing: run again, it runs.
  const failed = await runSql({ ...task(["INSERT INTO t VALUES ('once')", 'SELECT nope FROM t']), effectKey: 'k3' });
  assert.equal(failed.ok, false);
  const retried = await runSql({ ...task(["DELETE FROM t WHERE x = 'once'"]), effectKey: 'k3' });
  assert.ok(retried.ok && !retried.replayed && retried.results[0]!.changes === 2);
});

test('the bypasses of the review and their cousins: leading comments, nested-looking comments, line comments, whitespace, case', async () => {
  const attacks: [string, string][] = [
    ["/**/ATTACH 'evil.db' AS evil", 'ATTACH'],
    ['/**/COMMIT', 'COMMIT'],
    ["/* a /* b */ ATTACH 'x' AS y", 'ATTACH'],
    ['/* /* */ COMMIT', 'COMMIT'],
    ['-- a line comment\nBEGIN', 'BEGIN'],
    ['--\r\nrollback', 'ROLLBACK'],
    ['/*x*/ /*y*/ -- z\n\t DeTaCh y', 'DETACH'],
    [' \t\n\r\f VaCuUm', 'VACUUM'],
    ['/**/end', 'END'],
    ['/**/END TRANSACTION', 'END'],
    ['/**/savepoint s', 'SAVEPOINT'],
    ['/**/release s', 'RELEASE'],
    ['/**/ROLLBACK TO s', 'ROLLBACK'],
    ['BEGIN IMMEDIATE', 'BEGIN'],
    ['/**/PRAGMA max_page_count = 2147483647', 'PRAGMA'],
    ['/**/pragma writable_schema = 1', 'PRAGMA'],
    ["/**/VACUUM INTO 'copy.db'", 'VACUUM'],
  ];
  for (const [attack, kind] of attacks) await refused(attack, kind);
  assert.deepEqual(await rows(), ['seed'], 'no marker row was committed by any refused job');
});

test('one statement per entry: a second statement after the first is refused, whatever separates them', async () => {
  await refused("SELECT 1; ATTACH 'x' AS y", 'multiple_statements');
  await refused('SELECT 1;/**/COMMIT', 'multiple_statements');
  await refused("SELECT 1; -- c\n INSERT INTO t VALUES ('two')", 'multiple_statements');
  await refused('SELECT 1; SELECT * FROM no_such_table', 'multiple_statements');
  await refused('/* only a comment */', 'empty_statement');
  await refused(' ; ', 'empty_statement');
  assert.deepEqual(await rows(), ['seed']);
});

test('comments, case and keywords inside literals or trigger bodies are fine when the statement itself is allowed', async () => {
  const r = await runSql(
    task([
      "/* lead */ INSERT INTO t VALUES ('COMMIT') -- trailing",
      "-- line\nselect x from t where x = 'ATTACH' ; /* after */",
      'CREATE TRIGGER t_ins AFTER INSERT ON t BEGIN SELECT 1; END',
      "WITH c(v) AS (VALUES ('w')) INSERT INTO t SELECT v FROM c",
    ]),
  );
  assert.equal(r.ok, true, JSON.stringify(r));
  assert.deepEqual(await rows(), ['seed', 'COMMIT', 'w']);
  const undone = await runSql(task(["DELETE FROM t WHERE x <> 'seed'", 'DROP TRIGGER t_ins']));
  assert.equal(undone.ok, true);
});

test('end to end: a refused sql job run fails with statement_refused and commits nothing to its workspace', {
  skip: SQLITE_ONLY,
}, async () => {
  const t: InProcess = await inProcessCell();
  try {
    const run = async (statements: string[]) => {
      const r = await t.request('POST', '/api/public/v1/admin/jobs/runs', {
        token: t.adminKey,
        body: { job_type: 'sql', workspace_id: 'ws-sql', spec: { statements: statements.map((sql) => ({ sql })) } },
      });
      assert.equal(r.status, 202, r.text);
      await waitFinished(t.modules.runs.runs, r.body.run_id);
      return (await t.request('GET', `/api/public/v1/admin/jobs/runs/${r.body.run_id}`, { token: t.adminKey })).body;
    };
    assert.equal((await run(['CREATE TABLE t (x TEXT)'])).state, 'completed');
    const file = workspaceDbPath(t.core.config.dataDir, 'ws-sql');
    assert.ok(existsSync(file));
    const before = readFileSync(file);
    for (const attack of ["/**/ATTACH 'evil.db' AS evil", '/**/COMMIT', '/**/PRAGMA max_page_count = 1']) {
      const s = await run(["INSERT INTO t VALUES ('marker')", attack]);
      assert.equal(s.state, 'failed', attack);
      assert.equal(s.error.reason, 'statement_refused', JSON.stringify(s.error));
      assert.equal(s.error.details.statement, 1);
      assert.deepEqual(readFileSync(file), before, `${attack}: the workspace file is unchanged`);
    }
    const count = await run(['SELECT count(*) FROM t']);
    assert.deepEqual(count.output.results[0].rows, [[0]]);
  } finally {
    await t.close();
  }
});
