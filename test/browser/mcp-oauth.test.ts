// An MCP client no one here wrote, end to end against the real cell process: the reference SDK's
// client with its OAuth client provider discovers the authorization server from the 401 of /mcp
// (RFC 9728), names itself by a Client ID Metadata Document that the cell fetches over https through
// its egress floor (a second client registers itself, RFC 7591), goes through the authorization code
// flow with PKCE whose login and consent pages a real browser (Debian's chromium) clicks, then lists
// the tools and calls a crew whose approval step is answered through the client's elicitation
// handler; the receipt verifies offline with the cell's published keys and the run's journal.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type { OAuthClientInformationMixed, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { verifyReceipt } from '../../core/mcp-receipts/verify.ts';
import { startOpenAIServer } from '../fixtures/openai-server.ts';
import { startCellProcess } from '../helpers/cell-process.ts';
import { makeTestCerts } from '../helpers/certs.ts';
import { publishedKeys } from '../helpers/mcp-endpoint.ts';
import { A, ARGS, CHROMIUM, T, apiOf, fakeProvider, ok } from './helpers.ts';

/** The SDK's OAuth client provider, as an app implements it: storage in memory, the browser for the redirect. */
class BrowserProvider implements OAuthClientProvider {
  info: OAuthClientInformationMixed | undefined;
  saved: OAuthTokens | undefined;
  verifier = '';
  consentPage = '';
  clientMetadataUrl?: string;
  constructor(
    private readonly ctx: BrowserContext,
    private readonly callback: string,
    documentUrl: string | undefined,
    private readonly user: { name: string; password: string },
  ) {
    if (documentUrl !== undefined) this.clientMetadataUrl = documentUrl;
  }
  get redirectUrl() {
    return this.callback;
  }
  get clientMetadata() {
    return {
      client_name: this.clientMetadataUrl ? 'Document client' : 'Registered MCP client',
      redirect_uris: [this.callback],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(i: OAuthClientInformationMixed) {
    this.info = i;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(t: OAuthTokens) {
    this.saved = t;
  }
  saveCodeVerifier(v: string) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
  /** The user's browser: sign in (once per browser), read the consent page, approve; the callback server gets the code. */
  async redirectToAuthorization(url: URL) {
    const page = await this.ctx.newPage();
    await page.goto(url.href);
    await page.locator('#username, #approve').first().waitFor({ timeout: 30_000 });
    if (await page.locator('#username').count()) {
      await page.locator('#username').fill(this.user.name);
      await page.locator('#password').fill(this.user.password);
      await page.locator('#login').click();
    }
    await page.locator('#approve').waitFor({ timeout: 30_000 });
    this.consentPage = await page.content();
    await Promise.all([page.waitForURL((u) => u.href.startsWith(this.callback), { timeout: 30_000 }), page.locator('#approve').click()]);
    await page.close();
  }
}

test('the SDK client: discovery from a 401, a metadata document or registration, consent in chromium, a crew approved through elicitation, a receipt that verifies', {
  timeout: 240_000,
  skip: existsSync(CHROMIUM) ? false : `${CHROMIUM} is missing: install Debian's chromium`,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-oauth-'));
  const certs = makeTestCerts(dir);
  writeFileSync(join(dir, 'ca-only.pem'), certs.pem['ca.pem']);
  // The OAuth redirect comes back here: the code and the RFC 9207 iss.
  const callbacks: URL[] = [];
  const cb = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (u.pathname === '/cb') callbacks.push(u);
    res.end('you may close this page');
  });
  await new Promise<void>((r) => cb.listen(0, '127.0.0.1', () => r()));
  const callback = `http://127.0.0.1:${(cb.address() as AddressInfo).port}/cb`;
  // The client's metadata document, served over https (a certificate of the test CA the cell is told to trust).
  let docUrl = '';
  let docFetches = 0;
  const docs = createHttpsServer({ cert: certs.pem['server.pem'], key: certs.pem['server.key'] }, (req, res) => {
    docFetches++;
    if (req.url !== '/mcp-client.json') return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        client_id: docUrl,
        client_name: 'Document client',
        redirect_uris: [callback],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
      }),
    );
  });
  await new Promise<void>((r) => docs.listen(0, '127.0.0.1', () => r()));
  docUrl = `https://127.0.0.1:${(docs.address() as AddressInfo).port}/mcp-client.json`;
  const ai = await startOpenAIServer({ apiKey: 'sk-fake', respond: () => ({ content: 'the tides are tidal' }) });
  const cell = await startCellProcess({
    args: ['--cell-id', 'cell-mcp', '--egress-allow-private', '127.0.0.1/32', '--oauth-dynamic-registration'],
    env: { NODE_EXTRA_CA_CERTS: join(dir, 'ca-only.pem') },
  });
  const profile = mkdtempSync(join(tmpdir(), 'mcp-chromium-'));
  const ctx = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS, timeout: 30_000 });
  try {
    const api = apiOf(cell);
    // Dana may run crews whose seats hold no tool (her ceiling): the crew below, and what she consents to gives no more.
    await ok(api, 'POST', `${A}/principals`, {
      kind: 'user',
      name: 'dana',
      roles: ['operator'],
      password: 'dana has a long password',
      authority: { allowed_tools: [], permission_mode: 'auto', clearance_level: 0 },
    });
    await fakeProvider(api, ai.url, { max_retries: 0 });
    const f = await ok(api, 'POST', `${T}/formations`, {
      name: 'Tide reporter',
      purpose: 'Reports on the tides.',
      post: [{ kind: 'human_approval', config: { rule: 'quorum', quorum: 1, timeout_ms: 3_600_000, prompt: 'publish the report?' } }],
    });
    const b = await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
      role_label: 'reporter',
      required_skills: [],
      authority_cap: { allowed_tools: [], permission_mode: 'auto', clearance_level: 0 },
    });
    const a = await ok(api, 'POST', `${T}/agents`, {
      source: 'scratch',
      role_label: 'reporter',
      authority_template: { allowed_tools: [], permission_mode: 'auto' },
    });
    await ok(api, 'POST', `${T}/agents/${a.agent_id}/budget-ledger`, { budget_limit: 100_000 });
    const crew = await ok(api, 'POST', `${T}/crews`, {
      formation_id: f.formation_id,
      assignments: { [b.billet_id]: a.agent_id },
      name: 'Tides',
    });

    const mcpUrl = new URL(`${cell.url}/mcp`);
    const connect = async (provider: BrowserProvider, elicit: boolean) => {
      const client = new Client(
        { name: 'sdk-oauth-test', version: '1.0.0' },
        { capabilities: elicit ? { elicitation: { form: {} } } : {} },
      );
      if (elicit)
        client.setRequestHandler(ElicitRequestSchema, async () => ({
          action: 'accept',
          content: { decision: 'approve', comment: 'ok by dana' },
        }));
      const transport = new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider });
      // No token yet: the 401 sends the client through discovery, registration or its document, and the consent page.
      await assert.rejects(client.connect(transport), UnauthorizedError);
      const back = callbacks.at(-1)!;
      const meta = (await (await fetch(`${cell.url}/.well-known/oauth-authorization-server`)).json()) as { issuer: string };
      assert.equal(back.searchParams.get('iss'), meta.issuer, 'RFC 9207: the authorization response names its issuer');
      await transport.finishAuth(back.searchParams.get('code')!);
      // With the tokens saved, a fresh transport connects.
      await client.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider }));
      return client;
    };

    // 1. A client ID metadata document.
    const byDocument = new BrowserProvider(ctx, callback, docUrl, { name: 'dana', password: 'dana has a long password' });
    const c1 = await connect(byDocument, true);
    assert.equal(byDocument.info?.client_id, docUrl);
    // Resolved on every authorization page (before and after sign-in, the consent), fetched once: kept an hour.
    assert.equal(docFetches, 1, 'the cell fetched the document once and kept it');
    assert.match(byDocument.consentPage, /id="unverified"/);
    assert.match(byDocument.consentPage, new RegExp(`document at <b id="document-host">127.0.0.1:${(docs.address() as AddressInfo).port}`));
    const claims = JSON.parse(Buffer.from(byDocument.saved!.access_token.split('.')[1]!, 'base64url').toString());
    assert.equal(claims.aud, `${cell.url}/mcp`, 'the token is for /mcp');
    assert.equal(claims.client_id, docUrl);
    assert.ok(byDocument.saved!.refresh_token, 'a client that asked for refresh tokens got one');
    const tools = await c1.listTools();
    const tool = tools.tools.find((x) => x.name === `crew_${crew.crew_id}`);
    assert.ok(tool, tools.tools.map((x) => x.name).join());
    assert.match(tool.description!, /Reports on the tides/);
    const r = await c1.callTool({ name: tool.name, arguments: { input: 'report' } });
    const s = r.structuredContent as { run_id: string; state: string; output: unknown; receipt: unknown };
    assert.equal(s.state, 'completed', JSON.stringify(s));
    assert.equal(s.output, 'the tides are tidal');
    const journal = (await ok(api, 'GET', `${A}/jobs/runs/${s.run_id}/journal`)).records;
    assert.ok(
      journal.some((x: { kind: string; data?: { by?: string } }) => x.kind === 'approval_received'),
      'the approval was recorded',
    );
    const v = await verifyReceipt(s.receipt, await publishedKeys(fetch, cell.url), { output: s.output, journal });
    assert.equal(v.ok, true, JSON.stringify(v));
    const dana = (await ok(api, 'GET', `${A}/principals?limit=100`)).principals.find((p: { name: string }) => p.name === 'dana').id;
    const run = await ok(api, 'GET', `${T}/crews/${crew.crew_id}/runs/${s.run_id}`);
    assert.equal(run.requester, dana, 'the run ran as the consenting user');
    await c1.close();

    // 2. Dynamic registration (no document URL): the SDK registers, then the same flow.
    const registered = new BrowserProvider(ctx, callback, undefined, { name: 'dana', password: 'dana has a long password' });
    const c2 = await connect(registered, false);
    assert.match(registered.info!.client_id, /^dcl_/);
    assert.match(registered.consentPage, /registered itself/);
    assert.ok((await c2.listTools()).tools.some((x) => x.name === `crew_${crew.crew_id}`));
    await c2.close();
  } finally {
    await ctx.close();
    await cell.stop();
    cell.cleanup();
    await ai.close();
    cb.close();
    docs.close();
    rmSync(profile, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
  }
});
