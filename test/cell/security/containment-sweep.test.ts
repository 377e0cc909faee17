// Authority containment, swept: every route that creates, changes or uses an authority-bearing
// object is driven by callers holding random permissions (a custom role), a random envelope
// ceiling and a random credential narrowing, asking for random authority. Whatever a route
// accepts, the authority it handed out or exercised is within the caller's effective authority
// (roles ∩ scopes; ceiling ∩ key cap), as observed through the API afterwards. A second test
// makes every state-changing admin route declare whether it belongs to this sweep.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { contains, type Holding } from '../../../core/authority/contain.ts';
import { capToCeiling, meetCeilings, parseCeiling, UNBOUNDED, type Ceiling } from '../../../core/authority/ceiling.ts';
import { effectiveAuthority, intersectSelectors, normalize } from '../../../core/authority/scopes.ts';
import { intersectAuthority, type AuthorityEnvelope } from '../../../core/authority/envelope.ts';
import { ALL_PERMISSIONS, BUILTIN_ROLES } from '../../../core/permissions.ts';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { startOpenAIServer } from '../../fixtures/openai-server.ts';
import { provider } from '../../helpers/teams.ts';
import { basic, claimsOf, form } from '../../helpers/oauth.ts';
import { inProcessFetch, mcpClient } from '../../helpers/mcp-endpoint.ts';
import { startMcpServer } from '../../fixtures/mcp-server.ts';
import { generateEd25519 } from '../../../bundles/codec.ts';
import { openCrewBundle } from '../../../bundles/crew-bundle.ts';
import { openKeyBundle } from '../../../bundles/key-bundle.ts';
import { NOT_STANDING, STANDING } from './_standing.ts';

const A = '/api/public/v1/admin';
const T = `${A}/agent-teams`;

// ---------------------------------------------------------------- generators

const SELECTORS = [...ALL_PERMISSIONS, 'iam', 'iam.keys', 'oauth', 'agent_teams', 'system.orchestration', 'secrets', 'ai'];
const TOOLS = ['calc', 'clock.now', 'kv.get', 'kv.put', 'http.get', 'http.request'];
const sub = <T>(xs: readonly T[]) => fc.subarray([...xs]);

const envelopeArb: fc.Arbitrary<AuthorityEnvelope> = fc.record(
  {
    allowed_tools: sub(TOOLS),
    clearance_level: fc.integer({ min: 0, max: 3 }),
    permission_mode: fc.constantFrom('plan', 'ask', 'auto-read', 'auto'),
    data_grant_ids: sub(['kv:w1', 'kv:w2', 'kv:*']),
    egress_allowlist: sub(['kv:w1', 'kv:*', '*', 'https://a.example', 'POST:*', '*:*']),
    compartments: sub(['a', 'b', 'c']),
  },
  { requiredKeys: [] },
) as fc.Arbitrary<AuthorityEnvelope>;

const callerArb = fc.record({
  // Half the callers hold most permissions, so that the routes also accept (and the check is not vacuous).
  permissions: fc.oneof(
    sub(SELECTORS),
    sub(SELECTORS).map((drop) => [...ALL_PERMISSIONS].filter((p) => !drop.slice(0, 3).includes(p))),
  ),
  ceiling: envelopeArb,
  scopes: fc.option(sub(SELECTORS), { nil: undefined }),
  keyCap: fc.option(envelopeArb, { nil: undefined }),
});

const targetArb = fc.record({ permissions: sub(SELECTORS), ceiling: envelopeArb });

const askArb = fc.record({
  scopes: sub(SELECTORS),
  perms: fc.array(fc.constantFrom(...SELECTORS), { minLength: 1, maxLength: 4 }),
  env: envelopeArb,
  roles: sub(['viewer', 'jobs', 'operator', 'admin', 'agent']),
  subject: fc.constantFrom('self', 'owner', 'target'),
  keyTarget: fc.constantFrom('owner', 'target', 'own-wide'),
  tool: fc.constantFrom(...TOOLS),
  /** Ask for something inside the caller's authority (so accepted paths are checked too). */
  fit: fc.boolean(),
});

// ---------------------------------------------------------------- helpers

type Caller = typeof callerArb extends fc.Arbitrary<infer C> ? C : never;

let seq = 0;

async function ok(t: InProcess, method: string, path: string, body: unknown, token = t.adminKey) {
  const r = await t.request(method, path, { token, body });
  assert.ok(r.status >= 200 && r.status < 300, `${method} ${path} -> ${r.status} ${r.text}`);
  return r.body;
}

/** A principal holding a custom role with exactly `permissions`, and a ceiling. */
async function principal(t: InProcess, permissions: string[], ceiling: AuthorityEnvelope) {
  const n = ++seq;
  const roles: string[] = [];
  if (permissions.length) {
    await ok(t, 'POST', `${A}/roles`, { name: `sweep-${n}`, permissions });
    roles.push(`sweep-${n}`);
  }
  const p = await ok(t, 'POST', `${A}/principals`, { kind: 'service', name: `sweep-p${n}`, roles, authority: ceiling });
  return { id: p.id as string, perms: normalize(permissions), ceiling: ceiling as Ceiling };
}

/** What a key holds, judged from the key and its owner as the API shows them. */
function keyHolding(ownerPerms: string[], ownerCeiling: Ceiling, key: { scopes: string[]; authority: unknown }): Holding {
  const cap = key.authority === null ? null : parseCeiling(JSON.stringify(key.authority));
  return {
    permissions: effectiveAuthority(ownerPerms, key.scopes),
    envelope: cap === null ? ownerCeiling : meetCeilings(ownerCeiling, cap),
  };
}

function assertWithin(holder: Holding, grant: { permissions?: readonly string[]; envelope?: AuthorityEnvelope | Ceiling }, what: string) {
  const v = contains(holder, grant);
  assert.ok(
    v.ok,
    `${what} handed out more than the caller holds: ${JSON.stringify(v)} (caller ${JSON.stringify(holder)}, grant ${JSON.stringify(grant)})`,
  );
}

