// RFC 8693 token exchange at /oauth/token (cell/oauth/exchange.ts): an independent client
// (oauth4webapi's genericGrantRequest) exchanges a subject's token for a narrower one that names
// its actor; chains nest `act` and stop at the cell's limit; every link of a chain, revoked,
// deleted, archived or narrowed, refuses what derives from it on the bearer path and at
// introspection; every refusal of the grant answers its RFC 6749/8693 error.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import * as oauth from 'oauth4webapi';
import { manualClock } from '../../../cell/context.ts';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { ACCESS_TOKEN_TYPE, basic, claimsOf, form, o4wExchange, TOKEN_EXCHANGE } from '../../helpers/oauth.ts';

const A = '/api/public/v1/admin';
type Client = { client_id: string; client_secret: string };

interface World {
  t: InProcess;
  ids: Record<'u' | 'a' | 'b' | 'c' | 'd', string>;
  /** cu: U's client_credentials client; ca..cd: the actors' clients, allowed to exchange; plain: not allowed to. */
  clients: Record<'cu' | 'ca' | 'cb' | 'cc' | 'cd' | 'plain', Client>;
  api: string;
}

async function world(config: Record<string, unknown> = {}): Promise<World> {
  const t = await inProcessCell({ clock: manualClock(Date.now()), config });
  const post = async (path: string, body: unknown) => {
    const r = await t.request('POST', path, { token: t.adminKey, body });
    assert.ok(r.status === 200 || r.status === 201, `${path}: ${r.status} ${r.text}`);
    return r.body;
  };
  const ids = {} as World['ids'];
  ids.u = (await post(`${A}/principals`, { kind: 'service', name: 'person-u', roles: ['admin'] })).id;
  for (const n of ['a', 'b', 'c', 'd'] as const)
    ids[n] = (await post(`${A}/principals`, { kind: 'service', name: `agent-${n}`, roles: ['viewer'] })).id;
  const scope = ['edge.read', 'oauth.clients.read', 'audit.read'];
  const clients = {} as World['clients'];
  clients.cu = await post(`${A}/oauth/clients`, { name: 'cu', scope: [...scope, 'iam.keys.read'], subject_id: ids.u });
  for (const n of ['a', 'b', 'c', 'd'] as const) {
    clients[`c${n}`] = await post(`${A}/oauth/clients`, {
      name: `c${n}`,
      scope,
      subject_id: ids[n],
      grant_types: ['client_credentials', TOKEN_EXCHANGE],
    });
  }
  clients.plain = await post(`${A}/oauth/clients`, { name: 'plain', scope, subject_id: ids.a });
  return { t, ids, clients, api: `${t.modules.oauth.api.publicBase()}/api/public/v1` };
}

async function cc(w: World, client: Client, scope?: string, headers: Record<string, string> = {}): Promise<string> {
  const r = await form(
    w.t,
    '/oauth/token',
    { grant_type: 'client_credentials', ...(scope ? { scope } : {}) },
    { ...basic(client.client_id, client.client_secret), ...headers },
  );
  assert.equal(r.status, 200, r.text);
  return r.body.access_token;
}

/** A raw exchange (our own form post), for the refusals. */
function exchange(w: World, client: Client, fields: Record<string, string>, headers: Record<string, string> = {}) {
  return form(
    w.t,
    '/oauth/token',
    { grant_type: TOKEN_EXCHANGE, ...fields },
    { ...basic(client.client_id, client.client_secret), ...headers },
  );
}

async function hop(w: World, client: Client, subjectToken: string, extra: Record<string, string> = {}): Promise<string> {
  const r = await o4wExchange(w.t, client, {
    subject_token: subjectToken,
    subject_token_type: ACCESS_TOKEN_TYPE,
    audience: w.api,
    ...extra,
  });
  assert.ok(r.ok, JSON.stringify(r));
  return r.tokens.access_token;
}

/** What the bearer path answers for a token on an operation needing edge.read. */
async function use(w: World, token: string, path = `${A}/edge/devices`): Promise<string> {
  const r = await w.t.request('GET', path, { token });
  return r.status === 200 ? '200' : `${r.status} ${r.body?.details?.reason ?? r.body?.error}`;
}

