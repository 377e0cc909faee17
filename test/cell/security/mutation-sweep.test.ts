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
import { startMcpServer, type McpFixture } from '../../fixtures/mcp-server.ts';
import { basic, form } from '../../helpers/oauth.ts';
import { NOT_STANDING, STANDING } from './_standing.ts';
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
  /** Several calls per caller (path parameters and body each), instead of `params` and the body. */
  cases?(w: World): { params?: Record<string, string>; body?: unknown }[];
  /** What an accepted call must satisfy besides leaving the owner's things as they were. */
  accepted?(t: InProcess, w: World, r: { status: number; body: any }): Promise<void>;
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
const sourceState = async (t: InProcess, w: World) => ({
  s: await row(t, 'SELECT * FROM tool_sources WHERE source_id = ?', w.ids['source_id']!),
  p: await t.rows('SELECT * FROM tool_pins WHERE source_id = ? ORDER BY tool', [w.ids['source_id']!]),
});
const definitionState = (t: InProcess, w: World) => row(t, 'SELECT * FROM job_definitions WHERE schedule_id = ?', w.ids['schedule_id']!);

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
  // A source whose tool the owner's wide agent is granted: a change, a re-pin or a delete reaches it.
  'PATCH /api/public/v1/admin/catalog/sources/{source_id}': {
    params: (w) => w.ids,
    body: { definition_max_age_ms: 3_600_000 },
    state: sourceState,
  },
  'DELETE /api/public/v1/admin/catalog/sources/{source_id}': { params: (w) => w.ids, state: sourceState },
  'POST /api/public/v1/admin/catalog/sources/{source_id}/pins': {
    params: (w) => w.ids,
    bodyOf: (w) => ({ pins: { lookup: w.ids['lookup_pin'] } }),
    state: sourceState,
  },
  // A fork runs as the caller (every wide seat within it), never an older formation version than the
  // crew runs now (the owner's run pinned one the crew moved past), and reuses no approval given for the
  // owner's run: the two-person approval before the seat is asked again (docs/security.md).
  'POST /api/public/v1/admin/agent-teams/crews/{crew_id}/runs/{run_id}/fork': {
    params: (w) => ({ crew_id: w.ids['pay_crew']!, run_id: w.ids['pay_run']! }),
    cases: (w) => {
      const at = Number(w.ids['pay_at']);
      return [
        { body: { at } },
        { body: { at, formation_version: Number(w.ids['pay_old']) } },
        { body: { at, formation_version: Number(w.ids['pay_new']) } },
        { params: { crew_id: w.ids['crew_id']!, run_id: w.ids['run_id']! }, body: { at: Number(w.ids['fork_at']) } },
      ];
    },
    state: (t, w) => Promise.all([runJournal(t, w.ids['pay_run']!), runJournal(t, w.ids['run_id']!), crewState(t)]),
    accepted: async (t, w, r) => {
      assert.equal(r.body.crew_id, w.ids['pay_crew'], 'only the crew within the caller forks');
      assert.ok(r.body.formation_version >= Number(w.ids['pay_new']), `a fork ran superseded version ${r.body.formation_version}`);
      const forked = (await t.modules.runs.runs.readJournal(r.body.run_id as string))[0]!;
      assert.deepEqual(forked.data?.['approvals_asked_again'], [w.ids['pay_step']], "the owner's approval is not the forker's");
    },
    also: ['agent_teams.read', 'system.orchestration.admin.read'],
  },
  // Shared job things follow the shared-things rule: what acts as the owner (a definition acts as its
  // author, an endpoint as its publisher, a run as its requester) is changed, stopped or cancelled only by
  // who manages the owner.
  'PATCH /api/public/v1/admin/jobs/definitions/{schedule_id}': {
    params: (w) => w.ids,
    body: { cron: '0 5 * * *' },
    state: definitionState,
  },
  'POST /api/public/v1/admin/jobs/definitions/{schedule_id}/enable': {
    params: (w) => ({ schedule_id: w.ids['disabled_schedule_id']! }),
    state: (t, w) => row(t, 'SELECT * FROM job_definitions WHERE schedule_id = ?', w.ids['disabled_schedule_id']!),
  },
  'POST /api/public/v1/admin/jobs/definitions/{schedule_id}/disable': { params: (w) => w.ids, state: definitionState },
  // Running the owner's definition now is a run of the caller's: it changes nothing of the definition.
  'POST /api/public/v1/admin/jobs/definitions/{schedule_id}/run': {
    params: (w) => w.ids,
    state: definitionState,
    accepted: async (t, w, r) => {
      assert.notEqual(r.body.requester, w.ids['id'], "the run is the caller's, never the author's");
      assert.equal((await t.modules.runs.runs.getRun(r.body.run_id as string))?.requester, r.body.requester);
    },
  },
  'DELETE /api/public/v1/admin/jobs/definitions/{schedule_id}': { params: (w) => w.ids, state: definitionState },
  'DELETE /api/public/v1/admin/jobs/endpoints/{endpoint_id}': {
    params: (w) => w.ids,
    state: (t, w) => row(t, 'SELECT * FROM job_endpoints WHERE endpoint_id = ?', w.ids['endpoint_id']!),
  },
  'POST /api/public/v1/admin/jobs/runs/{run_id}/cancel': {
    params: (w) => ({ run_id: w.ids['waiting_run']! }),
    state: (t, w) => runJournal(t, w.ids['waiting_run']!),
  },
  'POST /api/public/v1/admin/agent-teams/crews/{crew_id}/runs/{run_id}/cancel': {
    params: (w) => ({ crew_id: w.ids['pay_crew']!, run_id: w.ids['waiting_run']! }),
    state: (t, w) => runJournal(t, w.ids['waiting_run']!),
  },
  // The owner's devices: acting on one (its state, its bundles) is acting on the owner's credential.
  'POST /api/public/v1/admin/edge/devices/{device_id}/disable': { params: (w) => w.ids, state: deviceState('device_id') },
  'POST /api/public/v1/admin/edge/devices/{device_id}/enable': {
    params: (w) => ({ device_id: w.ids['disabled_device_id']! }),
    state: deviceState('disabled_device_id'),
  },
  'DELETE /api/public/v1/admin/edge/devices/{device_id}': { params: (w) => w.ids, state: deviceState('device_id') },
  'POST /api/public/v1/admin/edge/devices/{device_id}/budget-release': {
    params: (w) => w.ids,
    state: async (t, w) => ({
      holds: await t.rows('SELECT * FROM team_ledger_holds WHERE device_id = ?', [w.ids['device_id']!]),
      ledger: await row(t, 'SELECT held FROM team_ledgers WHERE agent_id = ?', w.ids['agent_id']!),
    }),
  },
  'POST /api/public/v1/admin/edge/key-bundles': {
    params: () => ({}),
    bodyOf: (w) => ({ device_id: w.ids['device_id'] }),
    state: bundleVersion('api-key-records'),
  },
  // Exporting the owner's crew to the owner's device: the device's registrant and the crew's seats (the right to
  // run it) both refuse a narrow caller.
  'POST /api/public/v1/admin/edge/crew-bundles': {
    params: () => ({}),
    bodyOf: (w) => ({ device_id: w.ids['device_id'], crew_id: w.ids['crew_id'] }),
    state: bundleVersion('crew'),
    also: ['agent_teams.write'],
  },
};