/** The routes this sweep drives, as `METHOD path-template`. */
export const SWEPT = [
  'POST /api/public/v1/admin/api-keys',
  'POST /api/public/v1/admin/api-keys/:key_id/rotate',
  'POST /api/public/v1/admin/api-keys/:key_id/revoke',
  'POST /api/public/v1/admin/principals',
  'POST /api/public/v1/admin/principals/:id/archive',
  'POST /api/public/v1/admin/roles',
  'PATCH /api/public/v1/admin/roles/:name',
  'DELETE /api/public/v1/admin/roles/:name',
  'PATCH /api/public/v1/admin/principals/:id',
  'POST /api/public/v1/admin/oauth/clients',
  'POST /api/public/v1/admin/oauth/clients/:client_id/rotate',
  'DELETE /api/public/v1/admin/oauth/clients/:client_id',
  'POST /api/public/v1/admin/sats',
  'POST /api/public/v1/admin/agent-teams/agents',
  'POST /api/public/v1/admin/agent-teams/blueprints',
  'POST /api/public/v1/admin/agent-teams/formations/:formation_id/billets',
  'POST /api/public/v1/admin/agent-teams/crews',
  'POST /api/public/v1/admin/jobs/runs',
  'POST /api/public/v1/admin/ai/model-providers',
  'POST /api/public/v1/admin/secrets/:secret_id/rotate',
  'DELETE /api/public/v1/admin/secrets/:secret_id',
  'POST /api/public/v1/admin/jobs/endpoints',
  'POST /api/public/v1/admin/jobs/definitions',
  'PATCH /api/public/v1/admin/ai/model-providers/:provider_id',
  'PATCH /api/public/v1/admin/agent-teams/blueprints/:blueprint_id',
  'PATCH /api/public/v1/admin/agent-teams/agents/:agent_id',
  'PATCH /api/public/v1/admin/agent-teams/formations/:formation_id/billets/:billet_id',
  'PATCH /api/public/v1/admin/agent-teams/crews/:crew_id',
  'POST /api/public/v1/admin/agent-teams/crews/:crew_id/upgrade',
  'POST /api/public/v1/admin/agent-teams/crews/:crew_id/runs/:run_id/fork',
  'POST /api/public/v1/admin/jobs/runs/:run_id/rerun',
  'POST /api/public/v1/admin/edge/key-bundles',
  'POST /api/public/v1/admin/catalog/sources',
  'PATCH /api/public/v1/admin/catalog/sources/:source_id',
  'POST /api/public/v1/admin/edge/crew-bundles',
  'POST /api/public/v1/admin/agent-teams/crews/:crew_id/runs/:run_id/outcomes/:step_id',
  'POST /api/public/v1/admin/jobs/runs/:run_id/outcomes/:step_id',
];

