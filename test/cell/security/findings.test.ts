// The attacks of the security review (issue "no operation hands out more authority than its
// caller holds"), each as described, against the real app and store: every one is refused,
// audited where the rule says so, and writes nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { actor } from '../../helpers/actors.ts';
import { crewFixture, ok, team, T } from '../../helpers/teams.ts';
import { basic, claimsOf, form } from '../../helpers/oauth.ts';
import { isServiceError } from '../../../core/errors.ts';

const A = '/api/public/v1/admin';

async function count(t: InProcess, table: string): Promise<number> {
  return Number((await t.row(`SELECT COUNT(*) AS n FROM ${table}`))!['n']);
}

function refusedAudit(t: InProcess, action: string) {
  return t.rows("SELECT details FROM audit WHERE action = ? AND outcome = 'refused'", [action]);
}

/** Waits (bounded) until a run's journal holds its run_finished record, through the runs module's event bus. */
async function waitFinished(t: InProcess, runId: string, timeoutMs = 30_000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  let unsubscribe: (() => void) | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`run ${runId} did not finish in ${timeoutMs} ms`)), timeoutMs);
      t.modules.runs.runs
        .subscribe(runId, 0, (r) => {
          if (r.kind === 'run_finished') resolve();
        })
        .then((u) => {
          unsubscribe = u;
        }, reject);
    });
  } finally {
    clearTimeout(timer);
    unsubscribe?.();
  }
}

/** Waits for a job run to end and returns it as the owner sees it. */
async function finished(t: InProcess, runId: string) {
  await waitFinished(t, runId);
  return (await t.request('GET', `${A}/jobs/runs/${runId}`, { token: t.adminKey })).body;
}

async function bootstrapKeyId(t: InProcess): Promise<string> {
  return String((await t.row("SELECT id FROM api_keys WHERE name = 'bootstrap'"))!['id']);
}

test("finding 1: a narrow key cannot rotate or revoke its owner's wider key (the bootstrap key included), nor mint wider", async () => {
  const t = await inProcessCell();
  try {
    const narrow = await t.request('POST', `${A}/api-keys`, {
      token: t.adminKey,
      body: { name: 'narrow', scopes: ['iam.keys.read', 'iam.keys.write'] },
    });
    assert.equal(narrow.status, 201);
    const key = narrow.body.secret as string;
    const boot = await bootstrapKeyId(t);
    const before = await t.row('SELECT hash, prev_hash, status FROM api_keys WHERE id = ?', [boot]);

    const rot = await t.request('POST', `${A}/api-keys/${boot}/rotate`, { token: key, body: { grace_seconds: 0 } });
    assert.equal(rot.status, 403, rot.text);
    assert.equal(rot.body.details.reason, 'wider_than_caller');
    assert.equal(rot.body.secret, undefined);
    const rev = await t.request('POST', `${A}/api-keys/${boot}/revoke`, { token: key });
    assert.equal(rev.status, 403);
    assert.equal(rev.body.details.reason, 'wider_than_caller');
    assert.deepEqual(await t.row('SELECT hash, prev_hash, status FROM api_keys WHERE id = ?', [boot]), before, 'nothing written');
    assert.equal((await t.request('GET', `${A}/audit?limit=1`, { token: t.adminKey })).status, 200, 'the owner is not locked out');
    assert.equal((await refusedAudit(t, 'api_key.rotate')).length, 1);
    assert.equal((await refusedAudit(t, 'api_key.revoke')).length, 1);

    const wider = await t.request('POST', `${A}/api-keys`, { token: key, body: { name: 'w', scopes: ['iam.principals.write'] } });
    assert.equal(wider.status, 403);
    assert.equal(wider.body.details.reason, 'wider_than_caller');
    const full = await t.request('POST', `${A}/api-keys`, { token: key, body: { name: 'w' } });
    assert.equal(full.status, 403, "empty scopes mean the owner's full authority: wider than this key");

    // Its own key and a narrower one it may rotate and revoke.
    const mine = await t.request('POST', `${A}/api-keys/${narrow.body.key_id}/rotate`, { token: key });
    assert.equal(mine.status, 200, mine.text);
    const nar = await t.request('POST', `${A}/api-keys`, { token: mine.body.secret, body: { name: 'n2', scopes: ['iam.keys.read'] } });
    assert.equal(nar.status, 201);
    assert.equal((await t.request('POST', `${A}/api-keys/${nar.body.key_id}/revoke`, { token: mine.body.secret })).status, 200);
  } finally {
    await t.close();
  }
});