/** A run's journal as stored, and its state (the owner's run: a fork copies from it, never into it). */
const runJournal = async (t: InProcess, runId: string) => ({
  state: (await t.modules.runs.runs.getRun(runId))?.state,
  journal: (await t.modules.runs.runs.readJournal(runId)).map((r) => r.seq),
});

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
    'catalog/sources',
  ].map((r): [string, string] => [
    `POST ${A}/${r}`,
    'creates, never wider than the caller: driven with random asks by containment-sweep.test.ts',
  ]),
  ['POST /api/public/v1/admin/secrets', "stores the caller's own value; binding it is the provider routes (driven)"],
  ['POST /api/public/v1/admin/agent-teams/skills', "creates the caller's own skill; changing one is driven"],
  ['POST /api/public/v1/admin/agent-teams/contracts', "creates the caller's own contract; changing one is driven"],
  ['POST /api/public/v1/admin/agent-teams/formations', "creates the caller's own formation; changing one is driven"],
  ['POST /api/public/v1/admin/oauth/signing-keys/rotate', "rotates the cell's key: hands out nothing, acts on no principal's thing"],
  [
    'POST /oauth/token',
    'protocol: tokens never exceed the client, its subject and its root (findings-round3); its token exchange grant, which makes a token for another principal, is driven by the delegated-token pass below',
  ],
  ['POST /oauth/device_authorization', 'protocol: starts a grant the subject approves'],
  ['POST /oauth/introspect', 'protocol: reads a verdict'],
  ['POST /oauth/revoke', "protocol: revokes the presenting client's own token"],
  [
    'POST /oauth/register',
    'protocol (RFC 7591), no credential: a registered client holds nothing until a principal consents, then no more than that principal (driven by containment-sweep.test.ts and oauth/mcp-clients.test.ts)',
  ],
  ['POST /api/public/v1/jobs/endpoints/{endpoint_id}/invoke', "runs a published endpoint within its publisher's authority"],
  ['POST /api/public/v1/admin/agent-teams/crews/{crew_id}/runs/{run_id}/recover', 'resumes a run as it was authorised'],
  [
    'POST /api/public/v1/admin/agent-teams/crews/{crew_id}/runs/{run_id}/approvals/{step_id}',
    'a decision counts only under the approval rule (core/engine/approval-rule.ts): driven by the approval pass below (exchange, fork, rerun, retry) and the delegated-token pass',
  ],
  [
    'POST /api/public/v1/admin/jobs/runs/{run_id}/approvals/{step_id}',
    "a decision counts only under the approval rule (core/engine/approval-rule.ts): driven by the approval pass below (an agent job run's rerun)",
  ],
  [
    'POST /api/public/v1/admin/jobs/runs/{run_id}/rerun',
    'a new run as the caller (its requester), bounded by it: containment-sweep.test.ts',
  ],
  [
    'POST /api/public/v1/admin/agent-teams/crews/{crew_id}/runs/{run_id}/outcomes/{step_id}',
    "lets a run act again as it was authorised, only for a caller holding all of its seats' authority: containment-sweep.test.ts",
  ],
  [
    'POST /api/public/v1/admin/jobs/runs/{run_id}/outcomes/{step_id}',
    "lets a run act again as it was authorised, only for a caller holding the run's authority: containment-sweep.test.ts",
  ],
  ['POST /api/public/v1/admin/edge/devices', 'registers a device key; authority reaches a device only through a key bundle'],
  ['POST /api/public/v1/admin/edge/journals', 'imports a signed record'],
]);

