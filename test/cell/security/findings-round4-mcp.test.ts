// The red-team classes of the fourth security review (issue 36; docs/security.md "Round 4") that an
// MCP client can reach, performed over /mcp with the reference SDK's client (in process; both engines
// with CELL_TEST_STORE=postgres): consent is not stretched through a token of another principal
// (finding 7: the requester acting through another's token, or a run requested through an exchanged
// token, never counts as a second person, whether the step is answered by `approval_decide` or by the
// client's elicitation), and a token is exchanged only where it was meant to be used (finding 6: a
// token for /mcp is never exchanged for the cell's API). The other classes (standing things made by a
// delegated token, forks, shared job things) have no MCP tool: MCP calls start runs, read and decide.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { InProcess } from '../../helpers/inproc.ts';
import { actor, type Actor } from '../../helpers/actors.ts';
import { inProcessFetch, mcpClient } from '../../helpers/mcp-endpoint.ts';
import { ACCESS_TOKEN_TYPE, basic, claimsOf, form, TOKEN_EXCHANGE } from '../../helpers/oauth.ts';
import { A, crewFixture, SEAT_ENVELOPE, team } from '../../helpers/teams.ts';
import type { FakeOpenAI } from '../../fixtures/openai-server.ts';

const URL_ = 'http://127.0.0.1/mcp';
const PERMS = ['agent_teams.write', 'agent_teams.read', 'agent_teams.approve'];

let t: InProcess;
let ai: FakeOpenAI;
/** A crew whose one seat runs after a two-person approval step. */
let crew: string;
before(async () => {
  const f = await crewFixture();
  ({ t, ai } = f);
  const step = { kind: 'human_approval', config: { rule: 'two_person', timeout_ms: 3_600_000, prompt: 'pay?' } };
  crew = (await team(f.api, 'sequential', [{ role: 'payer' }], { pre: [step] })).crew;
});
after(async () => {
  await t.close();
  await ai.close();
});

const base = () => t.modules.oauth.api.publicBase();
const structured = (r: unknown) => (r as CallToolResult).structuredContent as Record<string, any>;
const envelope = (r: unknown) => JSON.parse(((r as CallToolResult).content as { text: string }[])[0]!.text);

/** A token of the actor's principal for `resource` (client_credentials, its key as the client). */
async function tokenOf(a: Actor, resource?: string): Promise<string> {
  const r = await form(t, '/oauth/token', { grant_type: 'client_credentials', ...(resource ? { resource } : {}) }, basic(a.keyId, a.key));
  assert.equal(r.status, 200, r.text);
  return r.body.access_token as string;
}

/** `subjectToken` exchanged by `by` (client and actor) for `audience`: sub = the subject, act = `by`. */
const exchange = (subjectToken: string, by: Actor, audience: string) =>
  form(
    t,
    '/oauth/token',
    { grant_type: TOKEN_EXCHANGE, subject_token: subjectToken, subject_token_type: ACCESS_TOKEN_TYPE, audience },
    basic(by.keyId, by.key),
  );

/** A token for /mcp of `subject`'s principal that `by` acts with. */
async function actingFor(subject: Actor, by: Actor): Promise<string> {
  const r = await exchange(await tokenOf(subject), by, `${base()}/mcp`);
  assert.equal(r.status, 200, r.text);
  assert.equal(claimsOf(r.body.access_token).aud, `${base()}/mcp`);
  return r.body.access_token as string;
}

/** The crew called over MCP with `token` by a client that cannot elicit: the run waits on its approval step. */
async function waitingRun(token: string, input: string): Promise<{ runId: string; stepId: string }> {
  const s = structured(await (await mcpClient(inProcessFetch(t), URL_, token)).callTool({ name: `crew_${crew}`, arguments: { input } }));
  assert.equal(s.state, 'waiting', JSON.stringify(s));
  return { runId: s.run_id, stepId: s.pending_approvals[0].step_id };
}

const decideOverMcp = async (token: string, runId: string, stepId: string) =>
  (await mcpClient(inProcessFetch(t), URL_, token)).callTool({
    name: 'approval_decide',
    arguments: { run_id: runId, step_id: stepId, decision: 'approve' },
  });