test('finding 2: an OAuth client acts only as the caller or a principal it manages, scope bounded by both', async () => {
  const t = await inProcessCell();
  try {
    const a = await actor(t, {
      name: 'clients-admin',
      permissions: ['oauth.clients.write', 'oauth.clients.read', 'iam.principals.read', 'audit.read'],
    });
    const owner = (await t.row("SELECT id FROM principals WHERE name = 'owner'"))!['id'];
    const n = await count(t, 'oauth_clients');
    const forged = await t.request('POST', `${A}/oauth/clients`, {
      token: a.key,
      body: { name: 'evil', scope: ['audit.read'], subject_id: owner },
    });
    assert.equal(forged.status, 403, forged.text);
    assert.equal(forged.body.details.reason, 'wider_than_caller');
    assert.equal(await count(t, 'oauth_clients'), n, 'nothing written');
    assert.equal((await refusedAudit(t, 'oauth.client.register')).length, 1);

    const wide = await t.request('POST', `${A}/oauth/clients`, { token: a.key, body: { name: 'w', scope: ['iam.principals.write'] } });
    assert.equal(wide.status, 403);
    const self = await t.request('POST', `${A}/oauth/clients`, { token: a.key, body: { name: 'mine', scope: ['audit.read'] } });
    assert.equal(self.status, 201, self.text);
    assert.equal(self.body.subject_id, a.id);
    // A principal the caller manages (holds all of its authority) may be the subject, within its permissions.
    const sub = await actor(t, { name: 'reader', permissions: ['audit.read'] });
    const ok = await t.request('POST', `${A}/oauth/clients`, {
      token: a.key,
      body: { name: 'for-reader', scope: ['audit.read'], subject_id: sub.id },
    });
    assert.equal(ok.status, 201, ok.text);
    const beyond = await t.request('POST', `${A}/oauth/clients`, {
      token: a.key,
      body: { name: 'x', scope: ['oauth.clients.read'], subject_id: sub.id },
    });
    assert.equal(beyond.status, 400);
    assert.equal(beyond.body.details.reason, 'scope_exceeds_subject');
    // Tokens of the forged kind are not possible: the client's token acts as its subject only.
    const tok = await form(t, '/oauth/token', { grant_type: 'client_credentials' }, basic(self.body.client_id, self.body.client_secret));
    assert.equal(tok.status, 200, tok.text);
    assert.equal(claimsOf(tok.body.access_token).sub, a.id);
  } finally {
    await t.close();
  }
});