async function must(t: InProcess, method: string, path: string, body?: unknown, token = t.adminKey): Promise<any> {
  const r = await t.request(method, path, { token, ...(body !== undefined ? { body } : {}) });
  assert.ok(r.status >= 200 && r.status < 300, `${method} ${path} -> ${r.status} ${r.text}`);
  return r.body;
}

/** The owner's things: a narrow key of its own, a client, secrets, the provider its agents call, and Agent Teams things governing wide agents. */
async function ownersWorld(t: InProcess, mcp: McpFixture): Promise<World> {
  const me = (await must(t, 'GET', `${A}/whoami`)).principal.id as string;
  const ownerKeyId = (await must(t, 'GET', `${A}/api-keys?limit=1`)).keys[0].key_id as string;
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
  // A catalog source whose tool the wide agent is granted.
  const source = await must(t, 'POST', `${A}/catalog/sources`, { name: 'crm', url: mcp.url });
  const lookupPin = (source.tools as { tool: string; pin: string }[]).find((x) => x.tool === 'lookup')!.pin;
  const wide = { allowed_tools: ['calc', 'http.get', 'mcp.crm.lookup'], clearance_level: 5, permission_mode: 'auto', compartments: ['x'] };
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
  // A budget the owner's device holds of the wide agent, its bundle expired: releasing it is acting on the device.
  await must(t, 'POST', `${A}/edge/crew-bundles`, {
    device_id: devices[0],
    crew_id: crew.crew_id,
    ttl_seconds: 1,
    budgets: { [agent]: 100 },
  });
  t.clock.advance(1000);
  // A newer version for upgrade to reach (the owner's own change).
  await must(t, 'PATCH', `${T}/formations/${f.formation_id}`, { prompt: 'owner prompt, v2' });
  const pay = await payWorld(t);
  // What acts as the owner later: a schedule (and a disabled one), a published endpoint (its devices are above).
  const job = { job_type: 'compute', workspace_id: 'w1', spec: { code: 'return 1' }, cron: '0 3 * * *' };
  const def = await must(t, 'POST', `${A}/jobs/definitions`, { name: 'owners-nightly', ...job });
  const off = await must(t, 'POST', `${A}/jobs/definitions`, { name: 'owners-paused', ...job, enabled: false });
  const ep = await must(t, 'POST', `${A}/jobs/endpoints`, {
    name: 'owners-ep',
    job_type: 'compute',
    workspace_id: 'w1',
    spec: { code: 'return 1' },
  });
  return {
    ids: {
      ...pay,
      owner_key_id: ownerKeyId,
      schedule_id: def.schedule_id,
      disabled_schedule_id: off.schedule_id,
      endpoint_id: ep.endpoint_id,
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
      source_id: source.source_id,
      lookup_pin: lookupPin,
    },
  };
}