const received = async (runId: string) =>
  (await t.modules.runs.runs.readJournal(runId)).filter((x) => x.kind === 'approval_received').map((x) => x.data?.['by']);

test('finding 7 over MCP: the requester acting through another principal’s /mcp token is not a second person', async () => {
  const requester = await actor(t, { name: 'mcp-requester', permissions: PERMS, authority: SEAT_ENVELOPE });
  const bob = await actor(t, { name: 'mcp-bob', permissions: PERMS, authority: SEAT_ENVELOPE });
  const { runId, stepId } = await waitingRun(requester.key, 'pay 10');
  // The requester exchanges bob's token for one of /mcp and approves as bob, with approval_decide.
  const asBob = await actingFor(bob, requester);
  const r = await decideOverMcp(asBob, runId, stepId);
  assert.equal(r.isError, true, JSON.stringify(r));
  assert.equal(envelope(r).details.reason, 'requester_cannot_approve');
  const refused = await t.rows("SELECT details FROM audit WHERE action = 'crew.run.approval' AND outcome = 'refused'");
  assert.deepEqual(JSON.parse(String(refused.at(-1)!['details'])).chain, [bob.id, requester.id], 'the audit names the chain');
  assert.deepEqual(await received(runId), [], 'nothing was recorded');
  // Bob himself, over MCP, is a second person.
  const own = structured(await decideOverMcp(bob.key, runId, stepId));
  assert.deepEqual(await received(runId), [bob.id], JSON.stringify(own));
});

test('finding 7 over MCP: a run requested through an exchanged token is not approved by its actor, by elicitation or by tool', async () => {
  const subject = await actor(t, { name: 'mcp-subject', permissions: PERMS, authority: SEAT_ENVELOPE });
  const mallory = await actor(t, { name: 'mcp-mallory', permissions: PERMS, authority: SEAT_ENVELOPE });
  // Mallory calls the crew for the subject, and answers the approval question her own call asks: approve.
  const asSubject = await actingFor(subject, mallory);
  let asked = 0;
  const c = await mcpClient(inProcessFetch(t), URL_, asSubject, {
    onElicit: () => {
      asked++;
      return { action: 'accept', content: { decision: 'approve' } };
    },
  });
  const s = structured(await c.callTool({ name: `crew_${crew}`, arguments: { input: 'pay 20' } }));
  assert.equal(asked, 1);
  assert.equal(s.state, 'waiting', JSON.stringify(s));
  assert.match(s.note, /requester_cannot_approve/);
  const stepId = s.pending_approvals[0].step_id as string;
  const requested = (await t.modules.runs.runs.readJournal(s.run_id)).find((x) => x.kind === 'run_requested')!;
  assert.deepEqual(requested.data?.['requester_actors'], [mallory.id], 'the journal names the chain that requested');
  // Then with her own key, over MCP: still the requester's chain.
  const r = await decideOverMcp(mallory.key, s.run_id, stepId);
  assert.equal(r.isError, true, JSON.stringify(r));
  assert.equal(envelope(r).details.reason, 'requester_cannot_approve');
  assert.deepEqual(await received(s.run_id), []);
});

test('finding 6 over MCP: a token for /mcp is exchanged only for /mcp, never for the cell’s API', async () => {
  const alice = await actor(t, { name: 'mcp-alice', permissions: PERMS, authority: SEAT_ENVELOPE });
  const carol = await actor(t, { name: 'mcp-carol', permissions: PERMS, authority: SEAT_ENVELOPE });
  const mcpToken = await tokenOf(alice, `${base()}/mcp`);
  const forApi = await exchange(mcpToken, carol, `${base()}/api/public/v1`);
  assert.equal(forApi.status, 400, forApi.text);
  assert.equal(forApi.body.error, 'invalid_target');
  assert.equal(forApi.body.access_token, undefined);
  // For /mcp itself it narrows who acts there (act names carol); the API still refuses that token.
  const again = await exchange(mcpToken, carol, `${base()}/mcp`);
  assert.equal(again.status, 200, again.text);
  assert.deepEqual(claimsOf(again.body.access_token).act, { sub: carol.id });
  const atApi = await t.request('GET', `${A}/whoami`, { token: again.body.access_token });
  assert.equal(atApi.status, 401);
  assert.equal(atApi.body.details.reason, 'bad_audience');
});