test("finding 3: a job's authority is the requester's ∩ what the spec asks; agents from scratch are bounded by their creator; no SSRF", async () => {
  const t = await inProcessCell();
  try {
    const RUNS = `${A}/jobs/runs`;
    // The owner stores a classified entry (clearance 5, compartment "x") in workspace ws.
    const put = await t.request('POST', RUNS, {
      token: t.adminKey,
      body: {
        job_type: 'single',
        workspace_id: 'ws',
        spec: {
          tool: 'kv.put',
          args: { key: 'secret', value: 'launch codes', classification: 5, compartments: ['x'] },
          authority: { egress_allowlist: ['kv:ws'], clearance_level: 5, compartments: ['x'] },
        },
      },
    });
    assert.equal(put.status, 202, put.text);
    assert.equal((await finished(t, put.body.run_id)).state, 'completed');

    // A jobs-only service account with the default (least) ceiling: the tool itself is refused, nothing written.
    const svc = await actor(t, { name: 'batch', roles: ['jobs'] });
    const n = await count(t, 'runs');
    const greedy = {
      tool: 'kv.get',
      args: { key: 'secret' },
      authority: { clearance_level: 100, compartments: ['x'], data_grant_ids: ['kv:*'], egress_allowlist: ['*'] },
    };
    const r1 = await t.request('POST', RUNS, { token: svc.key, body: { job_type: 'single', workspace_id: 'ws', spec: greedy } });
    assert.equal(r1.status, 403, r1.text);
    assert.equal(r1.body.details.reason, 'wider_than_caller');
    assert.equal(await count(t, 'runs'), n, 'no run written');

    // With a ceiling (the tools, its workspace, clearance 1): it asks for 100 and gets 1.
    const svc2 = await actor(t, {
      name: 'batch2',
      roles: ['jobs'],
      authority: { allowed_tools: ['kv.get', 'http.get'], data_grant_ids: ['kv:ws'], clearance_level: 1, egress_allowlist: ['*'] },
    });
    const r2 = await t.request('POST', RUNS, { token: svc2.key, body: { job_type: 'single', workspace_id: 'ws', spec: greedy } });
    assert.equal(r2.status, 202, r2.text);
    const s2 = await finished(t, r2.body.run_id);
    assert.equal(s2.state, 'failed');
    assert.equal(s2.error.reason, 'clearance_insufficient', JSON.stringify(s2.error));
    assert.deepEqual(
      s2.spec.authority,
      { clearance_level: 1, compartments: [], data_grant_ids: ['kv:ws'], egress_allowlist: ['*'] },
      'the run records the authority it had',
    );
    assert.ok(!JSON.stringify(s2).includes('launch codes'));

    // SSRF: egress "*" is not a way to loopback or the metadata service.
    for (const url of ['http://127.0.0.1:1/', 'http://169.254.169.254/latest/meta-data/']) {
      const r = await t.request('POST', RUNS, {
        token: svc2.key,
        body: { job_type: 'single', workspace_id: 'ws', spec: { tool: 'http.get', args: { url }, authority: { egress_allowlist: ['*'] } } },
      });
      assert.equal(r.status, 202);
      const s = await finished(t, r.body.run_id);
      assert.equal(s.state, 'failed');
      assert.equal(s.error.reason, 'egress_private_address', url);
    }

    // Agents from scratch: the authority template is bounded by the creator's ceiling.
    const maker = await actor(t, {
      name: 'maker',
      permissions: ['agent_teams', 'iam.principals.write', 'catalog.read'],
      authority: { allowed_tools: ['calc'], clearance_level: 1 },
    });
    const agents = await count(t, 'team_agents');
    const big = await t.request('POST', `${A}/agent-teams/agents`, {
      token: maker.key,
      body: { source: 'scratch', role_label: 'spy', authority_template: { allowed_tools: ['calc', 'kv.get'], clearance_level: 9 } },
    });
    assert.equal(big.status, 403, big.text);
    assert.equal(big.body.details.reason, 'wider_than_caller');
    assert.deepEqual(big.body.details.exceeds.envelope, ['allowed_tools', 'clearance_level']);
    assert.equal(await count(t, 'team_agents'), agents);
    const small = await t.request('POST', `${A}/agent-teams/agents`, {
      token: maker.key,
      body: { source: 'scratch', role_label: 'calc', authority_template: { allowed_tools: ['calc'], clearance_level: 1 } },
    });
    assert.equal(small.status, 201, small.text);
    // Blueprints and billets likewise.
    const bp = await t.request('POST', `${A}/agent-teams/blueprints`, {
      token: maker.key,
      body: { name: 'b', role_label: 'r', authority_template: { clearance_level: 2 } },
    });
    assert.equal(bp.status, 403);
    const f = await t.request('POST', `${A}/agent-teams/formations`, { token: maker.key, body: { name: 'f' } });
    assert.equal(f.status, 201, f.text);
    const bl = await t.request('POST', `${A}/agent-teams/formations/${f.body.formation_id}/billets`, {
      token: maker.key,
      body: { role_label: 'r', required_skills: [], authority_cap: { allowed_tools: ['http.get'] } },
    });
    assert.equal(bl.status, 403);
  } finally {
    await t.close();
  }
});