/** Seats any caller holds: no tools, clearance 0, plan mode (so a fork of their crew is within narrow callers). */
const SMALL_SEAT = { allowed_tools: [], clearance_level: 0, permission_mode: 'plan' };

/**
 * The owner's crew whose runs ask a two-person approval before their seat acts, on a provider that
 * refuses at once: a run of the owner approved by two others that then failed (to fork: the approval is
 * in its reused prefix), pinned to a version the crew moved past; and a run waiting on its approval.
 */
async function payWorld(t: InProcess): Promise<Record<string, string>> {
  const provider = await must(t, 'POST', `${A}/ai/model-providers`, {
    provider_type: 'openai-compatible',
    default_model: 'm',
    base_url: 'http://127.0.0.1:9/v1',
    max_retries: 0,
  });
  const f = await must(t, 'POST', `${T}/formations`, {
    name: 'pay',
    coordination_policy: 'sequential',
    pre: [{ kind: 'human_approval', config: { rule: 'two_person', timeout_ms: 3_600_000, prompt: 'pay?' } }],
  });
  const billet = await must(t, 'POST', `${T}/formations/${f.formation_id}/billets`, {
    role_label: 'payer',
    required_skills: [],
    authority_cap: SMALL_SEAT,
  });
  const agent = await must(t, 'POST', `${T}/agents`, {
    source: 'scratch',
    role_label: 'payer',
    provider_id: provider.provider_id,
    authority_template: SMALL_SEAT,
  });
  await must(t, 'POST', `${T}/agents/${agent.agent_id}/budget-ledger`, { budget_limit: 1000 });
  const crew = await must(t, 'POST', `${T}/crews`, { formation_id: f.formation_id, assignments: { [billet.billet_id]: agent.agent_id } });
  const run = (await must(t, 'POST', `${T}/crews/${crew.crew_id}/runs`, { input: 'pay 10' })).run_id as string;
  await settledRun(t, run, 'waiting');
  const step = (await must(t, 'GET', `${T}/crews/${crew.crew_id}/runs/${run}`)).pending_approvals[0].step_id as string;
  for (const name of ['approver-1', 'approver-2']) {
    await must(t, 'POST', `${A}/roles`, { name: `${name}-role`, permissions: ['agent_teams.approve'] });
    const p = await must(t, 'POST', `${A}/principals`, { kind: 'service', name, roles: [`${name}-role`] });
    const k = await must(t, 'POST', `${A}/api-keys`, { name, owner_id: p.id });
    await must(
      t,
      'POST',
      `${T}/crews/${crew.crew_id}/runs/${run}/approvals/${encodeURIComponent(step)}`,
      { decision: 'approve' },
      k.secret,
    );
  }
  await settledRun(t, run, 'failed');
  const at = (await t.modules.runs.runs.readJournal(run)).at(-1)!.seq;
  const old = (await must(t, 'GET', `${T}/crews/${crew.crew_id}`)).formation_version as number;
  await must(t, 'PATCH', `${T}/formations/${f.formation_id}`, { prompt: 'pay carefully' });
  const upgraded = await must(t, 'POST', `${T}/crews/${crew.crew_id}/upgrade`, {});
  const waiting = (await must(t, 'POST', `${T}/crews/${crew.crew_id}/runs`, { input: 'pay 20' })).run_id as string;
  await settledRun(t, waiting, 'waiting');
  return {
    pay_crew: crew.crew_id,
    pay_run: run,
    pay_at: String(at),
    pay_step: step,
    pay_old: String(old),
    pay_new: String(upgraded.formation_version),
    waiting_run: waiting,
  };
}