/** A token endpoint that issues a token to anyone: the sweep judges who may send the secret, not the grant. */
async function tokenEndpoint() {
  const s = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ access_token: 'issued', token_type: 'Bearer', expires_in: 300 }));
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(s.address() as { port: number }).port}/token`,
    close: () => new Promise<void>((r) => s.close(() => r())),
  };
}

test('containment sweep: no route hands out or exercises more than its caller holds', async () => {
  // A service that closes the connection once a POST arrived: the outcome of the write is lost, and the
  // run waits `outcome_unknown` for an operator to resolve it (the resolution routes are swept).
  const lost = createServer((req) => req.resume().on('end', () => req.socket.destroy()));
  await new Promise<void>((r) => lost.listen(0, '127.0.0.1', () => r()));
  const lostUrl = `http://127.0.0.1:${(lost.address() as AddressInfo).port}/refunds`;
  const ai = await startOpenAIServer({ apiKey: 'sk-fake' });
  const t = await inProcessCell({
    config: { rate: { capacity: 1e9, refillPerSecond: 1e9 }, agentQuota: 100_000, egressAllowPrivate: ['127.0.0.1/32'] },
  });
  // An MCP server and a token endpoint for catalog sources that send the owner's secret.
  const mcp = await startMcpServer();
  const as = await tokenEndpoint();
  try {
    const ownerId = (await t.request('GET', `${A}/principals?limit=1`, { token: t.adminKey })).body.principals[0].id as string;
    const ownerHolding: Holding = { permissions: ['*'], envelope: UNBOUNDED };
    // Fixtures the owner made: a secret, a formation, two wide agents (one per seat) and their billets.
    const secret = (await ok(t, 'POST', `${A}/secrets`, { name: 's', value: 'sk-x' })).secret_id as string;
    const wideEnv = {
      allowed_tools: TOOLS,
      clearance_level: 3,
      permission_mode: 'auto',
      data_grant_ids: ['kv:*'],
      egress_allowlist: ['*'],
      compartments: ['a', 'b', 'c'],
    };
    const formation = (await ok(t, 'POST', `${T}/formations`, { name: 'sweep', coordination_policy: 'sequential' })).formation_id as string;
    const billet = (
      await ok(t, 'POST', `${T}/formations/${formation}/billets`, { role_label: 'r', required_skills: [], authority_cap: wideEnv })
    ).billet_id as string;
    const wideAgent = (await ok(t, 'POST', `${T}/agents`, { source: 'scratch', role_label: 'r', authority_template: wideEnv }))
      .agent_id as string;
    const wideAgent2 = (await ok(t, 'POST', `${T}/agents`, { source: 'scratch', role_label: 'r2', authority_template: wideEnv }))
      .agent_id as string;
    const wideBlueprint = (await ok(t, 'POST', `${T}/blueprints`, { name: 'wide-bp', role_label: 'r', authority_template: wideEnv }))
      .blueprint_id as string;
    const bootKey = (await t.request('GET', `${A}/api-keys?limit=1`, { token: t.adminKey })).body.keys[0].key_id as string;
    // A source no agent is granted a tool of, sending nothing: a caller may rebind it only with a right to the secret.
    const bareSource = (await ok(t, 'POST', `${A}/catalog/sources`, { name: 'bare', url: mcp.url })).source_id as string;
    // An ended run of a crew of wide seats, to fork; a failed job run, to rerun.
    const forkAgent = (await ok(t, 'POST', `${T}/agents`, { source: 'scratch', role_label: 'f', authority_template: wideEnv }))
      .agent_id as string;
    await ok(t, 'POST', `${T}/agents/${forkAgent}/budget-ledger`, { budget_limit: 1000 });
    const forkFormation = (await ok(t, 'POST', `${T}/formations`, { name: 'forked' })).formation_id as string;
    const forkSeat = (
      await ok(t, 'POST', `${T}/formations/${forkFormation}/billets`, { role_label: 'f', required_skills: [], authority_cap: wideEnv })
    ).billet_id as string;
    const forkCrew = (await ok(t, 'POST', `${T}/crews`, { formation_id: forkFormation, assignments: { [forkSeat]: forkAgent } }))
      .crew_id as string;
    // Refused here (no cell of clearance 3): an ended run all the same.
    const started = await t.request('POST', `${T}/crews/${forkCrew}/runs`, { token: t.adminKey, body: { input: 'x' } });
    const forkParent = (started.body.run_id ?? started.body.details?.run_id) as string;
    assert.ok(forkParent, started.text);
    const failedJob = (
      await ok(t, 'POST', `${A}/jobs/runs`, { job_type: 'compute', workspace_id: 'w1', spec: { code: 'throw new Error("no")' } })
    ).run_id as string;
    const ends = async (id: string) => {
      for (let i = 0; i < 3000; i++) {
        const st = (await t.modules.runs.runs.getRun(id))?.state ?? '';
        if (['completed', 'failed', 'refused', 'cancelled'].includes(st)) return;
        await new Promise((res) => setTimeout(res, 10));
      }
      assert.fail(`run ${id} did not end`);
    };
    await ends(forkParent);
    await ends(failedJob);
    // An ended agent job run of that crew's graph (a scheduled agent definition), to rerun: its seats are wide.
    const forkGraph = (await ok(t, 'GET', `${T}/crews/${forkCrew}`, undefined)).graph_hash as string;
    const agentDef = (
      await ok(t, 'POST', `${A}/jobs/definitions`, {
        name: 'sweep-agent',
        job_type: 'agent',
        spec: { graph_id: forkGraph, input: 'x' },
        cron: '*/10 * * * *',
      })
    ).schedule_id as string;
    t.clock.advance(10 * 60_000);
    assert.ok((await t.modules.jobs.scheduler.tick()) >= 1);
    const failedAgentJob = (await ok(t, 'GET', `${A}/jobs/definitions/${agentDef}`, undefined)).last_run_id as string;
    await ok(t, 'POST', `${A}/jobs/definitions/${agentDef}/disable`, {});
    await ends(failedAgentJob);
    const forkAt = (await t.modules.runs.runs.readJournal(forkParent, 0, 1000)).at(-1)!.seq;
    // Runs waiting on a lost outcome: a crew whose seat's agent POSTs (a model on a fake provider of its
    // own asks for it), and a single job that POSTs.
    const refund = { tool: 'http.request', args: { method: 'POST', url: lostUrl } };
    ai.setResponder(() => ({ tool_calls: [{ name: 'http__request', arguments: refund.args }] }));
    const lostProvider = await provider({ request: t.request, token: t.adminKey }, ai);
    // Mode `ask` (the owner approves the POST) and a narrow egress: many random callers hold that much.
    const lostEnv = {
      allowed_tools: ['http.request'],
      clearance_level: 0,
      permission_mode: 'ask',
      egress_allowlist: [`POST:${new URL(lostUrl).origin}`],
    } as AuthorityEnvelope;
    const lostAgent = (
      await ok(t, 'POST', `${T}/agents`, { source: 'scratch', role_label: 'l', authority_template: lostEnv, provider_id: lostProvider })
    ).agent_id as string;
    await ok(t, 'POST', `${T}/agents/${lostAgent}/budget-ledger`, { budget_limit: 1e9 });
    const lostFormation = (await ok(t, 'POST', `${T}/formations`, { name: 'lost' })).formation_id as string;
    const lostSeat = (
      await ok(t, 'POST', `${T}/formations/${lostFormation}/billets`, { role_label: 'l', required_skills: [], authority_cap: lostEnv })
    ).billet_id as string;
    const lostCrew = (await ok(t, 'POST', `${T}/crews`, { formation_id: lostFormation, assignments: { [lostSeat]: lostAgent } }))
      .crew_id as string;
    const lostJobAuthority = { egress_allowlist: lostEnv.egress_allowlist!, data_grant_ids: [], clearance_level: 0, compartments: [] };
    const lostStep = `agent:${lostSeat}/tool/0.0`;
    const reach = async (id: string, state: string) => {
      for (let i = 0; i < 3000; i++) {
        if ((await t.modules.runs.runs.getRun(id))?.state === state) return id;
        await new Promise((res) => setTimeout(res, 10));
      }
      assert.fail(`run ${id} did not reach ${state}: ${JSON.stringify(await t.modules.runs.runs.getRun(id))}`);
    };
    // One run of each waiting at a time: a new one once a resolution was accepted.
    let lostCrewRun = '';
    let lostJobRun = '';
    const lostRuns = async () => {
      if ((await t.modules.runs.runs.getRun(lostCrewRun))?.state !== 'outcome_unknown') {
        lostCrewRun = (await ok(t, 'POST', `${T}/crews/${lostCrew}/runs`, { input: 'x' })).run_id;
        await reach(lostCrewRun, 'waiting');
        await ok(t, 'POST', `${T}/crews/${lostCrew}/runs/${lostCrewRun}/approvals/${encodeURIComponent(lostStep)}`, {
          decision: 'approve',
        });
        await reach(lostCrewRun, 'outcome_unknown');
      }
      if ((await t.modules.runs.runs.getRun(lostJobRun))?.state !== 'outcome_unknown')
        lostJobRun = await reach(
          (
            await ok(t, 'POST', `${A}/jobs/runs`, {
              job_type: 'single',
              workspace_id: 'w1',
              spec: { ...refund, authority: lostJobAuthority },
            })
          ).run_id,
          'outcome_unknown',
        );
      return { crew: lostCrewRun, job: lostJobRun };
    };
    let accepted = 0;
    let exchanged = 0;
    let sourcesAccepted = 0;
    let refused = 0;
    let resolved = 0;

    // The property runs in rounds until every outcome was seen often enough, so its coverage does
    // not depend on the luck of one round.
    const property = fc.asyncProperty(callerArb, targetArb, askArb, async (c: Caller, tg, ask) => {
      const me = await principal(t, c.permissions, c.ceiling);
      const key = await ok(t, 'POST', `${A}/api-keys`, {
        name: 'k',
        owner_id: me.id,
        ...(c.scopes ? { scopes: c.scopes } : {}),
        ...(c.keyCap ? { authority: c.keyCap } : {}),
      });
      const ownWide = await ok(t, 'POST', `${A}/api-keys`, { name: 'wide', owner_id: me.id });
      const target = await principal(t, tg.permissions, tg.ceiling);
      const targetKey = await ok(t, 'POST', `${A}/api-keys`, { name: 'tk', owner_id: target.id });
      const caller = keyHolding(me.perms, me.ceiling, key);
      if (ask.fit) {
        ask = { ...ask, env: caller.envelope === UNBOUNDED ? ask.env : capToCeiling(ask.env, caller.envelope) };
        const inside = intersectSelectors(ask.perms, caller.permissions);
        if (inside.length) ask = { ...ask, perms: inside, scopes: intersectSelectors(ask.scopes, caller.permissions) };
        if (
          caller.envelope !== UNBOUNDED &&
          !(caller.envelope.allowed_tools ?? []).includes(ask.tool) &&
          caller.envelope.allowed_tools?.[0]
        )
          ask = { ...ask, tool: caller.envelope.allowed_tools[0] };
      }
      const tok = key.secret as string;
      const call = async (method: string, path: string, body?: unknown) => {
        const r = await t.request(method, path, { token: tok, ...(body !== undefined ? { body } : {}) });
        assert.ok(r.status < 500, `${method} ${path} -> ${r.status} ${r.text}`);
        if (r.status < 300) accepted++;
        else refused++;
        return r;
      };

      // API keys: mint for self and for another principal; rotate and revoke a key of any owner.
      let r = await call('POST', `${A}/api-keys`, { name: 'm', scopes: ask.scopes, authority: ask.env });
      if (r.status === 201) assertWithin(caller, keyHolding(me.perms, me.ceiling, r.body), 'mint');
      r = await call('POST', `${A}/api-keys`, { name: 'm2', owner_id: target.id, scopes: ask.scopes });
      if (r.status === 201) assertWithin(caller, keyHolding(target.perms, target.ceiling, r.body), 'mint for another');
      const victims = {
        owner: { id: bootKey, h: ownerHolding },
        target: { id: targetKey.key_id, h: keyHolding(target.perms, target.ceiling, targetKey) },
        'own-wide': { id: ownWide.key_id, h: keyHolding(me.perms, me.ceiling, ownWide) },
      };
      const v = victims[ask.keyTarget];
      r = await call('POST', `${A}/api-keys/${v.id}/rotate`, {});
      if (r.status === 200) assertWithin(caller, v.h, 'rotate');
      r = await call('POST', `${A}/api-keys/${v.id}/revoke`);
      if (r.status === 200) assertWithin(caller, v.h, 'revoke');

      // Principals and roles.
      r = await call('POST', `${A}/principals`, { kind: 'service', name: `made-${++seq}`, roles: ask.roles, authority: ask.env });
      if (r.status === 201) {
        const perms = normalize(ask.roles.flatMap((x) => [...(BUILTIN_ROLES[x] ?? [])]));
        assertWithin(caller, { permissions: perms, envelope: r.body.authority }, 'principal.create');
      }
      r = await call('POST', `${A}/roles`, { name: `made-role-${++seq}`, permissions: ask.perms });
      if (r.status === 201) assertWithin(caller, { permissions: r.body.permissions }, 'role.create');
      // Changing or deleting a role someone else made: the caller must hold the old and the new permissions.
      if (tg.permissions.length) {
        const victim = `victim-${++seq}`;
        await ok(t, 'POST', `${A}/roles`, { name: victim, permissions: tg.permissions });
        r = await call('PATCH', `${A}/roles/${victim}`, { permissions: ask.perms });
        if (r.status === 200) assertWithin(caller, { permissions: [...tg.permissions, ...r.body.permissions] }, 'role.update');
        const now = r.status === 200 ? (r.body.permissions as string[]) : tg.permissions;
        r = await call('DELETE', `${A}/roles/${victim}`);
        if (r.status === 200) assertWithin(caller, { permissions: now }, 'role.delete');
      }

      // OAuth clients and SATs.
      const subject = { self: me, owner: { id: ownerId, perms: ['*'], ceiling: UNBOUNDED as Ceiling }, target }[ask.subject];
      r = await call('POST', `${A}/oauth/clients`, {
        name: 'c',
        scope: ask.perms,
        ...(ask.subject !== 'self' ? { subject_id: subject.id } : {}),
      });
      if (r.status === 201) {
        if (subject.id !== me.id) assertWithin(caller, { permissions: subject.perms, envelope: subject.ceiling }, 'client subject');
        assertWithin(caller, { permissions: r.body.scope }, 'client scope');
        const at = await form(t, '/oauth/token', { grant_type: 'client_credentials' }, basic(r.body.client_id, r.body.client_secret));
        if (at.status === 200) assertWithin(caller, { permissions: claimsOf(at.body.access_token).scope.split(' ') }, 'client token');
      }
      // Rotating (taking the secret of) or deleting a client the owner registered for the target:
      // the caller must manage the target and hold the client's whole scope.
      if (target.perms.length) {
        const victim = await ok(t, 'POST', `${A}/oauth/clients`, { name: 'v', scope: target.perms, subject_id: target.id });
        const held = { permissions: [...target.perms, ...(victim.scope as string[])], envelope: target.ceiling };
        r = await call('POST', `${A}/oauth/clients/${victim.client_id}/rotate`);
        if (r.status === 200) assertWithin(caller, held, 'client rotate');
        r = await call('DELETE', `${A}/oauth/clients/${victim.client_id}`);
        if (r.status === 200) assertWithin(caller, held, 'client delete');
      }
      r = await call('POST', `${A}/sats`, { scope: ask.perms.filter((p) => p !== '*') });
      if (r.status === 201) assertWithin(caller, { permissions: claimsOf(r.body.access_token).scope.split(' ') }, 'sat');

      // Token exchange (RFC 8693): the caller's key, as the client and the actor, exchanges a wide subject's
      // token (the owner's SAT) and the target's: what it gets is within the caller and within the subject,
      // permissions and envelope alike (the envelope as the bearer path computes it, shown by whoami).
      const ownerSat = await ok(t, 'POST', `${A}/sats`, { scope: ask.perms.filter((p) => p !== '*').concat('iam.principals.read') });
      const targetTok = await form(t, '/oauth/token', { grant_type: 'client_credentials' }, basic(targetKey.key_id, targetKey.secret));
      const subjects: [string, Holding][] = [[ownerSat.access_token, ownerHolding]];
      if (targetTok.status === 200) subjects.push([targetTok.body.access_token, { permissions: target.perms, envelope: target.ceiling }]);
      for (const [subjectToken, subjectHolding] of subjects) {
        const x = await form(
          t,
          '/oauth/token',
          {
            grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
            subject_token: subjectToken,
            subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
            audience: `${t.modules.oauth.api.publicBase()}/api/public/v1`,
            scope: [...ask.perms, ...ask.scopes].join(' '),
          },
          basic(key.key_id, tok),
        );
        assert.ok(x.status < 500, x.text);
        if (x.status !== 200) continue;
        accepted++;
        exchanged++;
        const scope = claimsOf(x.body.access_token).scope.split(' ');
        assertWithin(caller, { permissions: scope }, 'token exchange (actor)');
        assertWithin(subjectHolding, { permissions: scope }, 'token exchange (subject)');
        const who = await t.request('GET', `${A}/whoami`, { token: x.body.access_token });
        if (who.status === 200) {
          assertWithin(
            caller,
            { permissions: who.body.effective_permissions, envelope: who.body.authority },
            'exchanged token at use (actor)',
          );
          assertWithin(
            subjectHolding,
            { permissions: who.body.effective_permissions, envelope: who.body.authority },
            'exchanged token at use (subject)',
          );
        }
      }

      // Agent teams: an agent from scratch, a blueprint, a billet, a crew over a wide agent.
      r = await call('POST', `${T}/agents`, { source: 'scratch', role_label: 'x', authority_template: ask.env });
      if (r.status === 201) assertWithin(caller, { permissions: [...BUILTIN_ROLES['agent']!], envelope: r.body.authority }, 'agent');
      r = await call('POST', `${T}/blueprints`, { name: `bp${++seq}`, role_label: 'x', authority_template: ask.env });
      if (r.status === 201) assertWithin(caller, { envelope: r.body.authority_template }, 'blueprint');
      r = await call('POST', `${T}/formations/${formation}/billets`, {
        role_label: 'x',
        required_skills: [],
        reports_to: billet,
        authority_cap: ask.env,
      });
      if (r.status === 201) assertWithin(caller, { envelope: r.body.authority_cap }, 'billet');
      const crewFormation = (await ok(t, 'POST', `${T}/formations`, { name: `cf${++seq}` })).formation_id;
      const seat = (
        await ok(t, 'POST', `${T}/formations/${crewFormation}/billets`, { role_label: 'r', required_skills: [], authority_cap: ask.env })
      ).billet_id;
      r = await call('POST', `${T}/crews`, { formation_id: crewFormation, assignments: { [seat]: wideAgent } });
      // The seat's authority as the compiler computes it: agent ∩ billet cap (exact names).
      const seatEnv = intersectAuthority(wideEnv as AuthorityEnvelope, ask.env);
      if (r.status === 201) assertWithin(caller, { envelope: seatEnv }, 'crew seat');
      // A schedule that runs that crew later, as the caller.
      const crewId =
        r.status === 201
          ? (r.body.crew_id as string)
          : ((await ok(t, 'POST', `${T}/crews`, { formation_id: crewFormation, assignments: { [seat]: wideAgent } })).crew_id as string);
      r = await call('POST', `${A}/jobs/definitions`, {
        name: `d${++seq}`,
        job_type: 'team',
        workspace_id: 'w1',
        cron: '0 * * * *',
        spec: { crew_id: crewId },
      });
      if (r.status === 201) {
        assertWithin(caller, { envelope: seatEnv }, 'definition seats');
        assertWithin(caller, { permissions: ['system.orchestration.admin.write', 'agent_teams.write'] }, 'definition author');
      }

      // Jobs: a single tool run, a published endpoint.
      r = await call('POST', `${A}/jobs/runs`, {
        job_type: 'single',
        workspace_id: 'w1',
        spec: {
          tool: ask.tool,
          args: {},
          authority: {
            egress_allowlist: ask.env.egress_allowlist ?? [],
            data_grant_ids: ask.env.data_grant_ids ?? [],
            clearance_level: ask.env.clearance_level ?? 0,
            compartments: ask.env.compartments ?? [],
          },
        },
      });
      if (r.status === 202) {
        const run = (await t.request('GET', `${A}/jobs/runs/${r.body.run_id}`, { token: t.adminKey })).body;
        assertWithin(caller, { envelope: { ...run.spec.authority, allowed_tools: [run.spec.tool] } }, 'single job');
      }
      r = await call('POST', `${A}/jobs/endpoints`, {
        name: `e${++seq}`,
        job_type: 'compute',
        workspace_id: 'w1',
        spec: { code: 'return 1' },
        required_scopes: ask.perms.filter((p) => p !== '*'),
      });
      if (r.status === 201) assertWithin(caller, { permissions: r.body.required_scopes }, 'endpoint');

      // A fork runs as the caller: every seat of its graph within the caller; a rerun needs the caller's jobs write.
      r = await call('POST', `${T}/crews/${forkCrew}/runs/${forkParent}/fork`, { at: forkAt });
      if (r.status === 201) assertWithin(caller, { envelope: wideEnv as AuthorityEnvelope }, 'fork seats');
      r = await call('POST', `${A}/jobs/runs/${failedJob}/rerun`);
      if (r.status === 201)
        assertWithin(caller, { permissions: ['system.orchestration.admin.write', 'system.orchestration.admin.read'] }, 'rerun');
      // An agent job run's rerun runs its crew's graph as the caller: every seat within the caller.
      r = await call('POST', `${A}/jobs/runs/${failedAgentJob}/rerun`);
      if (r.status === 201)
        assertWithin(
          caller,
          {
            permissions: ['system.orchestration.admin.write', 'system.orchestration.admin.read'],
            envelope: wideEnv as AuthorityEnvelope,
          },
          'agent job rerun seats',
        );

      // Resolving a lost outcome lets the run act again: the caller may run it (every seat; the job's tool and authority).
      const waiting = await lostRuns();
      r = await call('POST', `${T}/crews/${lostCrew}/runs/${waiting.crew}/outcomes/${encodeURIComponent(lostStep)}`, {
        resolution: 'fail',
      });
      if (r.status === 200) {
        resolved++;
        assertWithin(caller, { permissions: ['agent_teams.write'], envelope: lostEnv }, 'crew outcome');
      }
      r = await call('POST', `${A}/jobs/runs/${waiting.job}/outcomes/${encodeURIComponent('tool/call')}`, { resolution: 'fail' });
      if (r.status === 200) {
        resolved++;
        assertWithin(
          caller,
          { permissions: ['system.orchestration.admin.write'], envelope: { ...lostJobAuthority, allowed_tools: ['http.request'] } },
          'job outcome',
        );
      }

      // Bundles for a device of the caller's own: a key bundle carries only keys (and token subjects) the
      // caller could act on; a crew bundle only a crew the caller may run (every seat within it).
      const dev = await generateEd25519();
      r = await call('POST', `${A}/edge/devices`, { name: `d${++seq}`, public_jwk: dev.publicJwk });
      if (r.status === 201) {
        const trust = r.body.trust.keys as { kid: string; jwk: JsonWebKey }[];
        r = await call('POST', `${A}/edge/key-bundles`, { device_id: dev.kid });
        if (r.status === 201) {
          const { opened } = await openKeyBundle(r.text, trust);
          const ceilings = new Map((await t.rows('SELECT id, authority FROM principals')).map((x) => [x['id'], String(x['authority'])]));
          const ceilingOf = (id: string) => parseCeiling(ceilings.get(id) ?? '{}');
          const keys = new Map((await t.rows('SELECT id, scopes, authority FROM api_keys')).map((x) => [x['id'], x]));
          for (const [keyId, ownerId] of opened.payload.keys.map((k) => [k[0], k[1]] as const)) {
            const row = keys.get(keyId)!;
            const key = {
              scopes: JSON.parse(String(row['scopes'])) as string[],
              authority: row['authority'] === null ? null : JSON.parse(String(row['authority'])),
            };
            assertWithin(
              caller,
              keyHolding(opened.payload.owners[ownerId]!.permissions, ceilingOf(ownerId), key),
              `key bundle key ${keyId}`,
            );
          }
          // Every token subject's permissions are within the caller; every one but the caller's own principal (whose
          // keys and tokens are judged with them) is one it manages, ceiling included.
          for (const [id, o] of Object.entries(opened.payload.owners)) {
            assertWithin(caller, { permissions: o.permissions }, `key bundle subject ${id}`);
            if (id !== me.id) assertWithin(caller, { envelope: ceilingOf(id) }, `key bundle subject ${id} ceiling`);
          }
        }
        r = await call('POST', `${A}/edge/crew-bundles`, { device_id: dev.kid, crew_id: ask.fit ? crewId : forkCrew });
        if (r.status === 201) {
          const opened = await openCrewBundle(r.text, trust);
          assertWithin(caller, { permissions: ['agent_teams.write'] }, 'crew bundle author');
          for (const seat of Object.values(
            (opened.payload.crew.graph as { seats: Record<string, { authority: AuthorityEnvelope }> }).seats,
          ))
            assertWithin(caller, { envelope: seat.authority }, 'crew bundle seat');
        }
      }

      // Setting another principal's roles: the caller manages it (all of its authority) and holds what it gives.
      // Asking to fit: a principal within the caller, given only roles within the caller.
      const rolePerms = (x: string) => [...(BUILTIN_ROLES[x] ?? [])];
      const edited = ask.fit ? await principal(t, intersectSelectors(tg.permissions, caller.permissions), {}) : target;
      const given = ask.fit ? ask.roles.filter((x) => contains(caller, { permissions: rolePerms(x) }).ok) : ask.roles;
      r = await call('PATCH', `${A}/principals/${edited.id}`, { roles: given });
      if (r.status === 200) {
        assertWithin(caller, { permissions: edited.perms, envelope: edited.ceiling }, 'principal.update target');
        assertWithin(caller, { permissions: normalize(given.flatMap(rolePerms)) }, 'principal.update roles');
      }

      // A provider binding the owner's secret.
      r = await call('POST', `${A}/ai/model-providers`, {
        provider_type: 'openai-compatible',
        default_model: 'm',
        base_url: 'http://127.0.0.1:9/v1',
        api_key_secret_id: secret,
      });
      if (r.status === 201) assertWithin(caller, { permissions: ['secrets.use', 'ai.providers.write'] }, 'provider secret');
      // Replacing or deleting the owner's secrets: the same right as binding them.
      r = await call('POST', `${A}/secrets/${secret}/rotate`, { value: 'sk-y' });
      if (r.status === 200) assertWithin(caller, { permissions: ['secrets.use', 'secrets.write'] }, 'secret rotate');
      const spare = (await ok(t, 'POST', `${A}/secrets`, { name: 'spare', value: 'sk-z' })).secret_id as string;
      r = await call('DELETE', `${A}/secrets/${spare}`);
      if (r.status === 200) assertWithin(caller, { permissions: ['secrets.use', 'secrets.write'] }, 'secret delete');

      // A catalog source sending the owner's secret as its client secret, registered or rebound: the right to the secret.
      const cc = { type: 'client_credentials', token_endpoint: as.url, client_id: 'c', client_secret_id: secret };
      r = await call('POST', `${A}/catalog/sources`, { name: `s${++seq}`, url: mcp.url, auth: cc });
      if (r.status === 201) assertWithin(caller, { permissions: ['secrets.use', 'catalog.sources.write'] }, 'source secret');
      r = await call('PATCH', `${A}/catalog/sources/${bareSource}`, { auth: cc });
      if (r.status === 200) assertWithin(caller, { permissions: ['secrets.use', 'catalog.sources.write'] }, 'source rebind');
      // With a secret of its own: its credential's secrets.write is the right to send it.
      const mine = await call('POST', `${A}/secrets`, { name: 'mine', value: 'client-secret' });
      if (mine.status === 201) {
        r = await call('POST', `${A}/catalog/sources`, {
          name: `s${++seq}`,
          url: mcp.url,
          auth: { ...cc, client_secret_id: mine.body.secret_id },
        });
        if (r.status === 201) {
          sourcesAccepted++;
          assertWithin(caller, { permissions: ['secrets.write', 'catalog.sources.write'] }, 'source own secret');
        }
      }

      // Changes: a provider rebound to the owner's secret; a blueprint, an agent and a billet given
      // the asked authority; a wide blueprint and agent touched at all (the caller must hold what
      // they hold); a crew rebound and upgraded (its seats recompiled).
      const bare = await ok(t, 'POST', `${A}/ai/model-providers`, {
        provider_type: 'openai-compatible',
        default_model: 'm',
        base_url: 'http://127.0.0.1:9/v1',
      });
      r = await call('PATCH', `${A}/ai/model-providers/${bare.provider_id}`, { api_key_secret_id: secret });
      if (r.status === 200) assertWithin(caller, { permissions: ['secrets.use', 'ai.providers.write'] }, 'provider rebind');
      const bp = (await ok(t, 'POST', `${T}/blueprints`, { name: `nb${++seq}`, role_label: 'x', authority_template: {} })).blueprint_id;
      r = await call('PATCH', `${T}/blueprints/${bp}`, { authority_template: ask.env });
      if (r.status === 200) assertWithin(caller, { envelope: r.body.authority_template }, 'blueprint.update');
      r = await call('PATCH', `${T}/blueprints/${wideBlueprint}`, { role_label: `w${++seq}` });
      if (r.status === 200) assertWithin(caller, { envelope: wideEnv as AuthorityEnvelope }, 'wide blueprint.update');
      const na = (await ok(t, 'POST', `${T}/agents`, { source: 'scratch', role_label: 'x', authority_template: {} })).agent_id;
      r = await call('PATCH', `${T}/agents/${na}`, { authority_template: ask.env });
      if (r.status === 200) {
        const p = (await t.request('GET', `${A}/principals/${na}`, { token: t.adminKey })).body;
        assertWithin(caller, { permissions: [...BUILTIN_ROLES['agent']!], envelope: p.authority }, 'agent.update');
      }
      r = await call('PATCH', `${T}/agents/${wideAgent}`, { role_label: `w${++seq}` });
      if (r.status === 200) assertWithin(caller, { envelope: wideEnv as AuthorityEnvelope }, 'wide agent.update');
      const nb = (
        await ok(t, 'POST', `${T}/formations/${formation}/billets`, {
          role_label: 'n',
          required_skills: [],
          reports_to: billet,
          authority_cap: {},
        })
      ).billet_id;
      r = await call('PATCH', `${T}/formations/${formation}/billets/${nb}`, { authority_cap: ask.env });
      if (r.status === 200) assertWithin(caller, { envelope: r.body.authority_cap }, 'billet.update');
      r = await call('PATCH', `${T}/crews/${crewId}`, { assignments: { [seat]: wideAgent2 } });
      if (r.status === 200) assertWithin(caller, { envelope: seatEnv }, 'crew rebind');
      const seat2 = (
        await ok(t, 'POST', `${T}/formations/${crewFormation}/billets`, { role_label: 'r2', required_skills: [], authority_cap: ask.env })
      ).billet_id;
      r = await call('POST', `${T}/crews/${crewId}/upgrade`, { assignments: { [seat2]: wideAgent } });
      if (r.status === 200) assertWithin(caller, { envelope: seatEnv }, 'crew upgrade');

      // MCP (/mcp): the caller is shown only crews and endpoints it could run by the routes' own checks,
      // and a call it is not refused runs within it. Listing compiles every crew, so every third caller lists.
      const mc = await mcpClient(inProcessFetch(t), 'http://127.0.0.1/mcp', tok);
      if (seq % 3 === 0) {
        for (const tool of (await mc.listTools()).tools) {
          if (tool.name.startsWith('crew_')) {
            const id = tool.name.slice('crew_'.length);
            const crewRow = await ok(t, 'GET', `${T}/crews/${id}`, undefined);
            const g = await ok(t, 'GET', `${T}/formations/${crewRow.formation_id}/graph?crew_id=${id}`, undefined);
            for (const seat of Object.values(
              g.graph.seats as Record<string, { authority: AuthorityEnvelope & { budget_ceiling: number | null } }>,
            )) {
              const { budget_ceiling, ...env } = seat.authority;
              assertWithin(
                caller,
                { permissions: ['agent_teams.write'], envelope: budget_ceiling === null ? env : { ...env, budget_ceiling } },
                'mcp crew listed',
              );
            }
          } else if (tool.name.startsWith('endpoint_')) {
            const e = await ok(t, 'GET', `${A}/jobs/endpoints/${tool.name.slice('endpoint_'.length)}`, undefined);
            assertWithin(caller, { permissions: e.required_scopes }, 'mcp endpoint listed');
          }
        }
      }
      const mcpCall = await mc.callTool({ name: `crew_${crewId}`, arguments: { input: 'x' } });
      const refusal = mcpCall.isError ? JSON.parse((mcpCall.content as { text: string }[])[0]!.text) : null;
      if (refusal?.error === 'forbidden') refused++;
      else {
        // Started (or refused by the run's own start checks, past the containment check): within the caller.
        accepted++;
        assertWithin(caller, { permissions: ['agent_teams.write'], envelope: seatEnv }, 'mcp crew call');
      }
      await mc.close();
    });
    const covered = () => exchanged > 5 && sourcesAccepted > 2 && accepted > 50 && refused > 50;
    for (let round = 0; round < 4 && !covered(); round++) await fc.assert(property, { numRuns: 40 });
    assert.ok(exchanged > 5, `token exchange was accepted ${exchanged} times`);
    // The accepted path of the resolution routes, every time (few random callers hold a run's whole authority):
    // a caller holding exactly what the runs act with resolves both, and holds what they exercise.
    const fit = await principal(t, ['agent_teams.write', 'system.orchestration.admin.write'], lostEnv);
    const fitKey = (await ok(t, 'POST', `${A}/api-keys`, { name: 'fit', owner_id: fit.id })).secret as string;
    const fitHolding: Holding = { permissions: fit.perms, envelope: fit.ceiling };
    const waiting = await lostRuns();
    for (const path of [
      `${T}/crews/${lostCrew}/runs/${waiting.crew}/outcomes/${encodeURIComponent(lostStep)}`,
      `${A}/jobs/runs/${waiting.job}/outcomes/${encodeURIComponent('tool/call')}`,
    ]) {
      const r = await t.request('POST', path, { token: fitKey, body: { resolution: 'fail' } });
      assert.equal(r.status, 200, `${path}: ${r.text}`);
      resolved++;
    }
    assertWithin(fitHolding, { permissions: ['agent_teams.write'], envelope: lostEnv }, 'crew outcome (fit)');
    assertWithin(
      fitHolding,
      { permissions: ['system.orchestration.admin.write'], envelope: { ...lostJobAuthority, allowed_tools: ['http.request'] } },
      'job outcome (fit)',
    );
    assert.ok(resolved >= 2, `a lost outcome was resolved ${resolved} times`);
    assert.ok(sourcesAccepted > 2, `a catalog source was registered ${sourcesAccepted} times`);
    assert.ok(accepted > 50 && refused > 50, `the sweep exercised both outcomes (accepted ${accepted}, refused ${refused})`);
  } finally {
    await t.close();
    await mcp.close();
    await as.close();
    lost.close();
    lost.closeAllConnections();
    await ai.close();
  }
});

