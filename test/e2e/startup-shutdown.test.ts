/**
 * The cell's first and last lines (issue 25, part 2): a clean stop logs one
 * `cell stopped` line; a data directory that cannot be used (a file given as
 * --data, a directory the cell's user may not write) is one line on stderr
 * that says what to do, exit status 1, no stack trace.
 */
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { chmodSync, copyFileSync, linkSync, mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, describe, it } from 'node:test';
import { CELL_BIN, startCellProcess } from '../helpers/cell-process.ts';

const run = promisify(execFile);

/**
 * The node binary and dist/cell.mjs where another user can read them, in `dir` (which must be): a checkout may
 * live in a private folder (root's home, a `mktemp -d` folder), and the project's Node in `.node/` inside it, where
 * `nobody` can read neither. The binary is linked when it can be (same file system), else copied; the bundle
 * stands alone (nothing else of the checkout is needed).
 */
function runnableBy(dir: string): { node: string; bin: string } {
  const node = join(dir, 'node');
  try {
    linkSync(realpathSync(process.execPath), node);
  } catch {
    copyFileSync(process.execPath, node);
  }
  chmodSync(node, 0o755);
  const bin = join(dir, 'cell.mjs');
  copyFileSync(CELL_BIN, bin);
  chmodSync(bin, 0o644);
  return { node, bin };
}

async function serve(args: string[], asUser?: { name: string; dir: string }): Promise<{ code: number; err: string }> {
  const other = asUser ? runnableBy(asUser.dir) : null;
  const cmd = other ? 'runuser' : process.execPath;
  const argv = other
    ? ['-u', asUser!.name, '--', other.node, other.bin, 'serve', '--port', '0', ...args]
    : [CELL_BIN, 'serve', '--port', '0', ...args];
  try {
    // As another user, from a directory it may enter (the checkout's may be private).
    await run(cmd, argv, { timeout: 60_000, ...(asUser ? { cwd: asUser.dir } : {}) });
    return { code: 0, err: '' };
  } catch (e) {
    const x = e as { code: number; stderr: string };
    return { code: x.code, err: x.stderr };
  }
}

describe('start-up errors and the stop line', () => {
  const work = mkdtempSync(join(tmpdir(), 'cell-startup-'));
  after(() => rmSync(work, { recursive: true, force: true }));

  it('a clean stop (SIGTERM) logs one "cell stopped" line with the signal', async () => {
    const cell = await startCellProcess();
    await cell.stop();
    const line = cell
      .output()
      .split('\n')
      .find((l) => l.includes('"msg":"cell stopped"'));
    assert.ok(line, cell.output());
    const o = JSON.parse(line) as Record<string, unknown>;
    assert.equal(o['level'], 30);
    assert.equal(o['signal'], 'SIGTERM');
    assert.match(String(o['cell_id']), /^cell-/);
    cell.cleanup();
  });

  it('--data naming a file: says so and what to do', async () => {
    const file = join(work, 'a-file');
    writeFileSync(file, 'x');
    const r = await serve(['--data', file]);
    assert.equal(r.code, 1);
    assert.equal(r.err, `error: --data ${file} is a file, not a directory: give a directory (it is created when missing)\n`);
  });

  it('--data below a file (ENOTDIR): one line, no stack', async () => {
    const r = await serve(['--data', join(work, 'a-file', 'below')]);
    assert.equal(r.code, 1);
    assert.match(
      r.err,
      /^error: cannot use the data directory .*a-file\/below: .* is a file where a directory belongs; move it away or pick another --data\n$/,
    );
  });

  it('a data directory the user may not write (EACCES): names the user and the fix', { skip: process.platform !== 'linux' }, async () => {
    const locked = join(work, 'locked');
    mkdirSync(locked);
    chmodSync(locked, 0o500);
    chmodSync(work, 0o755);
    // root writes anywhere: run the cell as nobody then (runuser), else as ourselves.
    const asRoot = process.getuid?.() === 0;
    const r = await serve(['--data', join(locked, 'data')], asRoot ? { name: 'nobody', dir: work } : undefined);
    chmodSync(locked, 0o700);
    assert.equal(r.code, 1, r.err);
    assert.match(
      r.err,
      /^error: cannot use the data directory .*locked\/data: permission denied on .* \(EACCES\); make it writable by user \S+ \(chown or chmod\), or pick another with --data\n$/,
    );
  });
});
