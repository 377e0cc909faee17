// An MCP server with its own authorization server (an independent one: oidc-provider, client credentials
// with RFC 8707 resource indicators, JWT access tokens): the catalog source carries the source's own
// client credentials, the client secret a stored secret. The server (the reference SDK's bearer
// middleware, a jose verifier on the authorization server's JWKS) sees the source's token for each call,
// never the requester's credential; the token is fetched once and kept; the journal names the client and
// the token's hash. A wrong secret is refused at registration; the secret is not deleted while the source
// sends it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { exportJWK, generateKeyPair } from 'jose';
import Provider from 'oidc-provider';
import { manualClock } from '../../../cell/context.ts';
import { inProcessCell } from '../../helpers/inproc.ts';
import { A, ok, provider, team, T, type Api } from '../../helpers/teams.ts';
import { startOpenAIServer, type ChatRequestBody } from '../../fixtures/openai-server.ts';
import { startMcpServer } from '../../fixtures/mcp-server.ts';

const S = `${A}/catalog/sources`;

/** oidc-provider on loopback: one confidential client for the client credentials grant, JWT access tokens per resource. */
async function authorizationServer(secret: string) {
  const tokenRequests: string[] = [];
  let handler: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  const http = createServer((req, res) => {
    if (req.method === 'POST' && req.url?.startsWith('/token')) tokenRequests.push(String(req.headers.authorization));
    handler!(req, res);
  });
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
  const issuer = `http://127.0.0.1:${(http.address() as { port: number }).port}`;
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = { ...(await exportJWK(privateKey)), kid: 'as-1', alg: 'RS256', use: 'sig' };
  const oidc = new Provider(issuer, {
    clients: [
      { client_id: 'crm-client', client_secret: secret, grant_types: ['client_credentials'], redirect_uris: [], response_types: [] },
    ],
    jwks: { keys: [jwk] },
    ttl: { ClientCredentials: 300 },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => undefined as unknown as string,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx: unknown, resource: string) => ({
          audience: resource,
          scope: 'crm.read',
          accessTokenTTL: 300,
          accessTokenFormat: 'jwt',
        }),
      },
    },
  });
  handler = oidc.callback();
  return {
    issuer,
    tokenRequests,
    close: () =>
      new Promise<void>((r) => {
        http.closeAllConnections();
        http.close(() => r());
      }),
  };
}

test("a server with its own authorization server gets the source's client-credentials token, never the requester's", {
  timeout: 180_000,
}, async () => {
  const as = await authorizationServer('s3cr3t-value');
  const mcp = await startMcpServer({ auth: { kind: 'oauth', issuer: as.issuer, jwksUri: `${as.issuer}/jwks` } });
  const t = await inProcessCell({ config: { egressAllowPrivate: ['127.0.0.1/32'] }, clock: manualClock(Date.now()) });
  const ai = await startOpenAIServer({ apiKey: 'sk-fake' });
  const api: Api = { request: t.request, token: t.adminKey };
  try {
    await provider(api, ai);
    const wrong = await ok(api, 'POST', `${A}/secrets`, { name: 'crm-wrong', value: 'not-it' });
    const auth = (secretId: string) => ({
      type: 'client_credentials',
      token_endpoint: `${as.issuer}/token`,
      client_id: 'crm-client',
      client_secret_id: secretId,
      scope: 'crm.read',
      resource: mcp.url,
    });
    const bad = await t.request('POST', S, { token: t.adminKey, body: { name: 'crm', url: mcp.url, auth: auth(wrong.secret_id) } });
    assert.equal(bad.status, 503, bad.text);
    assert.equal(bad.body.details.reason, 'source_token_failed');

    const secret = await ok(api, 'POST', `${A}/secrets`, { name: 'crm-client', value: 's3cr3t-value' });
    const src = await ok(api, 'POST', S, { name: 'crm', url: mcp.url, auth: auth(secret.secret_id) }, [201]);
    assert.deepEqual(src.auth, { ...auth(secret.secret_id) });
    assert.ok(!JSON.stringify(src).includes('s3cr3t-value'), 'the secret is shown by its id only');

    const cap = { allowed_tools: ['mcp.crm.lookup'], permission_mode: 'auto', egress_allowlist: [mcp.origin] };
    const tm = await team(api, 'sequential', [{ role: 'clerk', cap }]);
    ai.setResponder((req: ChatRequestBody) =>
      req.messages.at(-1)!.role === 'tool' ? { content: 'done' } : { tool_calls: [{ name: 'mcp__crm__lookup', arguments: { id: '9' } }] },
    );
    const runs: string[] = [];
    for (const input of ['first', 'second']) {
      const r = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input });
      await t.modules.teams.teams.settled(r.run_id);
      const v = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${r.run_id}`);
      assert.equal(v.state, 'completed', JSON.stringify(v.error));
      runs.push(r.run_id);
    }
    assert.equal(mcp.calls.length, 2);
    const me = (await ok(api, 'GET', `${A}/whoami`)).principal.id as string;
    for (const c of mcp.calls) {
      const cl = c.claims as Record<string, unknown>;
      assert.equal(cl['client_id'], 'crm-client', "the source's own client");
      assert.equal(cl['aud'], mcp.url, 'issued for this server (RFC 8707)');
      assert.equal(cl['iss'], as.issuer);
      assert.notEqual(cl['sub'], me, 'not the requester');
      assert.equal(cl['act'], undefined);
    }
    for (const r of mcp.requests) {
      assert.match(r.authorization ?? '', /^Bearer ey/);
      assert.ok(!(r.authorization ?? '').includes(t.adminKey), "never the requester's credential");
    }
    assert.equal(as.tokenRequests.length, 2, 'one refused request, then one token kept for the registration and both runs');
    assert.match(as.tokenRequests[1]!, /^Basic /);
    const token = mcp.requests.at(-1)!.authorization!.slice('Bearer '.length);
    const j = await ok(api, 'GET', `${A}/jobs/runs/${runs[1]}/journal`);
    assert.ok(!JSON.stringify(j).includes(token), 'no token in the journal');
    const step = j.records.find((x: { kind: string; data: { tool?: string } }) => x.kind === 'step' && x.data.tool === 'mcp.crm.lookup');
    assert.deepEqual(step.data.identity, {
      kind: 'client',
      client_id: 'crm-client',
      token_endpoint: `${as.issuer}/token`,
      token_sha256: createHash('sha256').update(token).digest('hex'),
    });

    // The secret is the source's: it is not deleted under it.
    const del = await t.request('DELETE', `${A}/secrets/${secret.secret_id}`, { token: t.adminKey });
    assert.equal(del.status, 409, del.text);
    assert.equal(del.body.details.reason, 'secret_in_use');
    assert.deepEqual(del.body.details.sources, [src.source_id]);
  } finally {
    await t.close();
    await ai.close();
    await mcp.close();
    await as.close();
  }
});