/** State-changing admin routes that hand out or use no authority, each with why. */
const NOT_AUTHORITY = new Map<string, string>([
  [
    'POST /api/public/v1/admin/principals/:id/restore',
    'restoring brings back what the principal held; the caller must manage it (same check as archive)',
  ],
  ['DELETE /api/public/v1/admin/principals/:id', 'lifecycle: same check as archive'],
  ['POST /api/public/v1/admin/principals/:id/purge', 'lifecycle: same check as archive'],
  ['POST /api/public/v1/admin/secrets', 'stores a value the caller owns; binding it is the provider route'],
  ['POST /api/public/v1/admin/oauth/signing-keys/rotate', "rotates the cell's key; hands out nothing"],
  ['POST /api/public/v1/admin/agent-teams/skills', 'a skill carries no authority'],
  ['POST /api/public/v1/admin/agent-teams/formations', 'a formation carries no authority until billets are added'],
  ['POST /api/public/v1/admin/agent-teams/contracts', 'a contract only narrows (a value gate)'],
  ['POST /api/public/v1/admin/agent-teams/agents/:agent_id/budget-ledger', 'a budget limit, not authority'],
  [
    'POST /api/public/v1/admin/agent-teams/crews/:crew_id/runs',
    "runs a crew: the crew route's seat check, repeated at launch (finding tests)",
  ],
  ['POST /api/public/v1/admin/agent-teams/crews/:crew_id/runs/:run_id/recover', 'resumes a run as it was authorised'],
  ['POST /api/public/v1/admin/agent-teams/crews/:crew_id/runs/:run_id/approvals/:step_id', 'a decision by the caller, not a grant'],
  ['POST /api/public/v1/admin/jobs/runs/:run_id/cancel', 'stops a run'],
  ['POST /api/public/v1/admin/jobs/runs/:run_id/approvals/:step_id', 'a decision by the caller, not a grant'],
  ['PATCH /api/public/v1/admin/jobs/definitions/:schedule_id', 'as create'],
  ['POST /api/public/v1/admin/jobs/definitions/:schedule_id/enable', 'as create'],
  ['POST /api/public/v1/admin/jobs/definitions/:schedule_id/disable', 'stops a schedule'],
  [
    'POST /api/public/v1/admin/jobs/definitions/:schedule_id/run',
    "one run as the caller: the template's permissions and the crew-run route's seat check (definitions-run-now.test.ts)",
  ],
  ['DELETE /api/public/v1/admin/jobs/definitions/:schedule_id', 'stops a schedule'],
  ['DELETE /api/public/v1/admin/jobs/endpoints/:endpoint_id', 'unpublishes'],
  ['POST /api/public/v1/admin/edge/devices', 'registers a device key; authority reaches a device only through a key bundle'],
  [
    'POST /api/public/v1/admin/edge/devices/:device_id/disable',
    "acting on a device (its registrant's credential): the credential check, mutation-sweep.test.ts drives it",
  ],
  ['POST /api/public/v1/admin/edge/devices/:device_id/enable', 'as disable: bundles for it are judged when issued (swept here)'],
  ['DELETE /api/public/v1/admin/edge/devices/:device_id', 'as disable'],
  [
    'POST /api/public/v1/admin/edge/devices/:device_id/budget-release',
    'gives what a device holds back to the ledgers, hands it nothing; acting on the device: the credential check, mutation-sweep.test.ts drives it',
  ],
  ['POST /api/public/v1/admin/edge/journals', 'imports a record'],
  ['DELETE /api/public/v1/admin/ai/model-providers/:provider_id', 'removes a provider (refused while an agent names it)'],
  ['PATCH /api/public/v1/admin/agent-teams/skills/:skill_id', 'a skill carries no authority; who may change one: mutation-sweep.test.ts'],
  ['DELETE /api/public/v1/admin/agent-teams/skills/:skill_id', 'a skill carries no authority'],
  ['DELETE /api/public/v1/admin/agent-teams/blueprints/:blueprint_id', 'removes a template (refused while agents minted from it exist)'],
  [
    'DELETE /api/public/v1/admin/agent-teams/agents/:agent_id',
    "lifecycle of the agent's principal: the archive check (the caller holds all of the agent's authority)",
  ],
  [
    'PATCH /api/public/v1/admin/agent-teams/contracts/:contract_id',
    'hands out nothing; who may change one (it gates seats): mutation-sweep.test.ts',
  ],
  ['DELETE /api/public/v1/admin/agent-teams/contracts/:contract_id', 'refused while anything names the contract'],
  [
    'PATCH /api/public/v1/admin/agent-teams/formations/:formation_id',
    'formation fields carry no authority (billet caps do); crews take a new version only by upgrade, which is swept',
  ],
  ['DELETE /api/public/v1/admin/agent-teams/formations/:formation_id', 'removes a formation no crew uses'],
  ['DELETE /api/public/v1/admin/agent-teams/formations/:formation_id/billets/:billet_id', 'removing a seat grants nothing'],
  ['DELETE /api/public/v1/admin/agent-teams/crews/:crew_id', 'removes a crew no live run or definition uses'],
  ['POST /api/public/v1/admin/agent-teams/crews/:crew_id/runs/:run_id/cancel', 'stops a run'],
  [
    'POST /api/public/v1/admin/catalog/sources/:source_id/pins',
    'hands out nothing; who may re-pin (it reaches the agents granted the tool): mutation-sweep.test.ts, tools/mcp-containment.test.ts',
  ],
  ['DELETE /api/public/v1/admin/catalog/sources/:source_id', 'removes a source none of whose tools anything names'],
]);

