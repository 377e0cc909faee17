/**
 * The cell's first and last lines (issue 25, part 2): a clean stop logs one
 * `cell stopped` line; a data directory that cannot be used (a file given as
 * --data, a directory the cell's user may not write) is one line on stderr
 * that says what to do, exit status 1, no stack trace.
 */
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, describe, it } from 'node:test';
import { CELL_BIN, startCellProcess } from '../helpers/cell-process.ts';

const run = promisify(execFile);

async function serve(args: string[], asUser?: string): Promise<{ code: number; err: string }> {
  const cmd = asUser ? 'runuser' : process.execPath;
  const argv = asUser
    ? ['-u', asUser, '--', process.execPath, CELL_BIN, 'serve', '--port', '0', ...args]
    : [CELL_BIN, 'serve', '--port', '0', ...args];
  try {
    await run(cmd, argv, { timeout: 60_000 });
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
    const r = await serve(['--data', join(locked, 'data')], asRoot ? 'nobody' : undefined);
    chmodSync(locked, 0o700);
    assert.equal(r.code, 1, r.err);
    assert.match(
      r.err,
      /^error: cannot use the data directory .*locked\/data: permission denied on .* \(EACCES\); make it writable by user \S+ \(chown or chmod\), or pick another with --data\n$/,
    );
  });
});
