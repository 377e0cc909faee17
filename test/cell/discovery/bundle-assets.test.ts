// The docs page works from dist/cell.mjs alone: the bundle is copied to an
// empty directory (no node_modules anywhere above it), started there, and
// serves the page, every asset it links to, and the document.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { CELL_BIN } from '../../helpers/cell-process.ts';
import { DOCS_CSP } from '../../../cell/discovery/docs-page.ts';

function hasNodeModulesAbove(dir: string): boolean {
  for (let d = dir; ; d = dirname(d)) {
    if (existsSync(join(d, 'node_modules'))) return true;
    if (dirname(d) === d) return false;
  }
}

test('node dist/cell.mjs serves the docs page and its assets with no node_modules beside it', async (t) => {
  assert.ok(existsSync(CELL_BIN), `${CELL_BIN} is missing: run 'node scripts/build.mjs'`);
  const dir = mkdtempSync(join(tmpdir(), 'cell-bundle-'));
  if (hasNodeModulesAbove(dir)) {
    t.skip(`a node_modules exists above ${dir}; cannot prove the bundle stands alone`);
    rmSync(dir, { recursive: true, force: true });
    return;
  }
  copyFileSync(CELL_BIN, join(dir, 'cell.mjs'));
  const proc = spawn(process.execPath, ['cell.mjs', 'serve', '--port', '0', '--data', join(dir, 'data')], {
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
    const page = await fetch(`${url}/api/public/v1/docs`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
    assert.equal(page.headers.get('content-security-policy'), DOCS_CSP);
    const html = await page.text();
    assert.ok(!/<script>|<script [^>]*>[^<]+<\/script>|<style|\sstyle=|\son\w+=/i.test(html), 'no inline script or style');
    const linked = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!).filter((u) => !u.startsWith('data:'));
    assert.equal(linked.length, 3, `stylesheet, bundle, init script: ${linked.join(', ')}`);
    for (const u of linked) {
      assert.ok(u.startsWith('/'), `${u} is served by the cell itself`);
      const r = await fetch(url + u);
      assert.equal(r.status, 200, u);
      const body = await r.text();
      assert.ok(body.length > (u.endsWith('docs-init.js') ? 100 : 100_000), `${u}: ${body.length} bytes`);
      assert.match(r.headers.get('content-type') ?? '', u.endsWith('.css') ? /^text\/css/ : /^text\/javascript/);
      assert.ok(!/sourceMappingURL/.test(body.slice(-300)), `${u}: no reference to an unserved source map`);
      assert.ok(r.headers.get('etag'));
      const again = await fetch(url + u, { headers: { 'if-none-match': r.headers.get('etag')! } });
      assert.equal(again.status, 304, `${u} revalidates`);
    }
    const missing = await fetch(`${url}/api/public/v1/docs/assets/swagger-ui.js.map`);
    assert.equal(missing.status, 404);
    const doc = await fetch(`${url}/api/public/v1/openapi.json`);
    assert.equal(doc.status, 200);
    assert.equal(((await doc.json()) as { openapi: string }).openapi, '3.1.0');
  } finally {
    if (proc.exitCode === null) proc.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  }
});
