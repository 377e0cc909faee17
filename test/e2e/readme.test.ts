/**
 * README.md's walk-through is a script: every `sh` block of its section "A
 * walk-through with curl", exactly as written, run by bash against the real
 * cell (dist/cell.mjs) the way a user runs it after `make run` (CELL_PORT and
 * CELL_DATA name the cell). It must exit 0 and print what the README says it
 * prints (the `# -> ` lines that follow a command), so the README cannot drift
 * from the product. Needs bash, curl and jq (`make test` installs them) and
 * `node scripts/build.mjs`.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { startCellProcess, type CellProcess } from '../helpers/cell-process.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const SECTION = '## A walk-through with curl';

/** The `sh` blocks of the walk-through section, in order. */
export function walkthrough(readme: string): string[] {
  const start = readme.indexOf(SECTION);
  assert.ok(start >= 0, `README.md has a section "${SECTION}"`);
  const next = readme.indexOf('\n## ', start + SECTION.length);
  const body = readme.slice(start, next < 0 ? undefined : next);
  return [...body.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

/** The answers the README promises: `# -> X` under a command, with `…` standing for anything. */
function promised(blocks: string[]): RegExp[] {
  const out: RegExp[] = [];
  for (const b of blocks) {
    for (const m of b.matchAll(/^# -> (.+)$/gm)) {
      const parts = m[1]!
        .trim()
        .split('…')
        .map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
      out.push(new RegExp(parts.join('.*')));
    }
  }
  return out;
}

let cell: CellProcess;
before(async () => {
  cell = await startCellProcess();
});
after(async () => {
  await cell.stop();
  cell.cleanup();
});

test('the README walk-through runs as written against a real cell and prints what it promises', { timeout: 60_000 }, async () => {
  const blocks = walkthrough(readFileSync(resolve(ROOT, 'README.md'), 'utf8'));
  assert.ok(blocks.length >= 2, 'the walk-through has its blocks');
  // Pasted into an interactive shell, `set -e` or `exit` would close it at the first failure (issue 25).
  for (const b of blocks) assert.doesNotMatch(b, /^\s*(set\s+-[a-z]*e|exit\b)/m, 'no set -e or exit in a pasted block');
  const expect = promised(blocks);
  assert.ok(expect.length >= 4, `the walk-through promises answers (${expect.length})`);
  const port = new URL(cell.url).port;
  const child = spawn('bash', ['-e', '-o', 'pipefail', '-c', blocks.join('\n')], {
    cwd: ROOT,
    env: { ...process.env, CELL_PORT: port, CELL_DATA: cell.dataDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 50_000);
  const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
  clearTimeout(timer);
  assert.equal(code, 0, `the walk-through failed (exit ${code})\n--- stdout\n${out}\n--- stderr\n${err}`);
  for (const re of expect) assert.match(out, re, `the walk-through printed ${re}\n--- stdout\n${out}`);
  assert.doesNotMatch(out + err, /svck_live_[A-Za-z0-9_-]{20}/, 'no secret is printed');
});