test("finding 4: binding someone else's secret to a provider needs secrets.use (and managing its creator), at registration and at every call", async () => {
  const t = await inProcessCell();
  try {
    const sec = await t.request('POST', `${A}/secrets`, { token: t.adminKey, body: { name: 'openai', value: 'sk-owner-secret' } });
    assert.equal(sec.status, 201);
    const thief = await actor(t, { name: 'thief', permissions: ['ai.providers', 'secrets.write'] });
    const n = await count(t, 'ai_providers');
    const body = {
      provider_type: 'openai-compatible',
      default_model: 'm',
      base_url: 'http://127.0.0.1:9/v1',
      api_key_secret_id: sec.body.secret_id,
    };
    const r = await t.request('POST', `${A}/ai/model-providers`, { token: thief.key, body });
    assert.equal(r.status, 403, r.text);
    assert.equal(r.body.details.reason, 'secret_not_usable');
    assert.equal(await count(t, 'ai_providers'), n);
    assert.equal((await refusedAudit(t, 'ai.provider.register')).length, 1);
    // Its own secret it may bind.
    const own = await t.request('POST', `${A}/secrets`, { token: thief.key, body: { name: 'mine', value: 'sk-mine' } });
    assert.equal(
      (await t.request('POST', `${A}/ai/model-providers`, { token: thief.key, body: { ...body, api_key_secret_id: own.body.secret_id } }))
        .status,
      201,
    );

    // secrets.use binds the secret of a principal the caller manages, never a wider one's (issue 20, the right to act
    // on a credential); once the binder is archived the provider can no longer send it.
    const ops = await actor(t, { name: 'ops', permissions: ['ai.providers', 'secrets'] });
    assert.equal((await t.request('POST', `${A}/ai/model-providers`, { token: ops.key, body })).status, 403);
    const small = await actor(t, { name: 'small', permissions: ['secrets.write'] });
    const smalls = await t.request('POST', `${A}/secrets`, { token: small.key, body: { name: 'smalls', value: 'sk-small' } });
    const p = await t.request('POST', `${A}/ai/model-providers`, {
      token: ops.key,
      body: { ...body, api_key_secret_id: smalls.body.secret_id },
    });
    assert.equal(p.status, 201, p.text);
    assert.equal((await t.request('POST', `${A}/principals/${ops.id}/archive`, { token: t.adminKey })).status, 200);
    await assert.rejects(
      t.modules.ai.ai.call(p.body.provider_id, { messages: [{ role: 'user', content: 'hi' }] }),
      (e: unknown) => isServiceError(e) && e.code === 'forbidden' && e.details?.['reason'] === 'secret_not_usable',
    );
  } finally {
    await t.close();
  }
});

