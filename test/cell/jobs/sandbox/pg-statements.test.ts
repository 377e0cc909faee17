// The first-keyword allow-list of SQL jobs on the PostgreSQL engine
// (cell/jobs/sandbox/pg-statements.ts): read past whitespace, line and nested
// block comments and parentheses as PostgreSQL does; anything it cannot read
// is refused (fail closed). The end-to-end refusals are in
// test/cell/jobs/sql-workspaces.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { leadingWords, refusal } from '../../../../cell/jobs/sandbox/pg-statements.ts';

test('leading words skip whitespace, comments (nested) and parentheses', () => {
  assert.deepEqual(leadingWords('  /* a /* b */ c */ -- d\n ( select 1', 2), ['SELECT']);
  assert.deepEqual(leadingWords('alter\t/* x */ role r', 2), ['ALTER', 'ROLE']);
  assert.deepEqual(leadingWords('-- only a comment', 1), []);
});

test('allowed kinds pass; everything else is refused with its keyword', () => {
  for (const ok of [
    'SELECT 1',
    'with x as (select 1) insert into t select * from x',
    '(SELECT 1)',
    'CREATE TABLE t (n int)',
    'ALTER TABLE t ADD c int',
    'EXPLAIN SELECT 1',
    // Objects that can only name functions that exist.
    'CREATE TRIGGER t AFTER INSERT ON x FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()',
    'CREATE OR REPLACE VIEW v AS SELECT 1',
    'CREATE AGGREGATE mysum (int) (SFUNC = int4pl, STYPE = int)',
  ]) {
    assert.equal(refusal(ok), null, ok);
  }
  const refused: [string, string][] = [
    ['COMMIT', 'COMMIT'],
    ['/* /* */ */ rollback', 'ROLLBACK'],
    ['START TRANSACTION', 'START'],
    ['SET ROLE x', 'SET'],
    ['reset all', 'RESET'],
    ['ALTER ROLE CURRENT_USER PASSWORD $$x$$', 'ALTER ROLE'],
    ['alter /* */ user u', 'ALTER USER'],
    ['ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO PUBLIC', 'ALTER DEFAULT'],
    ['CALL p()', 'CALL'],
    ['DO $$ BEGIN END $$', 'DO'],
    ['LISTEN x', 'LISTEN'],
    // Code of its own (issue 36, finding 10): none.
    ['CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$', 'CREATE FUNCTION'],
    ['create /* x */ or -- y\n replace function f() returns int language sql as $$ select 1 $$', 'CREATE FUNCTION'],
    ['CREATE OR REPLACE PROCEDURE p() LANGUAGE plpgsql AS $$ BEGIN END $$', 'CREATE PROCEDURE'],
    ['CREATE LANGUAGE plperl', 'CREATE LANGUAGE'],
    ['CREATE OR REPLACE TRUSTED PROCEDURAL LANGUAGE x', 'CREATE TRUSTED'],
    ['CREATE EXTENSION dblink', 'CREATE EXTENSION'],
    ['CREATE EVENT TRIGGER e ON ddl_command_start EXECUTE FUNCTION f()', 'CREATE EVENT'],
    ['CREATE TRANSFORM FOR int LANGUAGE sql (FROM SQL WITH FUNCTION f(internal))', 'CREATE TRANSFORM'],
    ['', 'empty_statement'],
    ['/* unterminated', 'empty_statement'],
    // Not whitespace to PostgreSQL: nothing readable, refused.
    ['\u00a0COMMIT', 'empty_statement'],
  ];
  for (const [sql, kind] of refused) assert.equal(refusal(sql)?.refused, kind, JSON.stringify(sql));
});
