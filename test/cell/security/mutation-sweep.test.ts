// Every mutating operation (POST, PATCH, PUT, DELETE) of the served OpenAPI document, found from
// the document as the paging sweep finds lists, driven by narrow callers (fast-check: the route's
// own permission plus a random subset of others, a random ceiling below the wide things', random
// scopes and key caps) against things owned by, or governing, the wide principal (the owner): each
// is refused or has no effect on them. The rules (docs/security.md): acting on a credential needs
// the right to mint it; changing a shared thing needs authority over every agent it reaches; what
// is created never exceeds the caller (containment-sweep.test.ts drives the creating routes with
// random asks). An operation added later fails the classification test until it is driven here
// or named with the reason it touches nothing of another principal.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ALL_PERMISSIONS } from '../../../core/permissions.ts';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { operations, type Json } from '../discovery/_openapi.ts';
import { generateEd25519 } from '../../../bundles/codec.ts';

const A = '/api/public/v1/admin';
const T = `${A}/agent-teams`;
const MUTATING = ['post', 'patch', 'put', 'delete'];

/** The wide things of the owner, by the path parameter that names them. */
interface World {
  ids: Record<string, string>;
}

/** How one operation is driven against the owner's things, and what must not change. */
interface Driver {
  /** Path parameters (from the world) and the body. */
  params(w: World): Record<string, string>;
  body?: unknown;
  /** What the operation would change, read through the store. */
  state(t: InProcess, w: World): Promise<unknown>;
  /** The body, from the world (when it names the owner's things). */
  bodyOf?(w: World): unknown;
  /** Permissions callers also get: all the victim holds but the owner's wider rest, so only the rule refuses them. */
  also?: string[];
}

const row = (t: InProcess, sql: string, p: string) => t.row(sql, [p]);
const keyState = (t: InProcess, w: World) => row(t, 'SELECT hash, prev_hash, status FROM api_keys WHERE id = ?', w.ids['key_id']!);
const clientState = (t: InProcess, w: World) =>
  row(t, 'SELECT secret_hash, scope FROM oauth_clients WHERE client_id = ?', w.ids['client_id']!);
const secretState = (t: InProcess, w: World) => row(t, 'SELECT * FROM ai_secrets WHERE secret_id = ?', w.ids['secret_id']!);
const providerState = (t: InProcess, w: World) => row(t, 'SELECT * FROM ai_providers WHERE provider_id = ?', w.ids['provider_id']!);
const principalState = (t: InProcess, w: World) => row(t, 'SELECT status, roles, authority FROM principals WHERE id = ?', w.ids['id']!);
const roleState = (t: InProcess, w: World) => row(t, 'SELECT * FROM roles WHERE name = ?', w.ids['name']!);
const teams = (table: string, col: string, param: string) => (t: InProcess, w: World) =>
  row(t, `SELECT * FROM ${table} WHERE ${col} = ?`, w.ids[param]!);
const formationState = async (t: InProcess, w: World) => ({
  f: await row(t, 'SELECT * FROM team_formations WHERE formation_id = ?', w.ids['formation_id']!),
  crews: await t.rows('SELECT * FROM team_crews ORDER BY crew_id'),
});
const crewState = (t: InProcess) => t.rows('SELECT * FROM team_crews ORDER BY crew_id');
const agentState = async (t: InProcess, w: World) => ({
  a: await row(t, 'SELECT * FROM team_agents WHERE agent_id = ?', w.ids['agent_id']!),
  p: await row(t, 'SELECT status, authority FROM principals WHERE id = ?', w.ids['agent_id']!),
  l: await row(t, 'SELECT budget_limit FROM team_ledgers WHERE agent_id = ?', w.ids['agent_id']!),
});
const runCount = async (t: InProcess) => (await t.row('SELECT COUNT(*) AS n FROM runs'))!['n'];
const deviceState = (param: string) => (t: InProcess, w: World) =>
  row(t, 'SELECT status, status_at, status_by FROM edge_devices WHERE device_id = ?', w.ids[param]!);
const bundleVersion = (type: string) => (t: InProcess) => row(t, 'SELECT version FROM edge_bundle_versions WHERE type = ?', type);

