// The console's pages, assets and OAuth client, in process: strict headers on
// everything under /console, every linked file served by the cell, the
// built-in public client registered for the authorization code flow only, with
// the redirect URI under this cell's public URL, and refused for anything else.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { consoleClientId, registerConsoleClient } from '../../../cell/console/client.ts';
import { pickEncoding } from '../../../cell/console/module.ts';
import { CONSOLE_CSP } from '../../../cell/console/page.ts';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { form } from '../../helpers/oauth.ts';

let t: InProcess;
before(async () => {
  t = await inProcessCell({ config: { publicUrl: 'http://console.test:8080' } });
});
after(async () => {
  await t?.close();
});

const NO_INLINE = /<script>|<script [^>]*>[^<]+<\/script>|<style|\sstyle=|\son\w+=/i;

test('GET /console and /console/callback: strict CSP, no inline code, every linked file from the cell', { timeout: 60_000 }, async () => {
  for (const path of ['/console', '/console/', '/console/callback']) {
    const r = await t.request('GET', path);
    assert.equal(r.status, 200, path);
    assert.match(r.headers.get('content-type') ?? '', /^text\/html/);
    assert.equal(r.headers.get('content-security-policy'), CONSOLE_CSP);
    // Trusted Types for script sinks: no string becomes HTML or code (test/browser/console-standard.test.ts: the console works under it).
    assert.match(r.headers.get('content-security-policy') ?? '', /(^|; )require-trusted-types-for 'script'(;|$)/);
    assert.equal(r.headers.get('x-frame-options'), 'DENY');
    assert.equal(r.headers.get('referrer-policy'), 'no-referrer');
    assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
    assert.ok(!NO_INLINE.test(r.text), `${path}: no inline script, style or handler`);
    const linked = [...r.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!).filter((u) => !u.startsWith('data:'));
    assert.ok(linked.length >= 2, `${path}: ${linked.join(', ')}`);
    for (const u of linked) {
      assert.ok(u.startsWith('/console/assets/'), `${u} is the cell's own`);
      const a = await t.request('GET', u);
      assert.equal(a.status, 200, u);
      assert.equal(a.headers.get('content-security-policy'), CONSOLE_CSP);
      assert.match(a.headers.get('content-type') ?? '', u.endsWith('.css') ? /^text\/css/ : /^text\/javascript/);
      const again = await t.request('GET', u, { headers: { 'if-none-match': a.headers.get('etag')! } });
      assert.equal(again.status, 304, `${u}: revalidates with its ETag`);
    }
  }
  assert.equal(
    (await t.request('GET', '/console/callback')).headers.get('cache-control'),
    'no-store',
    'the return page carries a code: never cached',
  );
  const missing = await t.request('GET', '/console/assets/nope.js');
  assert.equal(missing.status, 404);
  assert.equal(missing.body.error, 'not_found');
  const traversal = await t.request('GET', '/console/assets/..%2Fpackage.json');
  assert.equal(traversal.status, 404);
});

test('config.json names the built-in client; the client is public, code flow only, redirect under /console', async () => {
  const cfg = await t.request('GET', '/console/config.json');
  assert.equal(cfg.status, 200);
  assert.deepEqual(cfg.body, {
    cell_id: 'cell-test',
    issuer: 'service://cell-test',
    public_url: 'http://console.test:8080',
    client_id: 'console.cell-test',
    redirect_uri: 'http://console.test:8080/console/callback',
    api_base: 'http://console.test:8080/api/public/v1',
  });
  assert.ok(!/secret/i.test(cfg.text));
  const list = await t.request('GET', '/api/public/v1/admin/oauth/clients', { token: t.adminKey });
  const c = list.body.clients.find((x: { client_id: string }) => x.client_id === 'console.cell-test');
  assert.ok(c, 'registered on start');
  assert.equal(c.token_endpoint_auth_method, 'none');
  assert.deepEqual(c.grant_types, ['authorization_code']);
  assert.deepEqual(c.redirect_uris, ['http://console.test:8080/console/callback']);
  assert.deepEqual(c.scope, ['*']);
  assert.equal(c.created_by, 'system');
  assert.equal(c.client_secret, undefined);
});

test('the console client: accepted for code + PKCE at its own redirect URI, refused otherwise', async () => {
  const q = (over: Record<string, string>) =>
    `/oauth/authorize?${new URLSearchParams({
      response_type: 'code',
      client_id: 'console.cell-test',
      redirect_uri: 'http://console.test:8080/console/callback',
      scope: '*',
      state: 's1',
      code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
      code_challenge_method: 'S256',
      ...over,
    })}`;
  const ok = await t.request('GET', q({}));
  assert.equal(ok.status, 303, 'a valid request goes on to the login page');
  assert.match(ok.headers.get('location') ?? '', /^\/oauth\/login\?return_to=/);
  const foreign = await t.request('GET', q({ redirect_uri: 'https://evil.example/console/callback' }));
  assert.equal(foreign.status, 400, 'a redirect URI outside the registration is refused on our own page, never followed');
  assert.equal(foreign.headers.get('location'), null);
  const noPkce = await t.request('GET', q({ code_challenge_method: 'plain' }));
  assert.equal(noPkce.status, 303);
  assert.match(noPkce.headers.get('location') ?? '', /^http:\/\/console\.test:8080\/console\/callback\?error=invalid_request/);
  const cc = await form(t, '/oauth/token', { grant_type: 'client_credentials', client_id: 'console.cell-test' });
  assert.equal(cc.status, 400);
  assert.equal(cc.body.error, 'unauthorized_client', 'a public client never gets a token for itself');
  const device = await form(t, '/oauth/device_authorization', { client_id: 'console.cell-test' });
  assert.equal(device.body.error, 'unauthorized_client');
});

test('the client follows the public URL and is written only when it changed', async () => {
  // Committed writes to the clients table, as the store reports them (either engine).
  let writes = 0;
  const unsubscribe = t.core.store.onChange((c) => {
    if (c.tables.has('oauth_clients')) writes++;
  });
  const oauth = t.modules.oauth.api;
  const saved = t.core.config.publicUrl;
  try {
    await registerConsoleClient(t.core, oauth);
    assert.equal(writes, 0, 'unchanged: no write');
    t.core.config.publicUrl = 'https://ops.example.org';
    await registerConsoleClient(t.core, oauth);
    assert.equal(writes, 1);
    const list = await t.request('GET', '/api/public/v1/admin/oauth/clients', { token: t.adminKey });
    const c = list.body.clients.filter((x: { client_id: string }) => x.client_id === consoleClientId(t.core));
    assert.equal(c.length, 1, 'updated in place');
    assert.deepEqual(c[0].redirect_uris, ['https://ops.example.org/console/callback']);
  } finally {
    unsubscribe();
    t.core.config.publicUrl = saved;
    await registerConsoleClient(t.core, oauth);
  }
});

test('assets go compressed when the browser accepts it: br first, then gzip; q=0 refuses', () => {
  assert.equal(pickEncoding('gzip, deflate, br, zstd'), 'br');
  assert.equal(pickEncoding('gzip'), 'gzip');
  assert.equal(pickEncoding('br;q=0, gzip;q=0.5'), 'gzip');
  assert.equal(pickEncoding('identity'), null);
  assert.equal(pickEncoding(undefined), null);
  assert.equal(pickEncoding('br;q=0,gzip;q=0'), null);
});