test('finding 7: tokens and SATs derived from a key (a SAT of a SAT too) die with the key and spend its rpm', async () => {
  const t = await inProcessCell();
  try {
    const k = await actor(t, { name: 'svc', permissions: ['iam.sats.write', 'audit.read'], rpm: 1000 });
    const tok = await form(
      t,
      '/oauth/token',
      { grant_type: 'client_credentials', scope: 'iam.sats.write audit.read' },
      basic(k.keyId, k.key),
    );
    assert.equal(tok.status, 200, tok.text);
    const at = tok.body.access_token as string;
    assert.equal(claimsOf(at).root, `api_key:${k.keyId}`);
    const sat1 = await t.request('POST', `${A}/sats`, { token: at, body: { scope: ['iam.sats.write', 'audit.read'] } });
    assert.equal(sat1.status, 201, sat1.text);
    const sat2 = await t.request('POST', `${A}/sats`, { token: sat1.body.access_token, body: { scope: ['audit.read'] } });
    assert.equal(sat2.status, 201, sat2.text);
    assert.equal(claimsOf(sat2.body.access_token).root, `api_key:${k.keyId}`, 'the chain keeps its root');
    for (const c of [at, sat1.body.access_token, sat2.body.access_token]) {
      assert.equal((await t.request('GET', `${A}/audit?limit=1`, { token: c })).status, 200);
    }
    assert.equal((await t.request('POST', `${A}/api-keys/${k.keyId}/revoke`, { token: t.adminKey })).status, 200);
    for (const c of [at, sat1.body.access_token, sat2.body.access_token]) {
      const r = await t.request('GET', `${A}/audit?limit=1`, { token: c });
      assert.equal(r.status, 401);
      assert.equal(r.body.details.reason, 'revoked');
    }

    // One rpm budget for the key and everything derived from it.
    const lim = await actor(t, { name: 'slow', permissions: ['iam.sats.write', 'audit.read'], rpm: 3 });
    const ltok = (
      await form(t, '/oauth/token', { grant_type: 'client_credentials', scope: 'iam.sats.write audit.read' }, basic(lim.keyId, lim.key))
    ).body.access_token as string;
    const lsat = await t.request('POST', `${A}/sats`, { token: ltok, body: { scope: ['audit.read'] } }); // 1st request of the budget
    assert.equal(lsat.status, 201);
    assert.equal((await t.request('GET', `${A}/audit?limit=1`, { token: lim.key })).status, 200); // 2nd
    assert.equal((await t.request('GET', `${A}/audit?limit=1`, { token: lsat.body.access_token })).status, 200); // 3rd
    const over = await t.request('GET', `${A}/audit?limit=1`, { token: ltok });
    assert.equal(over.status, 429, "the 4th request through any derived credential exceeds the key's rpm");

    // A SAT minted with a token (no key behind it) dies when that token is revoked.
    const u = await actor(t, { name: 'u', permissions: ['iam.sats.write', 'audit.read', 'oauth.clients.write'] });
    // Registered for u by the owner: a client made for another principal has no root (it is u's, as a key would be).
    const cl = await t.request('POST', `${A}/oauth/clients`, {
      token: t.adminKey,
      body: { name: 'c', scope: ['iam.sats.write', 'audit.read'], subject_id: u.id },
    });
    const ctok = (await form(t, '/oauth/token', { grant_type: 'client_credentials' }, basic(cl.body.client_id, cl.body.client_secret))).body
      .access_token as string;
    const csat = await t.request('POST', `${A}/sats`, { token: ctok, body: { scope: ['audit.read'] } });
    assert.equal(claimsOf(csat.body.access_token).root, `token:${claimsOf(ctok).jti}`);
    assert.equal((await form(t, '/oauth/revoke', { token: ctok }, basic(cl.body.client_id, cl.body.client_secret))).status, 200);
    assert.equal((await t.request('GET', `${A}/audit?limit=1`, { token: csat.body.access_token })).status, 401);
  } finally {
    await t.close();
  }
});

test("finding 8: introspection and the bearer path give one verdict; an API key introspects only its owner's tokens", async () => {
  const t = await inProcessCell();
  try {
    const rs = await t.request('POST', `${A}/oauth/clients`, {
      token: t.adminKey,
      body: { name: 'resource-server', scope: ['audit.read'] },
    });
    const introspect = async (token: string, auth = basic(rs.body.client_id, rs.body.client_secret)) =>
      (await form(t, '/oauth/introspect', { token }, auth)).body;
    const k = await actor(t, { name: 'svc', permissions: ['audit.read'] });
    const at = (await form(t, '/oauth/token', { grant_type: 'client_credentials', scope: 'audit.read' }, basic(k.keyId, k.key))).body
      .access_token as string;
    assert.equal((await introspect(at)).active, true);
    // Another principal's API key, as a client, learns nothing about this token.
    const other = await actor(t, { name: 'other', permissions: ['audit.read'] });
    assert.deepEqual(await introspect(at, basic(other.keyId, other.key)), { active: false });
    assert.equal((await introspect(at, basic(k.keyId, k.key))).active, true, "the owner's own key may");

    // Root key revoked: refused on the bearer path, inactive in introspection.
    await t.request('POST', `${A}/api-keys/${k.keyId}/revoke`, { token: t.adminKey });
    assert.equal((await t.request('GET', `${A}/audit?limit=1`, { token: at })).status, 401);
    assert.deepEqual(await introspect(at), { active: false });

    // Subject archived: the same.
    const u = await actor(t, { name: 'u2', permissions: ['audit.read'] });
    const at2 = (await form(t, '/oauth/token', { grant_type: 'client_credentials', scope: 'audit.read' }, basic(u.keyId, u.key))).body
      .access_token as string;
    assert.equal((await introspect(at2)).active, true);
    await t.request('POST', `${A}/principals/${u.id}/archive`, { token: t.adminKey });
    assert.equal((await t.request('GET', `${A}/audit?limit=1`, { token: at2 })).status, 401);
    assert.deepEqual(await introspect(at2), { active: false });
  } finally {
    await t.close();
  }
});

