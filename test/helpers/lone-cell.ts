/**
 * dist/cell.mjs on its own, for the tests that prove the bundle needs nothing beside it
 * (test/cell/console/bundle.test.ts, test/cell/discovery/bundle-assets.test.ts): the file is
 * copied into an empty temp directory with no node_modules anywhere above it and started there
 * (`serve --port 0`, embedded store, no NODE_PATH).
 */
import type { TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { CELL_BIN } from './cell-process.ts';

function hasNodeModulesAbove(dir: string): boolean {
  for (let d = dir; ; d = dirname(d)) {
    if (existsSync(join(d, 'node_modules'))) return true;
    if (dirname(d) === d) return false;
  }
}

export interface LoneCell {
  url: string;
  /** The temp directory holding cell.mjs and its data directory, `data`. */
  dir: string;
  /** SIGTERM, wait for the exit, remove the directory. */
  stop(): Promise<void>;
}

/**
 * Starts the lone copy (`args` after the data directory) and waits for its `listening on` line.
 * Null, with `t` skipped, when a node_modules above the temp directory makes the proof impossible.
 */
export async function startLoneCell(t: TestContext, prefix: string, args: string[] = []): Promise<LoneCell | null> {
  assert.ok(existsSync(CELL_BIN), `${CELL_BIN} is missing: run 'node scripts/build.mjs'`);
  const dir = mkdtempSync(join(tmpdir(), prefix));
  if (hasNodeModulesAbove(dir)) {
    t.skip(`a node_modules exists above ${dir}; cannot prove the bundle stands alone`);
    rmSync(dir, { recursive: true, force: true });
    return null;
  }
  copyFileSync(CELL_BIN, join(dir, 'cell.mjs'));
  const proc = spawn(process.execPath, ['cell.mjs', 'serve', '--port', '0', '--data', join(dir, 'data'), ...args], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NODE_PATH: '' },
  });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  proc.stderr.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const stop = async () => {
    if (proc.exitCode === null) proc.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no start in 20 s:\n${out}`)), 20_000);
      const check = () => {
        const m = /listening on (https?:\/\/[^\s"]+)/.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      };
      proc.stdout.on('data', check);
      proc.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`exited ${code}:\n${out}`));
      });
    });
    return { url, dir, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
