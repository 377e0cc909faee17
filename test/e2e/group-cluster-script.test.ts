// `make cluster` (scripts/cluster.sh), one cell on its own PostgreSQL server, its output a pipe: it names the
// 0600 file that holds the owner key and never prints the key (the rule `serve` follows,
// docs/operations.md "Start-up"); the key in that file is the one every cell accepts. Ctrl-C (SIGTERM) stops
// the cell and the server and deletes the temp dir.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../..');

test('make cluster with its output to a pipe names the owner key file and prints no key', { timeout: 120_000 }, async () => {
  assert.ok(existsSync(resolve(ROOT, 'dist/cell.mjs')), 'node scripts/build.mjs first');
  const proc = spawn(resolve(ROOT, 'scripts/cluster.sh'), ['1'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  proc.stderr.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  try {
    await new Promise<void>((res, rej) => {
      const check = () => {
        if (!out.includes('Ctrl-C stops all of them')) return;
        proc.stdout.off('data', check);
        res();
      };
      proc.stdout.on('data', check);
      void exited.then((code) => rej(new Error(`cluster.sh exited with ${code} before it was up:\n${out}`)));
    });
    assert.match(out, /cluster: cell-1 listening on http:\/\/127\.0\.0\.1:\d+ {3}\(log: /);
    const m = /owner key \(every cell accepts it\) in (\S+) \(mode 0600; not printed: stdout is not a terminal\)/.exec(out);
    assert.ok(m, out);
    const file = m[1]!;
    const key = readFileSync(file, 'utf8').trim();
    assert.match(key, /^svck_live_/);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.ok(!out.includes(key), 'the key is not on a pipe');
    assert.doesNotMatch(out, /svck_live_/);
    assert.match(out, /cell-1 http:\/\/\S+ accepts the owner key/);
  } finally {
    if (proc.exitCode === null) process.kill(-proc.pid!, 'SIGTERM');
    await exited;
  }
  assert.match(out, /cluster: stopped/);
});