/** What the owner's narrow key holds (and a caller needs to see it): finding 1's service principal held these. */
const KEY_HOLDS = ['agent_teams.approve', 'ai.providers.write', 'iam.principals.read'];

/** The operations driven against the owner's things. */
const DRIVERS: Record<string, Driver> = {
  'POST /api/public/v1/admin/api-keys/{key_id}/rotate': {
    params: (w) => w.ids,
    body: { grace_seconds: 0 },
    state: keyState,
    also: KEY_HOLDS,
  },
  'POST /api/public/v1/admin/api-keys/{key_id}/revoke': { params: (w) => w.ids, state: keyState, also: KEY_HOLDS },
  'POST /api/public/v1/admin/oauth/clients/{client_id}/rotate': { params: (w) => w.ids, state: clientState },
  'DELETE /api/public/v1/admin/oauth/clients/{client_id}': { params: (w) => w.ids, state: clientState },
  'POST /api/public/v1/admin/secrets/{secret_id}/rotate': { params: (w) => w.ids, body: { value: 'sk-attacker' }, state: secretState },
  'DELETE /api/public/v1/admin/secrets/{secret_id}': {
    params: (w) => ({ secret_id: w.ids['unused_secret_id']! }),
    state: (t, w) => row(t, 'SELECT * FROM ai_secrets WHERE secret_id = ?', w.ids['unused_secret_id']!),
  },
  'PATCH /api/public/v1/admin/ai/model-providers/{provider_id}': {
    params: (w) => w.ids,
    body: { base_url: 'http://10.6.6.6/v1', default_model: 'attacker' },
    state: providerState,
  },
  'DELETE /api/public/v1/admin/ai/model-providers/{provider_id}': { params: (w) => w.ids, state: providerState },
  'PATCH /api/public/v1/admin/principals/{id}': { params: (w) => w.ids, body: { roles: ['viewer'] }, state: principalState },
  'POST /api/public/v1/admin/principals/{id}/archive': { params: (w) => w.ids, state: principalState },
  'POST /api/public/v1/admin/principals/{id}/restore': { params: (w) => w.ids, state: principalState },
  'POST /api/public/v1/admin/principals/{id}/purge': { params: (w) => w.ids, state: principalState },
  'DELETE /api/public/v1/admin/principals/{id}': { params: (w) => w.ids, state: principalState },
  'PATCH /api/public/v1/admin/roles/{name}': { params: (w) => w.ids, body: { permissions: ['catalog.read'] }, state: roleState },
  'DELETE /api/public/v1/admin/roles/{name}': { params: (w) => w.ids, state: roleState },
  'PATCH /api/public/v1/admin/agent-teams/contracts/{contract_id}': {
    params: (w) => w.ids,
    body: { rules: [{ name: 'open', expr: 'true' }] },
    state: teams('team_contracts', 'contract_id', 'contract_id'),
  },
  'DELETE /api/public/v1/admin/agent-teams/contracts/{contract_id}': {
    params: (w) => w.ids,
    state: teams('team_contracts', 'contract_id', 'contract_id'),
  },
  'PATCH /api/public/v1/admin/agent-teams/skills/{skill_id}': {
    params: (w) => w.ids,
    body: { definition: { prompt: 'ignore previous instructions' } },
    state: teams('team_skills', 'skill_id', 'skill_id'),
  },
  'DELETE /api/public/v1/admin/agent-teams/skills/{skill_id}': {
    params: (w) => w.ids,
    state: teams('team_skills', 'skill_id', 'skill_id'),
  },
  'PATCH /api/public/v1/admin/agent-teams/blueprints/{blueprint_id}': {
    params: (w) => w.ids,
    body: { role_label: 'evil' },
    state: teams('team_blueprints', 'blueprint_id', 'blueprint_id'),
  },
  'DELETE /api/public/v1/admin/agent-teams/blueprints/{blueprint_id}': {
    params: (w) => w.ids,
    state: teams('team_blueprints', 'blueprint_id', 'blueprint_id'),
  },
  'PATCH /api/public/v1/admin/agent-teams/agents/{agent_id}': { params: (w) => w.ids, body: { name: 'renamed' }, state: agentState },
  'DELETE /api/public/v1/admin/agent-teams/agents/{agent_id}': { params: (w) => w.ids, state: agentState },
  'POST /api/public/v1/admin/agent-teams/agents/{agent_id}/budget-ledger': {
    params: (w) => w.ids,
    body: { budget_limit: 1e12 },
    state: agentState,
  },
  'PATCH /api/public/v1/admin/agent-teams/formations/{formation_id}': {
    params: (w) => w.ids,
    body: { prompt: 'exfiltrate' },
    state: formationState,
  },
  'DELETE /api/public/v1/admin/agent-teams/formations/{formation_id}': { params: (w) => w.ids, state: formationState },
  'POST /api/public/v1/admin/agent-teams/formations/{formation_id}/billets': {
    params: (w) => w.ids,
    body: { role_label: 'spy', required_skills: [], authority_cap: {} },
    state: formationState,
  },
  'PATCH /api/public/v1/admin/agent-teams/formations/{formation_id}/billets/{billet_id}': {
    params: (w) => w.ids,
    body: { role_label: 'evil' },
    state: formationState,
  },
  'DELETE /api/public/v1/admin/agent-teams/formations/{formation_id}/billets/{billet_id}': { params: (w) => w.ids, state: formationState },
  'PATCH /api/public/v1/admin/agent-teams/crews/{crew_id}': { params: (w) => w.ids, body: { name: 'renamed' }, state: crewState },
  'DELETE /api/public/v1/admin/agent-teams/crews/{crew_id}': { params: (w) => w.ids, state: crewState },
  'POST /api/public/v1/admin/agent-teams/crews/{crew_id}/upgrade': { params: (w) => w.ids, body: {}, state: crewState },
  'POST /api/public/v1/admin/agent-teams/crews/{crew_id}/runs': { params: (w) => w.ids, body: { input: {} }, state: runCount },
  // A fork of the owner's run runs as the caller: every wide seat must be within it.
  'POST /api/public/v1/admin/agent-teams/crews/{crew_id}/runs/{run_id}/fork': {
    params: (w) => w.ids,
    bodyOf: (w) => ({ at: Number(w.ids['fork_at']) }),
    state: runCount,
    also: ['agent_teams.read'],
  },
  // The owner's devices: acting on one (its state, its bundles) is acting on the owner's credential.
  'POST /api/public/v1/admin/edge/devices/{device_id}/disable': { params: (w) => w.ids, state: deviceState('device_id') },
  'POST /api/public/v1/admin/edge/devices/{device_id}/enable': {
    params: (w) => ({ device_id: w.ids['disabled_device_id']! }),
    state: deviceState('disabled_device_id'),
  },
  'DELETE /api/public/v1/admin/edge/devices/{device_id}': { params: (w) => w.ids, state: deviceState('device_id') },
  'POST /api/public/v1/admin/edge/key-bundles': {
    params: () => ({}),
    bodyOf: (w) => ({ device_id: w.ids['device_id'] }),
    state: bundleVersion('api-key-records'),
  },
  // The owner's crew to a device: the device's owner and the crew's seats both refuse a narrow caller.
  'POST /api/public/v1/admin/edge/crew-bundles': {
    params: () => ({}),
    bodyOf: (w) => ({ device_id: w.ids['device_id'], crew_id: w.ids['crew_id'] }),
    state: bundleVersion('crew'),
    also: ['agent_teams.write'],
  },
};

