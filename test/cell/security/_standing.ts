/**
 * Whether a delegated token (an RFC 8693 exchanged token, naming actors) may make what each mutating
 * operation of the served document makes: the standing ones (a credential or authority that acts
 * later, without the request) refuse it (iam.assertNotDelegated, docs/security.md rule 5), with a
 * valid call each against a world of ids; every other one says why it makes nothing that outlives the
 * token. The mutation sweep's delegated-token pass tries them all with an exchanged token; the
 * containment sweep's classification test makes every new admin route take a stance here too.
 */
/**
 * What makes something standing (a credential or authority that acts later, without the request),
 * with a valid call against the world: a delegated token (one carrying `act`) is refused each one
 * (403 delegated_credential, audited). The rule: docs/security.md, "A delegated token makes nothing
 * that outlives it"; the gate: iam.assertNotDelegated.
 */
export const STANDING: Record<string, (w: { ids: Record<string, string> }) => { params?: Record<string, string>; body?: unknown }> = {
  'POST /api/public/v1/admin/api-keys': () => ({ body: { name: 'standing' } }),
  'POST /api/public/v1/admin/api-keys/{key_id}/rotate': () => ({ body: { grace_seconds: 0 } }),
  'POST /api/public/v1/admin/oauth/clients': () => ({ body: { name: 'standing', scope: ['audit.read'] } }),
  'POST /api/public/v1/admin/oauth/clients/{client_id}/rotate': () => ({}),
  'POST /api/public/v1/admin/sats': () => ({ body: { scope: ['audit.read'] } }),
  'POST /api/public/v1/admin/jobs/definitions': () => ({
    body: { name: 'standing', job_type: 'compute', workspace_id: 'w1', spec: { code: 'return 1' }, cron: '0 4 * * *' },
  }),
  'PATCH /api/public/v1/admin/jobs/definitions/{schedule_id}': () => ({ body: { cron: '0 5 * * *' } }),
  'POST /api/public/v1/admin/jobs/definitions/{schedule_id}/enable': (w) => ({ params: { schedule_id: w.ids['disabled_schedule_id']! } }),
  'POST /api/public/v1/admin/jobs/endpoints': () => ({
    body: { name: 'standing', job_type: 'compute', workspace_id: 'w1', spec: { code: 'return 1' } },
  }),
  'POST /api/public/v1/admin/edge/devices': (w) => ({ body: { name: 'standing', public_jwk: JSON.parse(w.ids['spare_jwk']!) } }),
  'POST /api/public/v1/admin/edge/key-bundles': (w) => ({ body: { device_id: w.ids['device_id'] } }),
  'POST /api/public/v1/admin/edge/crew-bundles': (w) => ({ body: { device_id: w.ids['device_id'], crew_id: w.ids['crew_id'] } }),
  // Releasing what a device holds puts it back in the ledgers for any run to spend, as issuing a crew bundle takes it out.
  'POST /api/public/v1/admin/edge/devices/{device_id}/budget-release': (w) => ({ params: { device_id: w.ids['device_id']! } }),
  // Enabling a device gives it bundles and tokens again.
  'POST /api/public/v1/admin/edge/devices/{device_id}/enable': (w) => ({ params: { device_id: w.ids['disabled_device_id']! } }),
  'POST /api/public/v1/admin/principals': () => ({ body: { kind: 'service', name: 'standing', roles: ['viewer'] } }),
  'PATCH /api/public/v1/admin/principals/{id}': (w) => ({ params: { id: w.ids['other_id']! }, body: { roles: ['operator'] } }),
  'POST /api/public/v1/admin/principals/{id}/restore': (w) => ({ params: { id: w.ids['archived_id']! } }),
  'POST /api/public/v1/admin/roles': () => ({ body: { name: 'standing', permissions: ['audit.read'] } }),
  'PATCH /api/public/v1/admin/roles/{name}': () => ({ body: { permissions: ['audit.read'] } }),
  'POST /api/public/v1/admin/agent-teams/agents': () => ({ body: { source: 'scratch', role_label: 'x', authority_template: {} } }),
  'PATCH /api/public/v1/admin/agent-teams/agents/{agent_id}': () => ({ body: { authority_template: { allowed_tools: ['calc'] } } }),
};