async function introspect(w: World, token: string) {
  const r = await form(w.t, '/oauth/introspect', { token }, basic(w.clients.cu.client_id, w.clients.cu.client_secret));
  assert.equal(r.status, 200);
  return r.body;
}

test('oauth4webapi exchanges a token: sub = subject, act = actor, scope narrowed, exp bounded, visible in whoami, introspection, audit', async () => {
  const w = await world();
  const { t, ids, clients } = w;
  try {
    const st = await cc(w, clients.cu, 'edge.read audit.read iam.keys.read');
    t.clock.advance(100_000);
    const r = await o4wExchange(t, clients.ca, {
      subject_token: st,
      subject_token_type: ACCESS_TOKEN_TYPE,
      resource: w.api,
      scope: 'edge.read audit.read iam.keys.read',
    });
    assert.ok(r.ok, JSON.stringify(r));
    assert.equal(r.tokens.token_type, 'bearer');
    assert.equal(r.tokens['issued_token_type'], ACCESS_TOKEN_TYPE);
    // requested ∩ the subject token ∩ the actor (viewer) ∩ the actor's client: iam.keys.read is not the client's.
    assert.equal(r.tokens.scope, 'audit.read edge.read');
    const c = claimsOf(r.tokens.access_token);
    const s = claimsOf(st);
    assert.equal(c.sub, ids.u);
    assert.deepEqual(c.act, { sub: ids.a });
    assert.equal(c.aud, w.api);
    assert.equal(c.client_id, clients.ca.client_id);
    assert.equal(c.exp, s.exp, 'never past the subject token');
    assert.ok(c.links.includes(`token:${s.jti}`) && c.links.includes(`client:${clients.cu.client_id}`));

    assert.equal(await use(w, r.tokens.access_token), '200');
    assert.equal(await use(w, r.tokens.access_token, `${A}/api-keys`), '403 forbidden');
    const who = await t.request('GET', `${A}/whoami`, { token: r.tokens.access_token });
    assert.equal(who.status, 200, who.text);
    assert.equal(who.body.principal.id, ids.u);
    assert.deepEqual(who.body.credential.actors, [ids.a]);
    const i = await introspect(w, r.tokens.access_token);
    assert.equal(i.active, true);
    assert.deepEqual(i.act, { sub: ids.a });

    const audit = await t.rows("SELECT actor, details FROM audit WHERE action = 'oauth.token.exchange' AND outcome = 'ok'");
    assert.equal(audit.length, 1);
    assert.equal(audit[0]!['actor'], ids.a);
    const d = JSON.parse(String(audit[0]!['details']));
    assert.equal(d.subject, ids.u);
    assert.deepEqual(d.actors, [ids.a]);
    assert.ok(!JSON.stringify(audit).includes(r.tokens.access_token));

    const md = await t.request('GET', '/.well-known/oauth-authorization-server');
    assert.ok(md.body.grant_types_supported.includes(TOKEN_EXCHANGE));
  } finally {
    await t.close();
  }
});

