// The console works from dist/cell.mjs alone: the bundle is copied to an empty
// directory (no node_modules, no console/ sources anywhere above it), started
// there, and serves the console's pages and every file they link to, with the
// console's OAuth client registered for the address it listens on.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startLoneCell } from '../../helpers/lone-cell.ts';
import { CONSOLE_CSP } from '../../../cell/console/page.ts';

test('node dist/cell.mjs serves the console and its assets with nothing beside it', async (t) => {
  const cell = await startLoneCell(t, 'cell-console-bundle-', ['--cell-id', 'cell-bundle']);
  if (!cell) return;
  const { url } = cell;
  try {
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
    const key = readFileSync(join(cell.dir, 'data', 'bootstrap-admin.key'), 'utf8').trim();
    const clients = (await (
      await fetch(`${url}/api/public/v1/admin/oauth/clients`, { headers: { authorization: `Bearer ${key}` } })
    ).json()) as { clients: { client_id: string; redirect_uris: string[] }[] };
    assert.deepEqual(clients.clients.find((c) => c.client_id === 'console.cell-bundle')?.redirect_uris, [`${url}/console/callback`]);
  } finally {
    await cell.stop();
  }
});