/** Every other mutating operation, and why a delegated token may call it: it makes nothing that outlives the token. */
export const NOT_STANDING = new Map<string, string>([
  ...[
    'DELETE /api/public/v1/admin/agent-teams/agents/{agent_id}',
    'DELETE /api/public/v1/admin/agent-teams/blueprints/{blueprint_id}',
    'DELETE /api/public/v1/admin/agent-teams/contracts/{contract_id}',
    'DELETE /api/public/v1/admin/agent-teams/crews/{crew_id}',
    'DELETE /api/public/v1/admin/agent-teams/formations/{formation_id}',
    'DELETE /api/public/v1/admin/agent-teams/formations/{formation_id}/billets/{billet_id}',
    'DELETE /api/public/v1/admin/agent-teams/skills/{skill_id}',
    'DELETE /api/public/v1/admin/ai/model-providers/{provider_id}',
    'DELETE /api/public/v1/admin/jobs/definitions/{schedule_id}',
    'DELETE /api/public/v1/admin/jobs/endpoints/{endpoint_id}',
    'DELETE /api/public/v1/admin/oauth/clients/{client_id}',
    'DELETE /api/public/v1/admin/principals/{id}',
    'DELETE /api/public/v1/admin/roles/{name}',
    'DELETE /api/public/v1/admin/secrets/{secret_id}',
    'POST /api/public/v1/admin/api-keys/{key_id}/revoke',
    'POST /api/public/v1/admin/jobs/definitions/{schedule_id}/disable',
    'POST /api/public/v1/admin/principals/{id}/archive',
    'POST /api/public/v1/admin/principals/{id}/purge',
    'POST /api/public/v1/admin/agent-teams/crews/{crew_id}/runs/{run_id}/cancel',
    'POST /api/public/v1/admin/jobs/runs/{run_id}/cancel',
    'POST /api/public/v1/admin/edge/devices/{device_id}/disable',
    'DELETE /api/public/v1/admin/edge/devices/{device_id}',
    'DELETE /api/public/v1/admin/catalog/sources/{source_id}',
  ].map((id): [string, string] => [id, 'removes or stops: makes nothing'] as [string, string]),
  ...[
    'POST /api/public/v1/admin/agent-teams/crews/{crew_id}/runs',
    'POST /api/public/v1/admin/agent-teams/crews/{crew_id}/runs/{run_id}/fork',
    'POST /api/public/v1/admin/agent-teams/crews/{crew_id}/runs/{run_id}/recover',
    'POST /api/public/v1/admin/jobs/runs',
    'POST /api/public/v1/admin/jobs/runs/{run_id}/rerun',
    'POST /api/public/v1/admin/jobs/definitions/{schedule_id}/run',
    'POST /api/public/v1/jobs/endpoints/{endpoint_id}/invoke',
  ].map((id): [string, string] => [
    id,
    'a run bounded by the token now, that records its whole chain (flags.requester_actors): none of the chain approves its two-person steps',
  ]),
  ...[
    'POST /api/public/v1/admin/agent-teams/crews/{crew_id}/runs/{run_id}/approvals/{step_id}',
    'POST /api/public/v1/admin/jobs/runs/{run_id}/approvals/{step_id}',
  ].map((id): [string, string] => [id, 'a decision, counted as the whole chain (the approval pass below)']),
  ...[
    'POST /api/public/v1/admin/agent-teams/crews/{crew_id}/runs/{run_id}/outcomes/{step_id}',
    'POST /api/public/v1/admin/jobs/runs/{run_id}/outcomes/{step_id}',
  ].map((id): [string, string] => [
    id,
    "an operator's decision on a lost outcome (retry, record, fail), by a caller holding the run's authority now, audited: the run acts as it was authorised",
  ]),
  ...[
    'POST /api/public/v1/admin/agent-teams/blueprints',
    'POST /api/public/v1/admin/agent-teams/contracts',
    'POST /api/public/v1/admin/agent-teams/crews',
    'POST /api/public/v1/admin/agent-teams/formations',
    'POST /api/public/v1/admin/agent-teams/formations/{formation_id}/billets',
    'POST /api/public/v1/admin/agent-teams/skills',
    'PATCH /api/public/v1/admin/agent-teams/blueprints/{blueprint_id}',
    'PATCH /api/public/v1/admin/agent-teams/contracts/{contract_id}',
    'PATCH /api/public/v1/admin/agent-teams/crews/{crew_id}',
    'PATCH /api/public/v1/admin/agent-teams/formations/{formation_id}',
    'PATCH /api/public/v1/admin/agent-teams/formations/{formation_id}/billets/{billet_id}',
    'PATCH /api/public/v1/admin/agent-teams/skills/{skill_id}',
    'POST /api/public/v1/admin/agent-teams/crews/{crew_id}/upgrade',
    'POST /api/public/v1/admin/agent-teams/agents/{agent_id}/budget-ledger',
    'POST /api/public/v1/admin/catalog/sources/{source_id}/pins',
  ].map((id): [string, string] => [
    id,
    'a definition or a limit: it acts only in a run a caller starts, whose seats must be within that caller (no schedule: definitions are standing)',
  ]),
  ...[
    'POST /api/public/v1/admin/secrets',
    'POST /api/public/v1/admin/secrets/{secret_id}/rotate',
    'POST /api/public/v1/admin/ai/model-providers',
    'PATCH /api/public/v1/admin/ai/model-providers/{provider_id}',
    'POST /api/public/v1/admin/catalog/sources',
    'PATCH /api/public/v1/admin/catalog/sources/{source_id}',
  ].map((id): [string, string] => [
    id,
    'a stored value or a destination, not authority: binding and every call (a source: every token fetch) re-ask the secret rule of the binding principal',
  ]),
  ['POST /api/public/v1/admin/edge/journals', 'imports a signed record: grants nothing'],
  ['POST /api/public/v1/admin/oauth/signing-keys/rotate', "rotates the cell's key: hands out nothing"],
  [
    'POST /oauth/token',
    'protocol; its exchange grant only narrows and names its chain; exchanged only where meant (driven below: audience, may_act)',
  ],
  ['POST /oauth/device_authorization', 'protocol: starts a grant the subject approves in a session'],
  ['POST /oauth/introspect', 'protocol: reads a verdict'],
  ['POST /oauth/revoke', 'protocol: revokes a token'],
  ['POST /oauth/register', "protocol, no credential (RFC 7591): the client it registers is no one's authority until a principal consents"],
]);
