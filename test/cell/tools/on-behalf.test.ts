// Agents act on behalf of the run's requester (cell/oauth/tool-delegation.ts): an agent's http.get to a
// loopback service the operator allow-listed and registered as a protected resource carries a token with
// sub = the requester, act = the agent (the run and crew as context), aud = that resource, scope = the
// tool grant, a short lifetime, DPoP-bound to a key of the cell. The service verifies all of it offline
// against /oauth/jwks.json (jose, nothing of the cell's code); the journal keeps the token's jti and
// hash, never the token. A URL that is no protected resource gets no token; an inactive requester none at
// all (requester_inactive); a run a job definition scheduled (team or agent) acts for the definition's author.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { calculateJwkThumbprint, createLocalJWKSet, EmbeddedJWK, jwtVerify } from 'jose';
import { createHash } from 'node:crypto';
import { A, T, ok, team, crewFixture } from '../../helpers/teams.ts';
import type { InProcess } from '../../helpers/inproc.ts';

test("an agent's HTTP call to a protected resource carries a token for the requester that the service verifies offline", {
  timeout: 300_000,
}, async () => {
  let t: InProcess | undefined;
  const seen: { path: string; auth?: string; verdict: Record<string, unknown> }[] = [];
  const service = createServer(async (req, res) => {
    const auth = req.headers.authorization;
    let verdict: Record<string, unknown> = { token: 'none' };
    if (auth) {
      try {
        const jwks = createLocalJWKSet((await (await t!.app.request('/oauth/jwks.json')).json()) as { keys: [] });
        const token = auth.replace(/^DPoP /, '');
        const { payload } = await jwtVerify(token, jwks, {
          typ: 'at+jwt',
          algorithms: ['EdDSA'],
          issuer: `service://${t!.core.config.groupId}`,
          audience: resource,
          currentDate: new Date(t!.clock.now()),
        });
        const proof = await jwtVerify(String(req.headers.dpop), EmbeddedJWK, { typ: 'dpop+jwt', currentDate: new Date(t!.clock.now()) });
        const ath = createHash('sha256').update(token).digest('base64url');
        const bound =
          proof.payload['htm'] === 'GET' &&
          proof.payload['htu'] === `${resource}${req.url!.slice('/api'.length)}` &&
          proof.payload['ath'] === ath &&
          (await calculateJwkThumbprint(proof.protectedHeader.jwk!)) === (payload['cnf'] as { jkt: string }).jkt;
        verdict = { ok: bound, ...payload };
      } catch (e) {
        verdict = { ok: false, error: String(e) };
      }
    }
    seen.push({ path: req.url ?? '', ...(auth ? { auth } : {}), verdict });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"orders":[]}');
  });
  await new Promise<void>((r) => service.listen(0, '127.0.0.1', r));
  const origin = `http://127.0.0.1:${(service.address() as { port: number }).port}`;
  const resource = `${origin}/api`;
  const f = await crewFixture({ egressAllowPrivate: ['127.0.0.1/32'], protectedResources: [resource] });
  t = f.t;
  const { ai, api } = f;
  try {
    let url = `${resource}/orders`;
    ai.setResponder((req) =>
      req.messages.at(-1)!.role === 'tool' ? { content: 'done' } : { tool_calls: [{ name: 'http__get', arguments: { url } }] },
    );
    const cap = { allowed_tools: ['http.get'], permission_mode: 'auto', egress_allowlist: [origin] };
    const tm = await team(api, 'sequential', [{ role: 'fetcher', cap }]);
    const me = await ok(api, 'GET', `${A}/whoami`);
    const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'list the orders' });
    await t.modules.teams.teams.settled(run.run_id);
    const s = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
    assert.equal(s.state, 'completed', JSON.stringify(s.error));
    assert.equal(seen.length, 1);
    const v = seen[0]!.verdict as Record<string, any>;
    assert.equal(v['ok'], true, JSON.stringify(v));
    assert.equal(v['sub'], me.principal.id, 'sub = the requester');
    assert.equal(v['act'].sub, tm.agents['fetcher'], 'act = the agent');
    assert.equal(v['act'].run_id, run.run_id);
    assert.equal(v['act'].crew_id, tm.crew);
    assert.equal(v['aud'], resource);
    assert.equal(v['scope'], 'tools.http.get');
    assert.ok(v['exp'] - v['iat'] <= 60, 'short-lived');

    // The journal names the token (jti, SHA-256), never the token itself.
    const token = seen[0]!.auth!.replace(/^DPoP /, '');
    const j = await ok(api, 'GET', `${A}/jobs/runs/${run.run_id}/journal`);
    const text = JSON.stringify(j);
    assert.ok(!text.includes(token), 'the token is not in the journal');
    const step = j.records.find((r: { kind: string; data: { tool?: string } }) => r.kind === 'step' && r.data.tool === 'http.get');
    assert.deepEqual(step.data.on_behalf, { jti: v['jti'], token_sha256: createHash('sha256').update(token).digest('hex') });

    // Outside the protected resource (same allow-listed host), no token is sent.
    url = `${origin}/public/status`;
    const r2 = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'status' });
    await t.modules.teams.teams.settled(r2.run_id);
    assert.equal(seen.length, 2);
    assert.equal(seen[1]!.auth, undefined);

    // A requester that is no longer active gets no token: the call is refused (and the run with it).
    const gone = await ok(api, 'POST', `${A}/principals`, { kind: 'service', name: 'gone', roles: ['viewer'] });
    await ok(api, 'POST', `${A}/principals/${gone.id}/archive`, {});
    const ask = { url: `${resource}/orders`, tool: 'http.get', requester: gone.id, agentId: tm.agents['fetcher']!, runId: run.run_id };
    await assert.rejects(t.modules.oauth.api.delegateForTool(ask), (e: { code?: string; details?: { reason?: string } }) => {
      return e.code === 'forbidden' && e.details?.reason === 'requester_inactive';
    });
    assert.equal(await t.modules.oauth.api.delegateForTool({ ...ask, requester: me.principal.id, url: `${origin}/api-other` }), null);

    // A run a job definition scheduled acts for the definition's author.
    url = `${resource}/orders`;
    const author = await ok(api, 'POST', `${A}/principals`, { kind: 'service', name: 'author', roles: ['admin'], authority: cap });
    const authorKey = await ok(api, 'POST', `${A}/api-keys`, { name: 'author', owner_id: author.id });
    const def = await t.request('POST', `${A}/jobs/definitions`, {
      token: authorKey.secret,
      body: { name: 'nightly', job_type: 'team', spec: { crew_id: tm.crew, input: 'nightly' }, cron: '*/10 * * * *' },
    });
    assert.equal(def.status, 201, def.text);
    t.clock.advance(10 * 60_000);
    assert.equal(await t.modules.jobs.scheduler.tick(), 1);
    const fired = await ok(api, 'GET', `${A}/jobs/definitions/${def.body.schedule_id}`);
    await t.modules.teams.teams.settled(fired.last_run_id);
    assert.equal(seen.length, 3, JSON.stringify(await ok(api, 'GET', `${A}/jobs/runs/${fired.last_run_id}`)));
    assert.equal(seen[2]!.verdict['sub'], author.id, "sub = the definition's author");
    assert.equal((seen[2]!.verdict['act'] as { sub: string }).sub, tm.agents['fetcher']);
    // The same through an `agent` definition (a pinned crew graph run as a job).
    const graphId = (await ok(api, 'GET', `${T}/crews/${tm.crew}`)).graph_hash as string;
    const agentDef = await t.request('POST', `${A}/jobs/definitions`, {
      token: authorKey.secret,
      body: { name: 'pinned', job_type: 'agent', spec: { graph_id: graphId, input: 'pinned' }, cron: '*/10 * * * *' },
    });
    assert.equal(agentDef.status, 201, agentDef.text);
    t.clock.advance(10 * 60_000);
    assert.equal(await t.modules.jobs.scheduler.tick(), 2);
    // Wait for both runs to end (a condition, not a time).
    for (const id of [def.body.schedule_id, agentDef.body.schedule_id]) {
      const runId = (await ok(api, 'GET', `${A}/jobs/definitions/${id}`)).last_run_id as string;
      await t.modules.teams.teams.settled(runId);
      for (;;) {
        const r = await ok(api, 'GET', `${A}/jobs/runs/${runId}`);
        if (['completed', 'failed', 'refused', 'cancelled'].includes(r.state)) break;
        await new Promise((res) => setTimeout(res, 25));
      }
    }
    assert.equal(seen.length, 5);
    assert.deepEqual(
      seen.slice(3).map((x) => x.verdict['sub']),
      [author.id, author.id],
    );
  } finally {
    await t.close();
    await ai.close();
    service.close();
  }
});