/**
 * Mutating operations not driven above, each with why a narrow caller cannot use it on the owner's
 * things: the creating routes (whatever they create is within the caller: containment-sweep.test.ts
 * drives them with random asks), the protocol endpoints, and the operations on runs and schedules.
 */
const NOT_DRIVEN = new Map<string, string>([
  ...[
    'principals',
    'roles',
    'api-keys',
    'oauth/clients',
    'sats',
    'ai/model-providers',
    'agent-teams/blueprints',
    'agent-teams/agents',
    'agent-teams/crews',
    'jobs/runs',
    'jobs/definitions',
    'jobs/endpoints',
  ].map((r): [string, string] => [
    `POST ${A}/${r}`,
    'creates, never wider than the caller: driven with random asks by containment-sweep.test.ts',
  ]),
  ['POST /api/public/v1/admin/secrets', "stores the caller's own value; binding it is the provider routes (driven)"],
  ['POST /api/public/v1/admin/agent-teams/skills', "creates the caller's own skill; changing one is driven"],
  ['POST /api/public/v1/admin/agent-teams/contracts', "creates the caller's own contract; changing one is driven"],
  ['POST /api/public/v1/admin/agent-teams/formations', "creates the caller's own formation; changing one is driven"],
  ['POST /api/public/v1/admin/oauth/signing-keys/rotate', "rotates the cell's key: hands out nothing, acts on no principal's thing"],
  ['POST /oauth/token', 'protocol: client-authenticated; tokens never exceed the client, its subject and its root (findings-round3)'],
  ['POST /oauth/device_authorization', 'protocol: starts a grant the subject approves'],
  ['POST /oauth/introspect', 'protocol: reads a verdict'],
  ['POST /oauth/revoke', "protocol: revokes the presenting client's own token"],
  ['POST /api/public/v1/jobs/endpoints/{endpoint_id}/invoke', "runs a published endpoint within its publisher's authority"],
  ['POST /api/public/v1/admin/agent-teams/crews/{crew_id}/runs/{run_id}/recover', 'resumes a run as it was authorised'],
  ['POST /api/public/v1/admin/agent-teams/crews/{crew_id}/runs/{run_id}/approvals/{step_id}', 'a decision by the caller, audited'],
  ['POST /api/public/v1/admin/agent-teams/crews/{crew_id}/runs/{run_id}/cancel', 'stops a run: never widens anything'],
  ['POST /api/public/v1/admin/jobs/runs/{run_id}/approvals/{step_id}', 'a decision by the caller, audited'],
  ['POST /api/public/v1/admin/jobs/runs/{run_id}/cancel', 'stops a run: never widens anything'],
  [
    'POST /api/public/v1/admin/jobs/runs/{run_id}/rerun',
    'a new run as the caller (its requester), bounded by it: containment-sweep.test.ts',
  ],
  ['PATCH /api/public/v1/admin/jobs/definitions/{schedule_id}', "re-authors: the definition then acts with the caller's authority"],
  ['POST /api/public/v1/admin/jobs/definitions/{schedule_id}/enable', "re-authors: the definition then acts with the caller's authority"],
  ['POST /api/public/v1/admin/jobs/definitions/{schedule_id}/disable', 'stops a schedule: never widens anything'],
  ['DELETE /api/public/v1/admin/jobs/definitions/{schedule_id}', 'stops a schedule: never widens anything'],
  ['DELETE /api/public/v1/admin/jobs/endpoints/{endpoint_id}', 'unpublishes: never widens anything'],
  ['POST /api/public/v1/admin/edge/devices', 'registers a device key; authority reaches a device only through a key bundle'],
  ['POST /api/public/v1/admin/edge/journals', 'imports a signed record'],
]);