test('chains nest act, narrow at each hop, and stop at the limit (default 3; --max-delegation-depth)', async () => {
  const w = await world();
  const { t, ids, clients } = w;
  try {
    const st = await cc(w, clients.cu);
    const t1 = await hop(w, clients.ca, st);
    const t2 = await hop(w, clients.cb, t1, { scope: 'edge.read audit.read' });
    const t3 = await hop(w, clients.cc, t2, { scope: 'edge.read' });
    assert.deepEqual(claimsOf(t3).act, { sub: ids.c, act: { sub: ids.b, act: { sub: ids.a } } });
    assert.equal(claimsOf(t3).scope, 'edge.read');
    assert.equal(await use(w, t3), '200');
    const who = await t.request('GET', `${A}/whoami`, { token: t3 });
    assert.deepEqual(who.body.credential.actors, [ids.c, ids.b, ids.a]);
    // A fourth hop is refused, and the refusal is on the audit trail.
    const r4 = await exchange(w, clients.cd, { subject_token: t3, subject_token_type: ACCESS_TOKEN_TYPE, audience: w.api });
    assert.equal(r4.status, 400);
    assert.equal(r4.body.error, 'invalid_grant');
    const refused = await t.rows("SELECT details FROM audit WHERE action = 'oauth.token.exchange' AND outcome = 'refused'");
    assert.equal(JSON.parse(String(refused[0]!['details'])).reason, 'delegation_too_deep');
    // A wider request at a later hop gets nothing more than the hop before it had.
    const wide = await exchange(w, clients.cd, {
      subject_token: t2,
      subject_token_type: ACCESS_TOKEN_TYPE,
      audience: w.api,
      scope: 'oauth.clients.read',
    });
    assert.equal(wide.body.error, 'invalid_scope');
  } finally {
    await t.close();
  }
  const short = await world({ maxDelegationDepth: 1 });
  try {
    const t1 = await hop(short, short.clients.ca, await cc(short, short.clients.cu));
    const r = await exchange(short, short.clients.cb, { subject_token: t1, subject_token_type: ACCESS_TOKEN_TYPE, audience: short.api });
    assert.equal(r.body.error, 'invalid_grant');
  } finally {
    await short.t.close();
  }
});

test('revoking, deleting, archiving or narrowing any link refuses every token derived from it, on the bearer path and at introspection', async () => {
  const w = await world();
  const { t, ids, clients } = w;
  const revoke = async (token: string, client: Client) =>
    assert.equal((await form(t, '/oauth/revoke', { token }, basic(client.client_id, client.client_secret))).status, 200);
  const refusedEverywhere = async (token: string, why: string) => {
    assert.equal(await use(w, token), '401 revoked', why);
    assert.deepEqual(await introspect(w, token), { active: false }, why);
  };
  try {
    // 1. the subject token revoked: its exchange and the exchange of that are refused.
    let st = await cc(w, clients.cu);
    let t1 = await hop(w, clients.ca, st);
    let t2 = await hop(w, clients.cb, t1);
    await revoke(st, clients.cu);
    await refusedEverywhere(t1, 'subject token revoked: hop 1');
    await refusedEverywhere(t2, 'subject token revoked: hop 2');
    // 2. the middle link revoked: what derives from it stops, what it derives from does not.
    st = await cc(w, clients.cu);
    t1 = await hop(w, clients.ca, st);
    t2 = await hop(w, clients.cb, t1);
    await revoke(t1, clients.ca);
    await refusedEverywhere(t2, 'hop 1 revoked: hop 2');
    assert.equal(await use(w, st), '200');
    // 3. an actor archived.
    t1 = await hop(w, clients.ca, st);
    t2 = await hop(w, clients.cb, t1);
    const arch = await t.request('POST', `${A}/principals/${ids.a}/archive`, { token: t.adminKey });
    assert.equal(arch.status, 200, arch.text);
    await refusedEverywhere(t2, 'actor of hop 1 archived');
    await t.request('POST', `${A}/principals/${ids.a}/restore`, { token: t.adminKey });
    // 4. the client of the subject token deleted.
    const cx = (
      await t.request('POST', `${A}/oauth/clients`, { token: t.adminKey, body: { name: 'cx', scope: ['edge.read'], subject_id: ids.u } })
    ).body;
    const sx = await cc(w, cx);
    const tx = await hop(w, clients.cb, sx);
    assert.equal((await t.request('DELETE', `${A}/oauth/clients/${cx.client_id}`, { token: t.adminKey })).status, 200);
    await refusedEverywhere(tx, 'client of the subject token deleted');
    // 5. the API key the subject token was obtained with revoked.
    const key = (
      await t.request('POST', `${A}/api-keys`, { token: t.adminKey, body: { name: 'k', owner_id: ids.u, scopes: ['edge.read'] } })
    ).body;
    const sk = await cc(w, { client_id: key.key_id, client_secret: key.secret });
    const tk = await hop(w, clients.cc, sk);
    assert.equal(await use(w, tk), '200');
    assert.equal((await t.request('POST', `${A}/api-keys/${key.key_id}/revoke`, { token: t.adminKey })).status, 200);
    await refusedEverywhere(tk, 'root key revoked');
    // 6. an actor narrowed: its role no longer grants edge.read, so the chain no longer does either.
    st = await cc(w, clients.cu);
    t1 = await hop(w, clients.cd, st);
    t2 = await hop(w, clients.cb, t1);
    assert.equal(await use(w, t2), '200');
    const role = await t.request('POST', `${A}/roles`, { token: t.adminKey, body: { name: 'auditor', permissions: ['audit.read'] } });
    assert.equal(role.status, 201, role.text);
    const nar = await t.request('PATCH', `${A}/principals/${ids.d}`, { token: t.adminKey, body: { roles: ['auditor'] } });
    assert.equal(nar.status, 200, nar.text);
    assert.equal(await use(w, t2), '403 forbidden', 'an actor narrowed narrows the chain');
    assert.equal(await use(w, st), '200');
    // 7. expiry: nothing outlives the token it was made from.
    t.clock.advance(601_000);
    assert.equal(await use(w, t2), '401 expired');
  } finally {
    await t.close();
  }
});

