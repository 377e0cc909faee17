// scripts/run-tests.mjs, the suite's runner, with scripts/test-times.mjs, the reporter it runs beside the usual one
// (--timed): on four small files (a slow one, a quick one that fails, one that throws before any test, one whose
// test leaves a timer behind), the runner exits 1, ends the lingering file with its test, and the reporter lists
// the files slowest first with their shares, marks the failed ones, says why they failed, honours TEST_TIMES_TOP and writes TEST_TIMES_FILE;
// with --beside, a file runs in a lane of its own at the same time, reported after the others, its counts summed with theirs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

const runner = resolve('scripts/run-tests.mjs');
// Without the runner's mark of its own children (this file runs under it), so that the inner runner reports.
const { NODE_TEST_CONTEXT: _, ...childEnv } = process.env;

async function runSuite(env: Record<string, string>): Promise<{ stdout: string; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'test-times-'));
  writeFileSync(
    join(dir, 'slow.test.mjs'),
    "import { test } from 'node:test';\ntest('slow', () => new Promise((r) => setTimeout(r, 1000)));\n",
  );
  writeFileSync(join(dir, 'fails.test.mjs'), "import { test } from 'node:test';\ntest('fails', () => { throw new Error('no'); });\n");
  writeFileSync(join(dir, 'throws.test.mjs'), "throw new Error('before any test');\n");
  writeFileSync(
    join(dir, 'lingers.test.mjs'),
    "import { test } from 'node:test';\ntest('lingers', () => { setTimeout(() => {}, 60_000); });\n",
  );
  const args = [runner, '--concurrency', '3', '--timed', 'slow.test.mjs', 'fails.test.mjs', 'throws.test.mjs', 'lingers.test.mjs'];
  // The suite fails (two files do): the runner exits 1, which is what the reporter must report through.
  const err = await promisify(execFile)(process.execPath, args, { cwd: dir, env: { ...childEnv, ...env } }).then(
    () => assert.fail('the suite has failing files: the runner must exit 1'),
    (e: { code: number; stdout: string }) => e,
  );
  assert.equal(err.code, 1);
  return { stdout: err.stdout, dir };
}

/** The table's rows: seconds, share (%) and file, in the order printed. */
function rows(stdout: string): { s: number; share: number; file: string; failed: boolean }[] {
  return [...stdout.matchAll(/^# +([\d.]+) s +([\d.]+) % \( *\d+ % so far\) {2}(\S+)( {2}FAILED)?$/gm)].map((m) => ({
    s: Number(m[1]),
    share: Number(m[2]),
    file: m[3]!,
    failed: m[4] !== undefined,
  }));
}

test('the slowest files, their shares, the failed ones marked; every file in TEST_TIMES_FILE', async () => {
  const out = join(mkdtempSync(join(tmpdir(), 'test-times-out-')), 'sub', 'times.tsv');
  const { stdout, dir } = await runSuite({ TEST_TIMES_FILE: out, TEST_TIMES_TOP: '' });
  try {
    assert.match(stdout, /^# slowest test files \(of 4; their times add up to \d+ s, in \d+ s of wall time\)$/m);
    const table = rows(stdout);
    assert.deepEqual(table.map((r) => r.file).sort(), ['fails.test.mjs', 'lingers.test.mjs', 'slow.test.mjs', 'throws.test.mjs']);
    assert.ok(table.find((r) => r.file === 'lingers.test.mjs')!.s < 30, 'a file ends with its tests, not with its last timer');
    for (let i = 1; i < table.length; i++) assert.ok(table[i - 1]!.s >= table[i]!.s, 'slowest first');
    assert.ok(table.find((r) => r.file === 'slow.test.mjs')!.s >= 1, 'a file takes at least the time its tests wait');
    assert.ok(Math.abs(table.reduce((a, r) => a + r.share, 0) - 100) < 0.5, 'the shares add up to the whole');
    assert.deepEqual(
      table
        .filter((r) => r.failed)
        .map((r) => r.file)
        .sort(),
      ['fails.test.mjs', 'throws.test.mjs'],
    );
    // Last, why: the failed test's error, so that a log cut to its tail still says it.
    const why = stdout.slice(stdout.indexOf('# why the failed tests failed'));
    assert.ok(stdout.indexOf('# why the failed tests failed') > stdout.indexOf('# slowest test files'), 'after the table');
    assert.match(why, /^# fails \(fails\.test\.mjs\)\n# {3}Error: no$/m);
    const tsv = readFileSync(out, 'utf8')
      .trimEnd()
      .split('\n')
      .map((l) => l.split('\t'));
    assert.deepEqual(
      tsv.map(([, f]) => f),
      table.map((r) => r.file),
    );
    for (const [s] of tsv) assert.match(s!, /^\d+\.\d\d$/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
    rmSync(join(out, '..', '..'), { recursive: true, force: true });
  }
});

test('TEST_TIMES_TOP limits the table, not the file', async () => {
  const { stdout, dir } = await runSuite({ TEST_TIMES_TOP: '1' });
  rmSync(dir, { recursive: true, force: true });
  assert.match(stdout, /\(of 4;/);
  assert.equal(rows(stdout).length, 1);
});

test('--beside: a waiting file runs in a lane of its own at once with the others; its report follows theirs, the counts are summed', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'test-times-beside-'));
  try {
    // Two files that each wait for the other to have started (a meeting, up to 20 s), and one that fails: with
    // one lane for the others, both pass only if the file beside them runs at the same time.
    const meet = (name: string, other: string) =>
      `import { test } from 'node:test';\nimport { existsSync, writeFileSync } from 'node:fs';\n` +
      `test('${name}', async () => {\n  writeFileSync('${name}.started', '');\n` +
      `  for (let i = 0; i < 400 && !existsSync('${other}.started'); i++) await new Promise((r) => setTimeout(r, 50));\n` +
      `  if (!existsSync('${other}.started')) throw new Error('${other} did not run meanwhile');\n});\n`;
    writeFileSync(join(dir, 'waits.test.mjs'), meet('waits beside', 'works in a lane'));
    writeFileSync(join(dir, 'works.test.mjs'), meet('works in a lane', 'waits beside'));
    writeFileSync(
      join(dir, 'fails.test.mjs'),
      "import { test } from 'node:test';\ntest('fails beside', () => { throw new Error('no'); });\n",
    );
    const args = [runner, '--concurrency', '1', '--timed', '--beside', 'waits.test.mjs', '--beside', 'fails.test.mjs', 'works.test.mjs'];
    const err = await promisify(execFile)(process.execPath, args, { cwd: dir, env: childEnv }).then(
      () => assert.fail('a file beside the others failed: the runner must exit 1'),
      (e: { code: number; stdout: string }) => e,
    );
    assert.equal(err.code, 1);
    const out = err.stdout;
    // Not interleaved: the lane's test first, then the files beside it, in the order given.
    const at = (s: string) => out.indexOf(s);
    assert.ok(at('✔ works in a lane') >= 0 && at('✔ works in a lane') < at('✔ waits beside'), out);
    assert.ok(at('✔ waits beside') < at('✖ fails beside'), out);
    // One set of closing counts, both lanes' together.
    assert.equal(out.match(/^ℹ tests \d+$/gm)?.length, 1, out);
    assert.match(out, /^ℹ tests 3$/m);
    assert.match(out, /^ℹ pass 2$/m);
    assert.match(out, /^ℹ fail 1$/m);
    assert.deepEqual(
      rows(out)
        .map((r) => r.file)
        .sort(),
      ['fails.test.mjs', 'waits.test.mjs', 'works.test.mjs'],
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