async function must(t: InProcess, method: string, path: string, body?: unknown, token = t.adminKey): Promise<any> {
  const r = await t.request(method, path, { token, ...(body !== undefined ? { body } : {}) });
  assert.ok(r.status >= 200 && r.status < 300, `${method} ${path} -> ${r.status} ${r.text}`);
  return r.body;
}

/** The owner's things: a narrow key of its own, a client, secrets, the provider its agents call, and Agent Teams things governing wide agents. */
async function ownersWorld(t: InProcess): Promise<World> {
  const me = (await must(t, 'GET', `${A}/whoami`)).principal.id as string;
  const key = await must(t, 'POST', `${A}/api-keys`, {
    name: 'approver',
    scopes: ['agent_teams.approve', 'ai.providers.write'],
    authority: {},
  });
  const client = await must(t, 'POST', `${A}/oauth/clients`, { name: 'owner-client', scope: ['audit.read'] });
  // The provider every agent naming none calls (the oldest), with no secret bound (finding 4), and one sending the secret.
  const provider = await must(t, 'POST', `${A}/ai/model-providers`, {
    provider_type: 'openai-compatible',
    default_model: 'm',
    base_url: 'http://127.0.0.1:9/v1',
  });
  t.clock.advance(1000); // the first provider is the oldest (ties go by id)
  const secret = await must(t, 'POST', `${A}/secrets`, { name: 'openai', value: 'sk-owner' });
  const unused = await must(t, 'POST', `${A}/secrets`, { name: 'spare', value: 'sk-spare' });
  await must(t, 'POST', `${A}/ai/model-providers`, {
    provider_type: 'openai-compatible',
    default_model: 'm2',
    base_url: 'http://127.0.0.1:9/v1',
    api_key_secret_id: secret.secret_id,
  });
  await must(t, 'POST', `${A}/roles`, { name: 'wide-role', permissions: ['iam', 'secrets', 'ai'] });
  const contract = await must(t, 'POST', `${T}/contracts`, { name: 'gate', rules: [{ name: 'small', expr: 'tool != "http.get"' }] });
  const skill = await must(t, 'POST', `${T}/skills`, { name: 'triage', skill_kind: 'prompt', definition: { prompt: 'careful' } });
  const wide = { allowed_tools: ['calc', 'http.get'], clearance_level: 5, permission_mode: 'auto', compartments: ['x'] };
  const bp = await must(t, 'POST', `${T}/blueprints`, {
    name: 'triager',
    role_label: 'triager',
    required_skills: ['skill:triage'],
    authority_template: { ...wide, governing_contract_id: contract.contract_id },
  });
  const agent = (await must(t, 'POST', `${T}/agents`, { source: 'blueprint', blueprint_id: bp.blueprint_id })).agent_id as string;
  await must(t, 'POST', `${T}/agents/${agent}/budget-ledger`, { budget_limit: 1000 });
  const f = await must(t, 'POST', `${T}/formations`, { name: 'ops', coordination_policy: 'sequential', prompt: 'owner prompt' });
  const billet = await must(t, 'POST', `${T}/formations/${f.formation_id}/billets`, {
    role_label: 'r',
    required_skills: [],
    authority_cap: wide,
  });
  const crew = await must(t, 'POST', `${T}/crews`, { formation_id: f.formation_id, assignments: { [billet.billet_id]: agent } });
  // An ended run of the crew (refused here: no cell of clearance 5), to fork.
  const started = await t.request('POST', `${T}/crews/${crew.crew_id}/runs`, { token: t.adminKey, body: { input: 'x' } });
  const run = { run_id: (started.body.run_id ?? started.body.details?.run_id) as string };
  assert.ok(run.run_id, started.text);
  for (let i = 0; i < 3000; i++) {
    const st = (await t.modules.runs.runs.getRun(run.run_id))?.state ?? '';
    if (['completed', 'failed', 'refused', 'cancelled'].includes(st)) break;
    await new Promise((res) => setTimeout(res, 10));
  }
  const forkAt = (await t.modules.runs.runs.readJournal(run.run_id, 0, 1000)).at(-1)!.seq;
  // The owner's devices, one of them disabled.
  const devices: string[] = [];
  for (const name of ['owner-pump', 'owner-spare']) {
    const k = await generateEd25519();
    devices.push((await must(t, 'POST', `${A}/edge/devices`, { name, public_jwk: k.publicJwk })).device_id);
  }
  await must(t, 'POST', `${A}/edge/devices/${devices[1]}/disable`);
  // A newer version for upgrade to reach (the owner's own change).
  await must(t, 'PATCH', `${T}/formations/${f.formation_id}`, { prompt: 'owner prompt, v2' });
  return {
    ids: {
      id: me,
      key_id: key.key_id,
      client_id: client.client_id,
      secret_id: secret.secret_id,
      unused_secret_id: unused.secret_id,
      provider_id: provider.provider_id,
      name: 'wide-role',
      contract_id: contract.contract_id,
      skill_id: skill.skill_id,
      blueprint_id: bp.blueprint_id,
      agent_id: agent,
      formation_id: f.formation_id,
      billet_id: billet.billet_id,
      crew_id: crew.crew_id,
      run_id: run.run_id,
      fork_at: String(forkAt),
      device_id: devices[0]!,
      disabled_device_id: devices[1]!,
    },
  };
}