test('refusals of the grant, each with its RFC 6749 / 8693 error', async () => {
  const w = await world();
  const { t, ids, clients } = w;
  try {
    const st = await cc(w, clients.cu);
    const base = { subject_token: st, subject_token_type: ACCESS_TOKEN_TYPE, audience: w.api };
    const cases: [string, Client, Record<string, string>, number, string][] = [
      ['no subject_token', clients.ca, { subject_token_type: ACCESS_TOKEN_TYPE, audience: w.api }, 400, 'invalid_request'],
      [
        'unknown subject_token_type',
        clients.ca,
        { ...base, subject_token_type: 'urn:ietf:params:oauth:token-type:saml2' },
        400,
        'invalid_request',
      ],
      ['no resource nor audience', clients.ca, { subject_token: st, subject_token_type: ACCESS_TOKEN_TYPE }, 400, 'invalid_request'],
      ['audience of nobody', clients.ca, { ...base, audience: 'https://elsewhere.example/api' }, 400, 'invalid_target'],
      ['resource and audience both', clients.ca, { ...base, resource: w.api }, 400, 'invalid_target'],
      ['actor_token without its type', clients.ca, { ...base, actor_token: st }, 400, 'invalid_request'],
      [
        'requested_token_type refresh_token',
        clients.ca,
        { ...base, requested_token_type: 'urn:ietf:params:oauth:token-type:refresh_token' },
        400,
        'invalid_request',
      ],
      ['subject_token not a token', clients.ca, { ...base, subject_token: 'abc.def.ghi' }, 400, 'invalid_grant'],
      ['scope none of it held', clients.ca, { ...base, scope: 'iam.principals.write' }, 400, 'invalid_scope'],
      ['a client not registered for the grant', clients.plain, base, 400, 'unauthorized_client'],
      ['a wrong client secret', { ...clients.ca, client_secret: 'ocs_wrong' }, base, 401, 'invalid_client'],
    ];
    const wrong: string[] = [];
    for (const [name, client, fields, status, error] of cases) {
      const r = await exchange(w, client, fields);
      if (r.status !== status || r.body?.error !== error) wrong.push(`${name}: ${r.status} ${r.text}`);
    }
    assert.deepEqual(wrong, []);

    // A revoked subject token.
    const gone = await cc(w, clients.cu);
    await form(t, '/oauth/revoke', { token: gone }, basic(clients.cu.client_id, clients.cu.client_secret));
    assert.equal((await exchange(w, clients.ca, { ...base, subject_token: gone })).body.error, 'invalid_grant');

    // may_act (§4.4): a SAT that lets only B act for U.
    const uKey = (await t.request('POST', `${A}/api-keys`, { token: t.adminKey, body: { name: 'u', owner_id: ids.u } })).body;
    const sat = await t.request('POST', `${A}/sats`, { token: uKey.secret, body: { scope: ['edge.read'], may_act: ids.b } });
    assert.equal(sat.status, 201, sat.text);
    assert.deepEqual(claimsOf(sat.body.access_token).may_act, { sub: ids.b });
    const byA = await exchange(w, clients.ca, { ...base, subject_token: sat.body.access_token });
    assert.equal(byA.body.error, 'invalid_grant');
    const refused = await t.rows("SELECT details FROM audit WHERE action = 'oauth.token.exchange' AND outcome = 'refused'");
    assert.equal(JSON.parse(String(refused[0]!['details'])).reason, 'may_act');
    const byB = await exchange(w, clients.cb, { ...base, subject_token: sat.body.access_token });
    assert.equal(byB.status, 200, byB.text);
    // The SAT's key root is a link of the exchanged token.
    assert.ok(claimsOf(byB.body.access_token).links.includes(`api_key:${uKey.key_id}`));

    // A delegated token mints no SAT (it would shed its actors), even one that holds iam.sats.write.
    const t1 = await hop(w, clients.ca, st);
    const mk = async (body: Record<string, unknown>) => (await t.request('POST', `${A}/oauth/clients`, { token: t.adminKey, body })).body;
    const e = (
      await t.request('POST', `${A}/principals`, { token: t.adminKey, body: { kind: 'service', name: 'agent-e', roles: ['admin'] } })
    ).body;
    const cu2 = await mk({ name: 'cu2', scope: ['iam.sats.write', 'edge.read'], subject_id: ids.u });
    const ce = await mk({ name: 'ce', scope: ['iam.sats.write', 'edge.read'], subject_id: e.id, grant_types: [TOKEN_EXCHANGE] });
    const satter = await hop(w, ce, await cc(w, cu2));
    assert.equal(claimsOf(satter).scope, 'edge.read iam.sats.write');
    const satOfDelegated = await t.request('POST', `${A}/sats`, { token: satter, body: { scope: ['edge.read'] } });
    assert.equal(satOfDelegated.status, 403);
    assert.equal(satOfDelegated.body.details.reason, 'delegated_credential');

    // An actor token that is itself delegated is refused; a plain one names the actor.
    const aTok = await cc(w, clients.ca);
    assert.equal(
      (await exchange(w, clients.cd, { ...base, actor_token: t1, actor_token_type: ACCESS_TOKEN_TYPE })).body.error,
      'invalid_grant',
    );
    const withActor = await exchange(w, clients.cd, { ...base, actor_token: aTok, actor_token_type: ACCESS_TOKEN_TYPE });
    assert.equal(withActor.status, 200, withActor.text);
    assert.deepEqual(claimsOf(withActor.body.access_token).act, { sub: ids.a });
    assert.ok(claimsOf(withActor.body.access_token).links.includes(`token:${claimsOf(aTok).jti}`));
  } finally {
    await t.close();
  }
});

