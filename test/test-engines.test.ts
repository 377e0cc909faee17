// The PostgreSQL run of `make test` (the Makefile's PG_TEST_FILES) runs each file again with
// CELL_TEST_STORE=postgres. Only the test helpers that start cells (test/helpers/inproc.ts,
// test/helpers/cell-process.ts) and files that name CELL_TEST_STORE or TEST_ENGINE read it: the cell itself
// does not. A file that reaches none of them, through its imports or the test files it starts (a relative
// `.ts` path in its text, e.g. a fixture run as a child process), runs exactly the same on both engines, and
// running it twice only costs time. This test names every such file in the PostgreSQL run, so that one is
// added to PG_SKIP_FILES instead.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { importsOf } from '../scripts/lint-faces.ts';

const ROOT = resolve(import.meta.dirname, '..');
/** What chooses the engine: the helpers that start cells, and the variable itself. */
const ENGINE_HELPERS = ['test/helpers/inproc.ts', 'test/helpers/cell-process.ts'].map((f) => join(ROOT, f));
const ENGINE_NAMES = /\b(CELL_TEST_STORE|TEST_ENGINE)\b/;

/** The test files a file imports or names by a relative `.ts` path (a fixture it starts), within test/. */
function reached(file: string, text: string): string[] {
  const named = [...text.matchAll(/['"](\.\.?\/[^'"\s]+\.ts)['"]/g)].map((m) => m[1]!);
  return [...importsOf(text), ...named]
    .map((s) => resolve(dirname(file), s))
    .filter((f) => f.startsWith(join(ROOT, 'test') + '/') && existsSync(f));
}

/** Whether anything the file reaches, itself included, can tell the engines apart. */
export function reachesEngine(file: string): boolean {
  const seen = new Set<string>();
  const todo = [file];
  while (todo.length > 0) {
    const f = todo.pop()!;
    if (seen.has(f)) continue;
    seen.add(f);
    if (ENGINE_HELPERS.includes(f)) return true;
    const text = readFileSync(f, 'utf8');
    if (ENGINE_NAMES.test(text)) return true;
    todo.push(...reached(f, text));
  }
  return false;
}

test('every file of the PostgreSQL run can tell the engines apart (else it belongs in PG_SKIP_FILES)', () => {
  const r = spawnSync('make', ['-s', '--no-print-directory', 'pg-test-files'], { cwd: ROOT, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const files = r.stdout.split('\n').filter((l) => l.endsWith('.test.ts'));
  assert.ok(files.length > 50, `the PostgreSQL run lists ${files.length} files`);
  const same = files.filter((f) => !reachesEngine(join(ROOT, f)));
  assert.deepEqual(same, [], 'these run the same on both engines: add them to PG_SKIP_FILES');
});

test('the check itself: a helper that starts cells, the variable, a fixture started by path; pure code does not', () => {
  const at = (f: string) => reachesEngine(join(ROOT, f));
  assert.equal(at('test/cell/teams/runs.test.ts'), true, 'imports the in-process cell');
  assert.equal(at('test/e2e/ops.test.ts'), true);
  // Starts test/fixtures/otel-loaded.ts as a child process, which starts a cell on the embedded store alone.
  assert.equal(at('test/cell/ops/traces-off.test.ts'), false);
  assert.equal(at('test/core/canonical.test.ts'), false);
  assert.equal(at('test/cell/custody/seal.test.ts'), false);
  assert.equal(relative(ROOT, ENGINE_HELPERS[0]!), 'test/helpers/inproc.ts');
});
