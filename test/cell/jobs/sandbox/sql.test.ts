// Security review, finding 10: the sql job's refusal list was a text-prefix
// regex, so a leading comment (`/**/ATTACH ...`, `/**/COMMIT`) walked past it.
// The statement is now judged on what SQLite itself prepared: its first keyword
// in SQLite's normalized form, one statement per entry. Each refusal leaves the
// workspace database file exactly as it was.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runSql, type SqlOutcome, type SqlTask } from '../../../../cell/jobs/sandbox/sql.ts';
import { loadSqlJs } from '../../../../cell/store/sqljs.ts';
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

/** The key of the effect records' MACs in these tests (the cell derives one per workspace: steps.ts effectMacKey). */
const MAC_KEY = 'ab'.repeat(32);

test('exactly once: a job run again under the same effect key returns its recorded result and applies nothing', async () => {
  const once = (key: string) =>
    runSql({
      ...task(["INSERT INTO t VALUES ('once')", "SELECT count(*) FROM t WHERE x = 'once'"]),
      effectKey: key,
      effectMacKey: MAC_KEY,
    });
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
  const failed = await runSql({ ...task(["INSERT INTO t VALUES ('once')", 'SELECT nope FROM t']), effectKey: 'k3', effectMacKey: MAC_KEY });
  assert.equal(failed.ok, false);
  const retried = await runSql({ ...task(["DELETE FROM t WHERE x = 'once'"]), effectKey: 'k3', effectMacKey: MAC_KEY });
  assert.ok(retried.ok && !retried.replayed && retried.results[0]!.changes === 2);
});

test('a job cannot change the effect records that make earlier jobs apply once (issue 36, finding 10)', async () => {
  const keep = await runSql({
    ...task(["INSERT INTO t VALUES ('kept')", 'SELECT count(*) FROM t']),
    effectKey: 'fx-1',
    effectMacKey: MAC_KEY,
  });
  assert.ok(keep.ok && !keep.replayed, JSON.stringify(keep));
  const attacks: string[][] = [
    ['DELETE FROM _cell_effects'],
    ["DELETE FROM _cell_effects WHERE key = 'fx-1'"],
    ["UPDATE _cell_effects SET result = '[]'"],
    ['DROP TABLE _cell_effects'],
    ["INSERT INTO _cell_effects VALUES ('forged', '[]', 0, 'not a mac')"],
    // Renamed away and a look-alike put in its place, with the same keys, MACs and times.
    [
      'ALTER TABLE _cell_effects RENAME TO gone',
      'CREATE TABLE _cell_effects (key TEXT PRIMARY KEY, result TEXT NOT NULL, at INTEGER NOT NULL, mac TEXT NOT NULL)',
      'INSERT INTO _cell_effects SELECT key, result, at, mac FROM gone',
    ],
    // Renamed away, changed under another name, renamed back.
    ['ALTER TABLE _cell_effects RENAME TO aside', "UPDATE aside SET result = '[]'", 'ALTER TABLE aside RENAME TO _cell_effects'],
    // Dropped and made again with the cell's very text: empty, or refilled.
    [
      'CREATE TABLE copy AS SELECT * FROM _cell_effects',
      'DROP TABLE _cell_effects',
      'CREATE TABLE _cell_effects (key TEXT PRIMARY KEY, result TEXT NOT NULL, at INTEGER NOT NULL, mac TEXT NOT NULL)',
    ],
    [
      'CREATE TABLE copy AS SELECT * FROM _cell_effects',
      'DROP TABLE _cell_effects',
      'CREATE TABLE _cell_effects (key TEXT PRIMARY KEY, result TEXT NOT NULL, at INTEGER NOT NULL, mac TEXT NOT NULL)',
      "INSERT INTO _cell_effects SELECT key, '[]', at, mac FROM copy",
    ],
    ['CREATE INDEX by_time ON _cell_effects (at)'],
    // Code of the job's that the cell's own writes would run.
    ['CREATE TRIGGER wipe AFTER INSERT ON _cell_effects BEGIN DELETE FROM _cell_effects; END'],
    ['ALTER TABLE _cell_effects RENAME TO gone', 'CREATE VIEW _cell_effects AS SELECT * FROM gone'],
    ['ALTER TABLE _cell_effects ADD COLUMN extra TEXT'],
  ];
  for (const [i, attack] of attacks.entries()) {
    const before = fileHash();
    const r = await runSql({ ...task(["INSERT INTO t VALUES ('attack')", ...attack]), effectKey: `fx-attack-${i}`, effectMacKey: MAC_KEY });
    assert.equal(r.ok, false, `${attack.join('; ')} must be refused: ${JSON.stringify(r)}`);
    assert.equal(!r.ok && r.reason, 'statement_refused', `${attack.join('; ')}: ${JSON.stringify(r)}`);
    assert.equal(!r.ok && r.refused, 'effect_records', attack.join('; '));
    assert.equal(fileHash(), before, `${attack.join('; ')}: nothing of the job is kept`);
  }
  const again = await runSql({ ...task(["INSERT INTO t VALUES ('kept')"]), effectKey: 'fx-1', effectMacKey: MAC_KEY });
  assert.ok(again.ok && again.replayed === true, 'the record is as the cell wrote it');
  assert.deepEqual(again.ok && again.results, keep.ok && keep.results);
  const undone = await runSql(task(["DELETE FROM t WHERE x = 'kept'"]));
  assert.ok(undone.ok);
});