test('a DPoP-bound subject token is exchanged only with a proof of its key; the result is bound to it', async () => {
  const w = await world();
  const { t, clients } = w;
  try {
    const keyPair = await oauth.generateKeyPair('Ed25519');
    const DPoP = oauth.DPoP({}, keyPair);
    const base = t.modules.oauth.api.publicBase();
    const env = {
      [oauth.customFetch]: async (url: string, init: RequestInit) =>
        t.app.request(url, init, { incoming: { socket: { remoteAddress: '127.0.0.1' } } } as never),
      [oauth.allowInsecureRequests]: true,
    };
    const as = { issuer: `service://${t.core.config.groupId}`, token_endpoint: `${base}/oauth/token` };
    const bound = await oauth.processClientCredentialsResponse(
      as,
      { client_id: clients.cu.client_id },
      await oauth.clientCredentialsGrantRequest(
        as,
        { client_id: clients.cu.client_id },
        oauth.ClientSecretBasic(clients.cu.client_secret),
        {},
        { ...env, DPoP },
      ),
    );
    assert.equal(bound.token_type, 'dpop');
    const fields = { subject_token: bound.access_token, subject_token_type: ACCESS_TOKEN_TYPE, audience: w.api };
    const noProof = await exchange(w, clients.ca, fields);
    assert.equal(noProof.status, 400);
    assert.equal(noProof.body.error, 'invalid_grant');
    const other = oauth.DPoP({}, await oauth.generateKeyPair('Ed25519'));
    const wrongKey = await o4wExchange(t, clients.ca, fields, { DPoP: other });
    assert.ok(!wrongKey.ok && wrongKey.error === 'invalid_grant');
    const ok = await o4wExchange(t, clients.ca, fields, { DPoP: oauth.DPoP({}, keyPair) });
    assert.ok(ok.ok, JSON.stringify(ok));
    assert.equal(ok.tokens.token_type, 'dpop');
    assert.equal(claimsOf(ok.tokens.access_token).cnf.jkt, claimsOf(bound.access_token).cnf.jkt);
    // Presented as a plain bearer token it is refused.
    assert.equal(await use(w, ok.tokens.access_token), '401 dpop_required');
  } finally {
    await t.close();
  }
});