test('every state-changing admin route is either in the containment sweep or says why it hands out no authority', async () => {
  const t = await inProcessCell();
  try {
    const unclassified: string[] = [];
    const seen = new Set<string>();
    for (const r of t.app.routes) {
      if (!['POST', 'PUT', 'PATCH', 'DELETE'].includes(r.method) || !r.path.startsWith('/api/public/v1/admin/')) continue;
      const id = `${r.method} ${r.path}`;
      if (seen.has(id)) continue;
      seen.add(id);
      if (!SWEPT.includes(id) && !NOT_AUTHORITY.has(id)) unclassified.push(id);
    }
    assert.deepEqual(unclassified, [], 'classify each new route: add it to the sweep (SWEPT) or to NOT_AUTHORITY with a reason');
    // And whether a delegated token may make what it makes (rule 5): the standing ones refuse it.
    const undeclared = [...seen].map((id) => id.replace(/:([A-Za-z_]+)/g, '{$1}')).filter((id) => !STANDING[id] && !NOT_STANDING.has(id));
    assert.deepEqual(undeclared, [], 'say in _standing.ts whether a delegated token may call each new route (STANDING or NOT_STANDING)');
    for (const id of [...SWEPT, ...NOT_AUTHORITY.keys()]) assert.ok(seen.has(id), `${id} is listed but no longer exists`);
  } finally {
    await t.close();
  }
});

