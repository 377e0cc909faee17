// A node:test reporter that times each test file: `--test-reporter=./scripts/test-times.mjs` beside the usual one
// (the Makefile's test targets use both). At the end of the run it prints the slowest files, each with its share
// of the time all files took, so that where the suite's time goes is in every run's log. Each file runs in a
// process of its own; its time is that process's, from its start to its end (the runner's file-level test).
// TEST_TIMES_TOP: how many files to list (default 20); TEST_TIMES_FILE: also write every file's time there, as
// tab-separated `seconds<TAB>file` lines, slowest first (test/artifacts/ is ignored by git).
// After the table, each failed test's error, in brief (its first lines): a CI log that keeps only its tail still
// says why a test failed, not only which.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, relative } from 'node:path';

/** The runner's test for a whole file is named after the file's path as it was given on the command line. */
function isFileTest(d) {
  return d.nesting === 0 && typeof d.file === 'string' && (d.name === d.file || relative(process.cwd(), d.file) === d.name);
}

export default async function* testTimes(source) {
  const started = Date.now();
  const times = new Map();
  const failed = new Set();
  const errors = [];
  for await (const ev of source) {
    if (ev.type === 'test:fail' && !isFileTest(ev.data) && errors.length < 10) errors.push(brief(ev.data));
    if (ev.type !== 'test:complete' || !isFileTest(ev.data)) continue;
    const d = ev.data;
    times.set(d.name, (times.get(d.name) ?? 0) + (d.details?.duration_ms ?? 0) / 1000);
    if (d.details?.passed === false) failed.add(d.name);
  }
  if (times.size === 0) return;
  const rows = [...times].sort((a, b) => b[1] - a[1]);
  const sum = rows.reduce((a, [, s]) => a + s, 0);
  const wall = (Date.now() - started) / 1000;
  const top = Number(process.env.TEST_TIMES_TOP) > 0 ? Number(process.env.TEST_TIMES_TOP) : 20;
  let out = `\n# slowest test files (of ${rows.length}; their times add up to ${sum.toFixed(0)} s, in ${wall.toFixed(0)} s of wall time)\n`;
  let cumulative = 0;
  for (const [file, s] of rows.slice(0, top)) {
    cumulative += s;
    out += `# ${s.toFixed(1).padStart(7)} s ${((100 * s) / sum).toFixed(1).padStart(5)} % (${((100 * cumulative) / sum).toFixed(0).padStart(3)} % so far)  ${file}${failed.has(file) ? '  FAILED' : ''}\n`;
  }
  if (errors.length > 0) out += `\n# why the failed tests failed (first lines of each error)\n${errors.join('')}`;
  yield out;
  const file = process.env.TEST_TIMES_FILE;
  if (file) {
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, rows.map(([f, s]) => `${s.toFixed(2)}\t${f}`).join('\n') + '\n');
  }
}

/** A failed test's name, file and error, cut to its first lines, each line commented. */
function brief(d) {
  const err = d.details?.error;
  // node:test wraps what the test threw (its `cause`): that is the message worth reading.
  const cause = err?.cause ?? err;
  const text = String(cause?.stack ?? cause?.message ?? cause ?? 'no error given');
  const lines = text
    .split('\n')
    .slice(0, 12)
    .map((l) => `#   ${l.slice(0, 300)}`);
  return `# ${d.name}${d.file ? ` (${relative(process.cwd(), d.file)})` : ''}\n${lines.join('\n')}\n`;
}