test('a registered protected resource gets exchanged tokens it verifies offline against /oauth/jwks.json: who asked, which agent acted', async () => {
  // The loopback service: verifies each presented token with oauth4webapi against the cell's published keys
  // (fetched from /oauth/jwks.json), its own audience, the issuer and exp; answers who asked and who acted.
  let t: InProcess | undefined;
  const service = createServer(async (req, res) => {
    try {
      const base = t!.modules.oauth.api.publicBase();
      const as = { issuer: `service://${t!.core.config.groupId}`, jwks_uri: `${base}/oauth/jwks.json` };
      const claims = await oauth.validateJwtAccessToken(
        as,
        new Request(`${resource}${req.url}`, { headers: { authorization: req.headers.authorization ?? '' } }),
        resource,
        {
          [oauth.allowInsecureRequests]: true,
          [oauth.customFetch]: async (url: string, init: { headers: Record<string, string> }) =>
            t!.app.request(url, { headers: init.headers }, { incoming: { socket: { remoteAddress: '127.0.0.1' } } } as never),
        },
      );
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ sub: claims.sub, act: claims['act'], scope: claims['scope'] }));
    } catch (e) {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: (e as { code?: string }).code ?? 'invalid_token' }));
    }
  });
  await new Promise<void>((r) => service.listen(0, '127.0.0.1', r));
  const resource = `http://127.0.0.1:${(service.address() as { port: number }).port}/api`;
  const w = await world({ protectedResources: [resource] });
  t = w.t;
  try {
    const st = await cc(w, w.clients.cu);
    const r = await o4wExchange(w.t, w.clients.ca, {
      subject_token: st,
      subject_token_type: ACCESS_TOKEN_TYPE,
      resource,
      scope: 'edge.read',
    });
    assert.ok(r.ok, JSON.stringify(r));
    assert.equal(claimsOf(r.tokens.access_token).aud, resource);
    const call = (token: string) => fetch(`${resource}/orders`, { headers: { authorization: `Bearer ${token}` } });
    const ok = await call(r.tokens.access_token);
    assert.equal(ok.status, 200);
    assert.deepEqual(await ok.json(), { sub: w.ids.u, act: { sub: w.ids.a }, scope: 'edge.read' });
    // The cell's own token, and a token for another resource, are refused by the service.
    assert.equal((await call(st)).status, 401);
    // The cell refuses a token for the service on its own API, and introspection still judges it.
    assert.equal(await use(w, r.tokens.access_token), '401 bad_audience');
    assert.deepEqual((await introspect(w, r.tokens.access_token)).act, { sub: w.ids.a });
    await form(w.t, '/oauth/revoke', { token: st }, basic(w.clients.cu.client_id, w.clients.cu.client_secret));
    assert.deepEqual(await introspect(w, r.tokens.access_token), { active: false });
    // An unregistered service is no audience.
    const other = await exchange(w, w.clients.ca, {
      subject_token: await cc(w, w.clients.cu),
      subject_token_type: ACCESS_TOKEN_TYPE,
      resource: 'http://127.0.0.1:1/api',
    });
    assert.equal(other.body.error, 'invalid_target');
  } finally {
    await w.t.close();
    service.close();
  }
});