/** Waits until the run is in `state` and no drive of it is under way. */
async function settledRun(t: InProcess, runId: string, state: string): Promise<void> {
  for (let i = 0; i < 3000; i++) {
    if ((await t.modules.runs.runs.getRun(runId))?.state === state) {
      await t.modules.teams.teams.settled(runId);
      return;
    }
    await new Promise((res) => setTimeout(res, 10));
  }
  assert.fail(`run ${runId} is ${(await t.modules.runs.runs.getRun(runId))?.state}, not ${state}`);
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
  const t = await inProcessCell({
    config: { rate: { capacity: 1e9, refillPerSecond: 1e9 }, agentQuota: 100_000, egressAllowPrivate: ['127.0.0.1/32'] },
  });
  const mcp = await startMcpServer();
  try {
    const w = await ownersWorld(t, mcp);
    const served = await servedMutations(t);
    let refused = 0;
    const accepted = new Map<string, number>();
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
        const cases = driver.cases?.(w) ?? [{ params: driver.params(w), body: driver.bodyOf ? driver.bodyOf(w) : driver.body }];
        for (const one of cases) {
          const params = { ...driver.params(w), ...one.params };
          const path = template.replace(/\{([^}]+)\}/g, (_, k: string) => params[k] ?? w.ids[k] ?? 'none');
          const before: string = JSON.stringify(await driver.state(t, w));
          const body = one.body;
          const r = await t.request(method, path, { token: key.secret, ...(body !== undefined ? { body } : {}) });
          assert.ok(r.status < 500, `${id}: ${r.status} ${r.text}`);
          const after: string = JSON.stringify(await driver.state(t, w));
          if (r.status >= 400) refused++;
          else {
            accepted.set(id, (accepted.get(id) ?? 0) + 1);
            assert.equal(
              after,
              before,
              `${id} by a narrow caller (${JSON.stringify(c.permissions)}) changed the owner's things: ${r.text}`,
            );
            await driver.accepted?.(t, w, r);
          }
          assert.equal(after, before, `${id}: a refusal wrote nothing`);
        }
      });
      const out = await fc.check(property, { numRuns: 3 });
      if (out.failed) failures.push(`${id}: ${String(out.errorInstance).slice(0, 400)} (caller ${JSON.stringify(out.counterexample)})`);
    }
    assert.deepEqual(failures, [], 'every driven operation refuses a narrow caller or leaves the owner’s things as they were');
    assert.ok(refused >= Object.keys(DRIVERS).length, `refusals seen: ${refused}`);
    // The fork's checks of what it may not reuse ran: callers able to fork did.
    assert.ok(
      (accepted.get('POST /api/public/v1/admin/agent-teams/crews/{crew_id}/runs/{run_id}/fork') ?? 0) > 0,
      'some fork was accepted',
    );
  } finally {
    await t.close();
    await mcp.close();
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

// ---------------------------------------------------------------- the delegated-token pass

test('delegated-token pass: every mutating operation tried with an exchanged token; what is standing is refused', async () => {
  const t = await inProcessCell({
    config: { rate: { capacity: 1e9, refillPerSecond: 1e9 }, agentQuota: 100_000, egressAllowPrivate: ['127.0.0.1/32'] },
  });
  const mcp = await startMcpServer();
  try {
    const w = await ownersWorld(t, mcp);
    const spare = await generateEd25519();
    const other = await must(t, 'POST', `${A}/principals`, { kind: 'service', name: 'other', roles: ['viewer'] });
    const archived = await must(t, 'POST', `${A}/principals`, { kind: 'service', name: 'archived', roles: ['viewer'] });
    await must(t, 'POST', `${A}/principals/${archived.id}/archive`);
    w.ids['spare_jwk'] = JSON.stringify(spare.publicJwk);
    w.ids['other_id'] = other.id;
    w.ids['archived_id'] = archived.id;
    // The owner's token, exchanged by a delegate holding everything: sub = the owner, act = the delegate.
    await must(t, 'POST', `${A}/roles`, { name: 'delegate-all', permissions: ['*'] });
    const d = await must(t, 'POST', `${A}/principals`, { kind: 'service', name: 'delegate', roles: ['delegate-all'] });
    const dk = await must(t, 'POST', `${A}/api-keys`, { name: 'delegate', owner_id: d.id });
    const ownerKeyId = w.ids['owner_key_id']!;
    const st = await form(t, '/oauth/token', { grant_type: 'client_credentials' }, basic(ownerKeyId, t.adminKey));
    assert.equal(st.status, 200, st.text);
    const exchange = (subject: string, fields: Record<string, string> = {}) =>
      form(
        t,
        '/oauth/token',
        {
          grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
          subject_token: subject,
          subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
          audience: `${t.modules.oauth.api.publicBase()}/api/public/v1`,
          ...fields,
        },
        basic(dk.key_id, dk.secret),
      );
    const x = await exchange(st.body.access_token);
    assert.equal(x.status, 200, x.text);
    const token = x.body.access_token as string;

    // The exchange grant itself: a token meant for a device is exchanged only for that device.
    const forDevice = await form(
      t,
      '/oauth/token',
      { grant_type: 'client_credentials', resource: `edge:${w.ids['device_id']}` },
      basic(ownerKeyId, t.adminKey),
    );
    assert.equal((await exchange(forDevice.body.access_token)).body.error, 'invalid_target');
    // A published endpoint's run (the invoke route and MCP's endpoint tools share it) records the chain too.
    const invoked = await t.request('POST', `/api/public/v1/jobs/endpoints/${w.ids['endpoint_id']}/invoke`, { token, body: {} });
    assert.ok(invoked.status < 300, invoked.text);
    const invokedRun = await t.modules.runs.runs.getRun(invoked.body.run_id);
    assert.deepEqual(invokedRun?.flags?.['requester_actors'], [d.id]);

    const served = await servedMutations(t);
    const failures: string[] = [];
    let refused = 0;
    // The standing ones first: the others, tried after them, may remove what they would act on.
    const ordered = [...served.filter((o) => STANDING[o.id]), ...served.filter((o) => !STANDING[o.id])];
    for (const { id } of ordered) {
      const [method, template] = id.split(' ') as [string, string];
      const call = STANDING[id]?.(w) ?? { body: {} };
      const params = { ...w.ids, ...call.params };
      const path = template.replace(/\{([^}]+)\}/g, (_, k: string) => params[k] ?? 'none');
      const r = await t.request(method, path, { token, ...(call.body !== undefined ? { body: call.body } : {}) });
      if (r.status >= 500) failures.push(`${id}: ${r.status} ${r.text}`);
      if (!STANDING[id]) continue;
      if (r.status !== 403 || r.body?.details?.reason !== 'delegated_credential')
        failures.push(`${id}: ${r.status} ${r.text.slice(0, 300)}`);
      else refused++;
    }
    assert.deepEqual(failures, [], 'every standing operation refuses a delegated token, and none answers 5xx');
    assert.equal(refused, Object.keys(STANDING).length);
    const audited = await t.rows("SELECT details FROM audit WHERE outcome = 'refused' AND details LIKE '%delegated_credential%'");
    assert.ok(audited.length >= refused, 'each refusal is audited');
    // A run it starts is its chain's: the delegate never approves the owner's two-person step through it.
    const run = await t.request('POST', `${T}/crews/${w.ids['pay_crew']}/runs`, { token, body: { input: 'pay 30' } });
    assert.equal(run.status, 201, run.text);
    assert.deepEqual(run.body.flags.requester_actors, [d.id]);
  } finally {
    await t.close();
    await mcp.close();
  }
});

