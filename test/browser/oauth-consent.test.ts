// Authorization code + PKCE with the consent page clicked in a real browser
// (Debian's chromium via playwright-core) against the real cell process; the
// code is redeemed by oauth4webapi (validateAuthResponse checks state and iss).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import * as oauth from 'oauth4webapi';
import { startCellProcess } from '../helpers/cell-process.ts';

const CHROMIUM = '/usr/bin/chromium';
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const insecure = { [oauth.allowInsecureRequests]: true } as const;

test('authorization code + PKCE: login and consent clicked in chromium, code redeemed by oauth4webapi', {
  timeout: 120_000,
  skip: existsSync(CHROMIUM) ? false : `${CHROMIUM} is missing: install Debian's chromium`,
}, async () => {
  const cell = await startCellProcess({ args: ['--cell-id', 'cell-browser'] });
  const callbacks: string[] = [];
  const cb = createServer((req, res) => {
    callbacks.push(req.url ?? '');
    res.end('done');
  });
  await new Promise<void>((r) => cb.listen(0, '127.0.0.1', () => r()));
  const redirectUri = `http://127.0.0.1:${(cb.address() as AddressInfo).port}/cb`;
  const profile = mkdtempSync(join(tmpdir(), 'oauth-chromium-'));
  const admin = (method: string, path: string, body?: unknown) =>
    fetch(cell.url + path, {
      method,
      headers: { authorization: `Bearer ${cell.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    timeout: 30_000,
  });
  try {
    const user = await admin('POST', '/api/public/v1/admin/principals', {
      kind: 'user',
      name: 'carol',
      roles: ['viewer'],
      password: 'carol has a long password',
    });
    assert.equal(user.status, 201);
    const reg = await admin('POST', '/api/public/v1/admin/oauth/clients', {
      name: 'Browser test app',
      grant_types: ['authorization_code'],
      token_endpoint_auth_method: 'none',
      redirect_uris: [redirectUri],
      scope: ['oauth.clients.read', 'audit.read'],
    });
    assert.equal(reg.status, 201);
    // The console's own name is not for others to take.
    const clients = await admin('GET', '/api/public/v1/admin/oauth/clients?limit=100');
    const console_ = (clients.body.clients as { name: string; created_by: string }[]).find((c) => c.created_by === 'system');
    assert.ok(console_, 'the console registered its client');
    const impostor = await admin('POST', '/api/public/v1/admin/oauth/clients', {
      name: console_.name.toUpperCase(),
      grant_types: ['authorization_code'],
      token_endpoint_auth_method: 'none',
      redirect_uris: [redirectUri],
      scope: ['audit.read'],
    });
    assert.equal(impostor.status, 409);
    assert.equal(impostor.body.details.reason, 'builtin_client_name');
    const as = await oauth.processDiscoveryResponse(
      new URL('service://cell-browser'),
      await fetch(`${cell.url}/.well-known/oauth-authorization-server`),
    );
    const client: oauth.Client = { client_id: reg.body.client_id, token_endpoint_auth_method: 'none' };
    const verifier = oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const url = new URL(as.authorization_endpoint!);
    url.search = new URLSearchParams({
      response_type: 'code',
      client_id: client.client_id,
      redirect_uri: redirectUri,
      scope: 'audit.read',
      state,
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    }).toString();

    const page = context.pages()[0] ?? (await context.newPage());
    await page.goto(url.toString());
    await page.locator('#username').fill('carol');
    await page.locator('#password').fill('carol has a long password');
    await page.locator('#login').click();
    await page.locator('#approve').waitFor({ timeout: 30_000 });
    assert.equal(await page.locator('#client').textContent(), 'Browser test app');
    // Round 3, finding 11: who registered the client and where the answer goes, beside the free-text name.
    const registrant = await admin('GET', `/api/public/v1/admin/principals/${reg.body.created_by}`);
    assert.equal(registrant.status, 200);
    assert.equal(await page.locator('#registrant').textContent(), registrant.body.name);
    assert.equal(await page.locator('#redirect-host').textContent(), new URL(redirectUri).host);
    assert.deepEqual(await page.locator('ul.scopes li').allTextContents(), ['audit.read']);
    await Promise.all([page.waitForURL((u) => u.href.startsWith(redirectUri), { timeout: 30_000 }), page.locator('#approve').click()]);

    const back = new URL(page.url());
    assert.equal(back.searchParams.get('iss'), 'service://cell-browser');
    const params = oauth.validateAuthResponse(as, client, back, state);
    const tok = await oauth.processAuthorizationCodeResponse(
      as,
      client,
      await oauth.authorizationCodeGrantRequest(as, client, oauth.None(), params, redirectUri, verifier, insecure),
    );
    assert.equal(tok.scope, 'audit.read');
    const audit = await fetch(`${cell.url}/api/public/v1/admin/audit`, { headers: { authorization: `Bearer ${tok.access_token}` } });
    assert.equal(audit.status, 200);
    // the code is single use
    const again = await oauth.authorizationCodeGrantRequest(as, client, oauth.None(), params, redirectUri, verifier, insecure);
    assert.equal(again.status, 400);
    assert.equal(((await again.json()) as { error: string }).error, 'invalid_grant');
  } finally {
    await context.close();
    cb.close();
    rmSync(profile, { recursive: true, force: true });
    await cell.stop();
    cell.cleanup();
  }
});