/**
 * State-changing routes outside the admin API, each classified: what the sweep above drives, and why
 * the rest hand out no more than their caller holds.
 */
const OUTSIDE_ADMIN = new Map<string, string>([
  ['POST /mcp', 'swept above: what tools/list shows and what a call runs are within the caller (the routes’ own checks)'],
  ['DELETE /mcp', 'ends the caller’s own session'],
  [
    'POST /oauth/token',
    'every grant narrows to the subject and client (test/cell/oauth/scope.test.ts, token-exchange-property.test.ts); client tokens swept above',
  ],
  [
    'POST /oauth/register',
    'a self-registered client holds nothing until a principal consents, then no more than that principal: the test below',
  ],
  ['POST /oauth/device_authorization', 'starts a device flow; the approving session decides (device.test.ts)'],
  ['POST /oauth/introspect', 'reads a verdict'],
  ['POST /oauth/revoke', 'ends a token'],
  ['POST /oauth/login', 'a session of the user who proves the password'],
  ['POST /oauth/logout', 'ends a session'],
  ['POST /oauth/authorize', 'consent: the code carries the consenting principal’s scope ∩ the client’s (authorization-code.test.ts)'],
  ['POST /oauth/device', 'approval by the session’s principal, never a form field (device.test.ts)'],
  [
    'POST /api/public/v1/jobs/endpoints/:endpoint_id/invoke',
    'runs as its publisher allowed: required scopes within the caller (jobs/api.test.ts)',
  ],
]);

