// The console works from dist/cell.mjs alone: the bundle is copied to an empty
// directory (no node_modules, no console/ sources anywhere above it), started
// there, and serves the console's pages and every file they link to, with the
// console's OAuth client registered for the address it listens on.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { CELL_BIN } from '../../helpers/cell-process.ts';
import { CONSOLE_CSP } from '../../../cell/console/page.ts';

function hasNodeModulesAbove(dir: string): boolean {
  for (let d = dir; ; d = dirname(d)) {
    if (existsSync(join(d, 'node_modules'))) return true;
    if (dirname(d) === d) return false;
  }
}

test('node dist/cell.mjs serves the console and its assets with nothing beside it', async (t) => {
  assert.ok(existsSync(CELL_BIN), `${CELL_BIN} is missing: run 'node scripts/build.mjs'`);
  const dir = mkdtempSync(join(tmpdir(), 'cell-console-bundle-'));
  if (hasNodeModulesAbove(dir)) {
    t.skip(`a node_modules exists above ${dir}; cannot prove the bundle stands alone`);
    rmSync(dir, { recursive: true, force: true });
    return;
  }
  copyFileSync(CELL_BIN, join(dir, 'cell.mjs'));
  const proc = spawn(process.execPath, ['cell.mjs', 'serve', '--port', '0', '--data', join(dir, 'data'), '--cell-id', 'cell-bundle'], {
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
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no start in 20 s:\n${out}`)), 20_000);
      const check = () => {
        const m = /listening on (http\S+)/.exec(out);
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
    const sizes: Record<string, number> = {};
    for (const page of ['/console', '/console/callback']) {
      const r = await fetch(url + page);
      assert.equal(r.status, 200, page);
      assert.equal(r.headers.get('content-security-policy'), CONSOLE_CSP);
      const html = await r.text();
      for (const u of [...html.matchAll(/(?:src|href)="(\/[^"]+)"/g)].map((m) => m[1]!)) {
        const a = await fetch(url + u);
        assert.equal(a.status, 200, u);
        sizes[u] = (await a.text()).length;
      }
    }
    assert.ok(sizes['/console/assets/console.js']! > 50_000, JSON.stringify(sizes));
    assert.ok(sizes['/console/assets/console.css']! > 1_000);
    assert.ok(sizes['/console/assets/callback.js']! > 100);
    const cfg = (await (await fetch(`${url}/console/config.json`)).json()) as { client_id: string; redirect_uri: string };
    assert.equal(cfg.client_id, 'console.cell-bundle');
    assert.equal(cfg.redirect_uri, `${url}/console/callback`, 'the redirect URI follows the address the cell listens on');
    const key = readFileSync(join(dir, 'data', 'bootstrap-admin.key'), 'utf8').trim();
    const clients = (await (
      await fetch(`${url}/api/public/v1/admin/oauth/clients`, { headers: { authorization: `Bearer ${key}` } })
    ).json()) as { clients: { client_id: string; redirect_uris: string[] }[] };
    assert.deepEqual(clients.clients.find((c) => c.client_id === 'console.cell-bundle')?.redirect_uris, [`${url}/console/callback`]);
  } finally {
    if (proc.exitCode === null) proc.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  }
});
