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
    ['', 'empty_statement'],
    ['/* unterminated', 'empty_statement'],
    // Not whitespace to PostgreSQL: nothing readable, refused.
    ['\u00a0COMMIT', 'empty_statement'],
  ];
  for (const [sql, kind] of refused) assert.equal(refusal(sql)?.refused, kind, JSON.stringify(sql));
});