test('every mutating operation says whether a delegated token may make it (standing or not)', async () => {
  const t = await inProcessCell();
  try {
    const ids = new Set((await servedMutations(t)).map((s) => s.id));
    const unclassified = [...ids].filter((id) => !STANDING[id] && !NOT_STANDING.has(id));
    assert.deepEqual(unclassified, [], 'name each new operation in STANDING (refused to delegated tokens) or NOT_STANDING with a reason');
    for (const id of [...Object.keys(STANDING), ...NOT_STANDING.keys()]) assert.ok(ids.has(id), `${id} is listed but no longer served`);
    for (const id of Object.keys(STANDING)) assert.ok(!NOT_STANDING.has(id), `${id} is listed twice`);
  } finally {
    await t.close();
  }
});

// ---------------------------------------------------------------- the approval pass

/**
 * Every way to reach a two-person step (docs/security.md, "An approval is consent to exactly what was
 * approved"): through an exchanged token (the requester acting as another; a run requested through
 * one), a fork (by another principal; with a replaced input), a rerun of an agent job run (by another
 * principal), and a retry (the run recovered and driven again). Each time, no principal of the
 * requester's chain counts, and an approval given for another run or input is asked again.
 */
test('approval pass: exchange, fork, rerun and retry never let the requester’s chain approve, nor reuse another’s approval', async () => {
  const { startOpenAIServer } = await import('../../fixtures/openai-server.ts');
  const { provider } = await import('../../helpers/teams.ts');
  const t = await inProcessCell({ config: { rate: { capacity: 1e9, refillPerSecond: 1e9 } } });
  const ai = await startOpenAIServer({ apiKey: 'sk-fake' });
  try {
    let failing = false;
    ai.setResponder(() => (failing ? { status: 500 } : { content: 'paid' }));
    await provider({ request: t.request, token: t.adminKey }, ai);
    const seat = { allowed_tools: ['calc'], clearance_level: 0, permission_mode: 'auto' };
    const f = await must(t, 'POST', `${T}/formations`, {
      name: 'pay',
      coordination_policy: 'sequential',
      pre: [{ kind: 'human_approval', config: { rule: 'two_person', timeout_ms: 3_600_000 } }],
    });
    const billet = await must(t, 'POST', `${T}/formations/${f.formation_id}/billets`, {
      role_label: 'payer',
      required_skills: [],
      authority_cap: seat,
    });
    const agent = await must(t, 'POST', `${T}/agents`, { source: 'scratch', role_label: 'payer', authority_template: seat });
    await must(t, 'POST', `${T}/agents/${agent.agent_id}/budget-ledger`, { budget_limit: 100_000 });
    const crew = (
      await must(t, 'POST', `${T}/crews`, { formation_id: f.formation_id, assignments: { [billet.billet_id]: agent.agent_id } })
    ).crew_id as string;
    await must(t, 'POST', `${A}/roles`, {
      name: 'runner',
      permissions: [
        'agent_teams.write',
        'agent_teams.read',
        'agent_teams.approve',
        'system.orchestration.admin.read',
        'system.orchestration.admin.write',
      ],
    });
    const who = async (name: string) => {
      const p = await must(t, 'POST', `${A}/principals`, { kind: 'service', name, roles: ['runner'], authority: seat });
      const k = await must(t, 'POST', `${A}/api-keys`, { name, owner_id: p.id });
      return { id: p.id as string, key: k.secret as string, keyId: k.key_id as string };
    };
    const [r, b, c, fk, m] = [await who('requester'), await who('bob'), await who('carol'), await who('forker'), await who('mallory')];
    const tokenOf = async (k: { keyId: string; key: string }) =>
      (await form(t, '/oauth/token', { grant_type: 'client_credentials' }, basic(k.keyId, k.key))).body.access_token as string;
    const as = async (subject: { keyId: string; key: string }, by: { keyId: string; key: string }) => {
      const x = await form(
        t,
        '/oauth/token',
        {
          grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
          subject_token: await tokenOf(subject),
          subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
          audience: `${t.modules.oauth.api.publicBase()}/api/public/v1`,
        },
        basic(by.keyId, by.key),
      );
      assert.equal(x.status, 200, x.text);
      return x.body.access_token as string;
    };
    const view = (run: string) => must(t, 'GET', `${T}/crews/${crew}/runs/${run}`);
    const decide = (
      run: string,
      step: string,
      token: string,
      path = `${T}/crews/${crew}/runs/${run}/approvals/${encodeURIComponent(step)}`,
    ) => t.request('POST', path, { token, body: { decision: 'approve' } });
    const start = async (token: string, input = 'pay 10') => {
      const run = (await must(t, 'POST', `${T}/crews/${crew}/runs`, { input }, token)).run_id as string;
      await settledRun(t, run, 'waiting');
      return run;
    };
    const refusedBy = (res: { status: number; body: any }, reason: string, what: string) => {
      assert.equal(res.status, 403, `${what}: ${res.status} ${JSON.stringify(res.body)}`);
      assert.equal(res.body.details.reason, reason, what);
    };

    // Exchange: the requester as bob; a run requested through mallory acting for the requester.
    const run1 = await start(r.key);
    refusedBy(await decide(run1, 'pre:0', r.key), 'requester_cannot_approve', 'the requester itself');
    refusedBy(await decide(run1, 'pre:0', await as(b, r)), 'requester_cannot_approve', 'the requester through bob’s token');
    const run2 = await start(await as(r, m));
    refusedBy(await decide(run2, 'pre:0', m.key), 'requester_cannot_approve', 'an actor of the token that requested it');
    refusedBy(await decide(run2, 'pre:0', await as(b, m)), 'requester_cannot_approve', 'that actor through bob’s token');
    // Carol is one person, whatever token she decides with.
    assert.equal((await decide(run1, 'pre:0', c.key)).status, 200);
    assert.equal((await decide(run1, 'pre:0', await as(b, c))).body.details?.reason, 'already_decided');
    // Retry: the run recovered and driven again counts nothing more.
    await settledRun(t, run1, 'waiting');
    const rec = await t.request('POST', `${T}/crews/${crew}/runs/${run1}/recover`, { token: r.key });
    assert.equal(rec.status, 202, rec.text);
    await settledRun(t, run1, 'waiting');
    assert.equal((await view(run1)).pending_approvals.length, 1, 'still one approval short');
    assert.equal((await decide(run1, 'pre:0', b.key)).status, 200);
    await settledRun(t, run1, 'completed');

    // Fork: another principal (its own requester), and the requester with a replaced input, are asked again.
    const seatAt = (await t.modules.runs.runs.readJournal(run1)).find(
      (x) => x.kind === 'step' && x.step_id.startsWith('agent:') && !x.step_id.includes('/'),
    )!.seq;
    for (const [token, body, what] of [
      [fk.key, { at: seatAt }, 'a fork by another principal'],
      [r.key, { at: seatAt, input: 'wire all the money' }, 'a fork that replaces the input after the approval'],
      [await as(r, m), { at: seatAt }, 'a fork by the requester acting through mallory (another chain)'],
    ] as const) {
      const fork = (await must(t, 'POST', `${T}/crews/${crew}/runs/${run1}/fork`, body, token)).run_id as string;
      await settledRun(t, fork, 'waiting');
      assert.equal((await view(fork)).pending_approvals[0]?.step_id, 'pre:0', `${what}: asked again`);
    }
    const same = (await must(t, 'POST', `${T}/crews/${crew}/runs/${run1}/fork`, { at: seatAt }, r.key)).run_id as string;
    await settledRun(t, same, 'completed');

    // Rerun: an agent job run of the owner, approved by bob and carol, then failed; rerun by the forker.
    const graph = (await must(t, 'GET', `${T}/crews/${crew}`)).graph_hash as string;
    const def = await must(t, 'POST', `${A}/jobs/definitions`, {
      name: 'pay-nightly',
      job_type: 'agent',
      spec: { graph_id: graph, input: 'pay 5' },
      cron: '*/10 * * * *',
    });
    t.clock.advance(10 * 60_000);
    assert.ok((await t.modules.jobs.scheduler.tick()) >= 1);
    const job = (await must(t, 'GET', `${A}/jobs/definitions/${def.schedule_id}`)).last_run_id as string;
    await must(t, 'POST', `${A}/jobs/definitions/${def.schedule_id}/disable`, {});
    const jobState = async (id: string, state: string) => {
      for (let i = 0; i < 3000 && (await t.modules.runs.runs.getRun(id))?.state !== state; i++)
        await new Promise((res) => setTimeout(res, 10));
      assert.equal((await t.modules.runs.runs.getRun(id))?.state, state);
    };
    await jobState(job, 'waiting');
    failing = true;
    for (const p of [b, c]) assert.equal((await decide(job, 'pre:0', p.key, `${A}/jobs/runs/${job}/approvals/pre%3A0`)).status, 200);
    await jobState(job, 'failed');
    failing = false;
    const rerun = (await must(t, 'POST', `${A}/jobs/runs/${job}/rerun`, undefined, fk.key)).run_id as string;
    await jobState(rerun, 'waiting');
    const rv = await must(t, 'GET', `${A}/jobs/runs/${rerun}`);
    assert.equal(rv.pending_approvals[0]?.step_id, 'pre:0', 'the rerun asks again');
    refusedBy(
      await decide(rerun, 'pre:0', fk.key, `${A}/jobs/runs/${rerun}/approvals/pre%3A0`),
      'requester_cannot_approve',
      'the rerun’s requester',
    );
    // The owner (the job's requester) reruns it: the approval stands, nothing is asked.
    const own = (await must(t, 'POST', `${A}/jobs/runs/${job}/rerun`)).run_id as string;
    await jobState(own, 'completed');
  } finally {
    await t.close();
    await ai.close();
  }
});