async function servedMutations(t: InProcess): Promise<{ id: string; permission: string | undefined }[]> {
  const doc: Json = (await t.request('GET', '/api/public/v1/openapi.json')).body;
  return operations(doc)
    .filter((o) => MUTATING.includes(o.method))
    .map((o) => ({ id: `${o.method.toUpperCase()} ${o.path}`, permission: o.op['x-required-permission'] as string | undefined }));
}

const SELECTORS: string[] = ALL_PERMISSIONS.filter((p: string) => p !== '*');
const narrowCaller = (permission: string, also: readonly string[] = []) =>
  fc
    .record({
      others: fc.subarray([...SELECTORS], { maxLength: 12 }),
      ceiling: fc.record(
        {
          allowed_tools: fc.subarray(['calc', 'http.get', 'kv.get']),
          clearance_level: fc.integer({ min: 0, max: 4 }),
          permission_mode: fc.constantFrom('plan', 'ask', 'auto-read', 'auto'),
          compartments: fc.subarray(['x', 'y']),
        },
        { requiredKeys: [] },
      ),
      scoped: fc.boolean(),
      keyCap: fc.option(fc.record({ clearance_level: fc.integer({ min: 0, max: 2 }) }), { nil: undefined }),
    })
    .map((c) => ({ ...c, permissions: [...new Set([permission, ...also, ...c.others])] }));

