// The docs page works from dist/cell.mjs alone: the bundle is copied to an
// empty directory (no node_modules anywhere above it), started there, and
// serves the page, every asset it links to, and the document.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startLoneCell } from '../../helpers/lone-cell.ts';
import { DOCS_CSP } from '../../../cell/discovery/docs-page.ts';

test('node dist/cell.mjs serves the docs page and its assets with no node_modules beside it', async (t) => {
  const cell = await startLoneCell(t, 'cell-bundle-');
  if (!cell) return;
  const { url } = cell;
  try {
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
    await cell.stop();
  }
});