test('every state-changing route outside the admin API is swept or says why it hands out no more than its caller', async () => {
  const t = await inProcessCell();
  try {
    const seen = new Set<string>();
    for (const r of t.app.routes) {
      if (!['POST', 'PUT', 'PATCH', 'DELETE'].includes(r.method) || r.path.startsWith('/api/public/v1/admin/')) continue;
      seen.add(`${r.method} ${r.path}`);
    }
    assert.deepEqual(
      [...seen].filter((id) => !OUTSIDE_ADMIN.has(id)),
      [],
      'classify each new route outside the admin API in OUTSIDE_ADMIN, with why',
    );
    for (const id of OUTSIDE_ADMIN.keys()) assert.ok(seen.has(id), `${id} is listed but no longer exists`);
  } finally {
    await t.close();
  }
});

test('a client that registered itself holds nothing until a principal consents, then no more than that principal', async () => {
  const t = await inProcessCell({ config: { dynamicRegistration: true, rate: { capacity: 1e9, refillPerSecond: 1e9 } } });
  try {
    const reg = await t.request('POST', '/oauth/register', {
      body: {
        redirect_uris: ['http://127.0.0.1:9/cb'],
        token_endpoint_auth_method: 'client_secret_basic',
        grant_types: ['authorization_code'],
      },
    });
    assert.equal(reg.status, 201, reg.text);
    const auth = basic(reg.body.client_id, reg.body.client_secret);
    // No grant gives it a token on its own.
    for (const grant of ['client_credentials', 'urn:ietf:params:oauth:grant-type:device_code', 'refresh_token']) {
      const r = await form(t, '/oauth/token', { grant_type: grant, device_code: 'x', refresh_token: 'ort_x' }, auth);
      assert.equal(r.status, 400, `${grant}: ${r.text}`);
      assert.equal(r.body.error, 'unauthorized_client', grant);
    }
    const device = await form(t, '/oauth/device_authorization', {}, auth);
    assert.equal(device.body.error, 'unauthorized_client');
    const owner = await ok(t, 'POST', `${A}/sats`, { scope: ['agent_teams.read'] });
    const exchange = await form(
      t,
      '/oauth/token',
      {
        grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
        subject_token: owner.access_token,
        subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
        audience: `${t.modules.oauth.api.publicBase()}/api/public/v1`,
      },
      auth,
    );
    assert.equal(exchange.status, 400);
    assert.equal(exchange.body.error, 'unauthorized_client');
    // With consent (test/cell/oauth/mcp-clients.test.ts drives the pages): the code carries the consenting
    // principal's permissions ∩ the client's capped scope, never the client's own word.
    const client = await t.request('GET', `${A}/oauth/clients/${reg.body.client_id}`, { token: t.adminKey });
    assert.deepEqual(client.body.subject_id, null);
    assert.ok(contains({ permissions: t.core.config.registrationScope, envelope: UNBOUNDED }, { permissions: client.body.scope }).ok);
  } finally {
    await t.close();
  }
});