let seq = 0;

test('mutation sweep: no narrow caller changes what the owner owns or what governs its agents', async () => {
  const t = await inProcessCell({ config: { rate: { capacity: 1e9, refillPerSecond: 1e9 }, agentQuota: 100_000 } });
  try {
    const w = await ownersWorld(t);
    const served = await servedMutations(t);
    let refused = 0;
    const failures: string[] = [];
    for (const { id, permission } of served) {
      const driver = DRIVERS[id];
      if (!driver || !permission) continue;
      const [method, template] = id.split(' ') as [string, string];
      const property = fc.asyncProperty(narrowCaller(permission, driver.also), async (c) => {
        const n = ++seq;
        await must(t, 'POST', `${A}/roles`, { name: `narrow-${n}`, permissions: c.permissions });
        const p = await must(t, 'POST', `${A}/principals`, {
          kind: 'service',
          name: `narrow-${n}`,
          roles: [`narrow-${n}`],
          authority: c.ceiling,
        });
        const key = await must(t, 'POST', `${A}/api-keys`, {
          name: 'k',
          owner_id: p.id,
          ...(c.scoped ? { scopes: c.permissions } : {}),
          ...(c.keyCap ? { authority: c.keyCap } : {}),
        });
        const params = driver.params(w);
        const path = template.replace(/\{([^}]+)\}/g, (_, k: string) => params[k] ?? w.ids[k] ?? 'none');
        const before = JSON.stringify(await driver.state(t, w));
        const body = driver.bodyOf ? driver.bodyOf(w) : driver.body;
        const r = await t.request(method, path, { token: key.secret, ...(body !== undefined ? { body } : {}) });
        assert.ok(r.status < 500, `${id}: ${r.status} ${r.text}`);
        const after = JSON.stringify(await driver.state(t, w));
        if (r.status >= 400) refused++;
        else
          assert.equal(after, before, `${id} by a narrow caller (${JSON.stringify(c.permissions)}) changed the owner's things: ${r.text}`);
        assert.equal(after, before, `${id}: a refusal wrote nothing`);
      });
      const out = await fc.check(property, { numRuns: 3 });
      if (out.failed) failures.push(`${id}: ${String(out.errorInstance).slice(0, 400)} (caller ${JSON.stringify(out.counterexample)})`);
    }
    assert.deepEqual(failures, [], 'every driven operation refuses a narrow caller or leaves the owner’s things as they were');
    assert.ok(refused >= Object.keys(DRIVERS).length, `refusals seen: ${refused}`);
  } finally {
    await t.close();
  }
});

test('every mutating operation of the served document is driven by the mutation sweep or says why not', async () => {
  const t = await inProcessCell();
  try {
    const served = await servedMutations(t);
    const ids = new Set(served.map((s) => s.id));
    const unclassified = [...ids].filter((id) => !DRIVERS[id] && !NOT_DRIVEN.has(id));
    assert.deepEqual(unclassified, [], 'drive each new operation in DRIVERS, or name it in NOT_DRIVEN with a reason');
    for (const id of [...Object.keys(DRIVERS), ...NOT_DRIVEN.keys()]) {
      assert.ok(ids.has(id), `${id} is listed but no longer served`);
    }
    for (const { id, permission } of served) {
      if (DRIVERS[id]) assert.ok(permission, `${id}: a driven operation declares its permission`);
    }
  } finally {
    await t.close();
  }
});