test('a record changed behind the cell does not verify: the step is neither replayed with it nor run again', async () => {
  const w = await runSql({ ...task(["INSERT INTO t VALUES ('mac')"]), effectKey: 'mac-1', effectMacKey: MAC_KEY });
  assert.ok(w.ok);
  // Edited outside any job (a copy of the file, a tool): the result is no longer the one the MAC covers.
  const SQL = await loadSqlJs();
  const edit = new SQL.Database(readFileSync(db));
  edit.run(`UPDATE _cell_effects SET result = '[{"columns":[],"rows":[],"truncated":false,"changes":999}]' WHERE key = 'mac-1'`);
  writeFileSync(db, edit.export());
  edit.close();
  const before = fileHash();
  const r = await runSql({ ...task(["INSERT INTO t VALUES ('mac')"]), effectKey: 'mac-1', effectMacKey: MAC_KEY });
  assert.equal(r.ok, false);
  assert.equal(!r.ok && r.reason, 'effect_record_invalid', JSON.stringify(r));
  assert.equal(fileHash(), before, 'nothing ran');
  const fixed = new SQL.Database(readFileSync(db));
  fixed.run("DELETE FROM _cell_effects WHERE key = 'mac-1'");
  fixed.run("DELETE FROM t WHERE x = 'mac'");
  writeFileSync(db, fixed.export());
  fixed.close();
});

test('the records of an earlier version (no MAC) are replayed as they are, and rebuilt with MACs by the next write', async () => {
  const file = join(dir, 'legacy.sqlite');
  const SQL = await loadSqlJs();
  const old = new SQL.Database();
  old.run('CREATE TABLE t (x TEXT)');
  old.run('CREATE TABLE _cell_effects (key TEXT PRIMARY KEY, result TEXT NOT NULL, at INTEGER NOT NULL)');
  old.run('INSERT INTO _cell_effects VALUES (\'old-1\', \'[{"columns":[],"rows":[],"truncated":false,"changes":1}]\', ?)', [Date.now()]);
  writeFileSync(file, old.export());
  old.close();
  const legacy = (key: string, sqls: string[]) =>
    runSql({ dbPath: file, statements: sqls.map((sql) => ({ sql })), rowLimit: 10, effectKey: key, effectMacKey: MAC_KEY });
  const replayed = await legacy('old-1', ["INSERT INTO t VALUES ('x')"]);
  assert.ok(replayed.ok && replayed.replayed === true, JSON.stringify(replayed));
  const next = await legacy('new-1', ["INSERT INTO t VALUES ('y')"]);
  assert.ok(next.ok && !next.replayed, JSON.stringify(next));
  const after = new SQL.Database(readFileSync(file));
  const cols = after.exec("SELECT name FROM pragma_table_xinfo('_cell_effects')")[0]!.values.map((c) => c[0]);
  after.close();
  assert.deepEqual(cols, ['key', 'result', 'at', 'mac']);
  const still = await legacy('old-1', ['SELECT 1']);
  assert.ok(still.ok && still.replayed === true, 'the old record, now with its MAC, still replays');
});

test('a temporary table counts toward the room the quota leaves (issue 36, finding 9)', async () => {
  const r = await runSql({
    ...task([
      'CREATE TEMP TABLE big AS WITH RECURSIVE c(n) AS (VALUES (1) UNION ALL SELECT n + 1 FROM c WHERE n < 50000) SELECT n, hex(randomblob(100)) AS v FROM c',
      "INSERT INTO t VALUES ('after temp')",
    ]),
    maxDbBytes: 1024 * 1024,
  });
  assert.equal(r.ok, false, JSON.stringify(r));
  assert.equal(!r.ok && r.reason, 'workspace_quota');
  assert.deepEqual(await rows(), ['seed'], 'nothing of it was kept');
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