test('finding 9: the jobs read permission reads every orchestration run (crew runs too), and the two routes agree on a run', async () => {
  const { t, ai } = await crewFixture();
  try {
    const doc = (await t.request('GET', '/api/public/v1/openapi.json')).body;
    for (const [path, op] of [
      ['/api/public/v1/admin/jobs/runs', 'get'],
      ['/api/public/v1/admin/jobs/runs/{run_id}', 'get'],
      ['/api/public/v1/admin/jobs/runs/{run_id}/journal', 'get'],
    ] as const) {
      assert.match(String(doc.paths[path]?.[op]?.description ?? ''), /crew runs included/, `${path} says what the permission reads`);
    }
    const api = { request: t.request, token: t.adminKey };
    const tm = await team(api, 'sequential', [{ role: 'a' }]);
    const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' });
    await waitFinished(t, run.run_id);
    const jobsOnly = await actor(t, { name: 'jobs-reader', permissions: ['system.orchestration.admin.read'] });
    const both = await actor(t, { name: 'both', permissions: ['system.orchestration.admin.read', 'agent_teams.read'] });
    // The jobs-only key reads the crew run through the jobs routes, as the docs say, and (round 3, finding 9) through the crew route too.
    const viaJobs = await t.request('GET', `${A}/jobs/runs/${run.run_id}`, { token: jobsOnly.key });
    assert.equal(viaJobs.status, 200);
    assert.equal(viaJobs.body.kind, 'crew');
    assert.equal((await t.request('GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`, { token: jobsOnly.key })).status, 200);
    // The same credential, both routes: the same run.
    const j = (await t.request('GET', `${A}/jobs/runs/${run.run_id}`, { token: both.key })).body;
    const c = (await t.request('GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`, { token: both.key })).body;
    for (const f of ['run_id', 'state', 'requester', 'graph_hash', 'crew_id', 'workspace_id']) assert.deepEqual(c[f], j[f], f);
    const jj = (await t.request('GET', `${A}/jobs/runs/${run.run_id}/journal`, { token: both.key })).body;
    assert.ok(jj.records.length > 0);
  } finally {
    await t.close();
    await ai.close();
  }
});

test('finding 13: a key id is not an existence oracle', async () => {
  const t = await inProcessCell();
  try {
    const k = await actor(t, { name: 'nosy', permissions: ['iam.keys.read'] });
    const boot = await bootstrapKeyId(t);
    const theirs = await t.request('GET', `${A}/api-keys/${boot}`, { token: k.key });
    const unknown = await t.request('GET', `${A}/api-keys/key_00000000000000000000`, { token: k.key });
    assert.equal(theirs.status, 404);
    assert.deepEqual({ s: theirs.status, b: theirs.body }, { s: unknown.status, b: unknown.body });
    for (const op of ['rotate', 'revoke']) {
      const w = await actor(t, { name: `w-${op}`, permissions: ['iam.keys'] });
      const a = await t.request('POST', `${A}/api-keys/${boot}/${op}`, { token: w.key });
      const b = await t.request('POST', `${A}/api-keys/key_00000000000000000000/${op}`, { token: w.key });
      assert.deepEqual({ s: a.status, b: a.body }, { s: b.status, b: b.body }, op);
    }
  } finally {
    await t.close();
  }
});
