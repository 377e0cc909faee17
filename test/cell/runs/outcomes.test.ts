// Lost outcomes of side-effecting calls, in process, on the real store and HTTP (cell/runs/outcomes.ts and
// the resolution routes). A POST whose connection closes after the request went out (the service may have
// acted) leaves the run in state `outcome_unknown`, as a crash between dispatch and result does (the crash
// itself: test/e2e/effects-crash.test.ts): the view and the journal name the call and its effect key, the
// list filters find it, and an operator who holds the run's authority retries it (the same Idempotency-Key),
// records its result, or fails it; anyone else is refused and the run stays as it is.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { effectKey } from '../../../core/engine/effect-key.ts';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { startOpenAIServer, type FakeOpenAI } from '../../fixtures/openai-server.ts';
import { A, T, ok, provider, team, type Api } from '../../helpers/teams.ts';
import { until } from '../../helpers/until.ts';

let t: InProcess;
let api: Api;
let ai: FakeOpenAI;
let origin: string;
let server: ReturnType<typeof createServer>;
/** Requests the service received, and how it answers the next POST: close the connection, or answer. */
const posts: { key: string | undefined }[] = [];
let vanish = true;
before(async () => {
  server = createServer((req, res) => {
    req.resume().on('end', () => {
      posts.push({ key: req.headers['idempotency-key'] as string | undefined });
      if (vanish) return void req.socket.destroy();
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end('{"refund":"done"}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  t = await inProcessCell({ config: { egressAllowPrivate: ['127.0.0.1'] } });
  api = { request: t.request, token: t.adminKey };
  ai = await startOpenAIServer({ apiKey: 'sk-fake' });
  await provider(api, ai);
});
after(async () => {
  await t.close();
  await ai.close();
  server.close();
  server.closeAllConnections();
});

const RUNS = `${A}/jobs/runs`;
const refund = (n: number) => ({
  job_type: 'single',
  workspace_id: 'w1',
  spec: {
    tool: 'http.request',
    args: { method: 'POST', url: `${origin}/refunds`, body: { order: n } },
    authority: { egress_allowlist: [`POST:${origin}`] },
  },
});
const state = async (runId: string) => (await t.modules.runs.runs.getRun(runId))!.state;
const reached = (runId: string, s: string) => until(`run ${runId} ${s}`, async () => (await state(runId)) === s);
const resolve = (runId: string, stepId: string, body: unknown, token = t.adminKey) =>
  t.request('POST', `${RUNS}/${runId}/outcomes/${encodeURIComponent(stepId)}`, { token, body });

/** A single job POSTing a refund whose answer is lost: the run waits outcome_unknown. */
async function lostRefund(n: number): Promise<string> {
  vanish = true;
  const r = await t.request('POST', RUNS, { token: t.adminKey, body: refund(n) });
  assert.equal(r.status, 202, r.text);
  await reached(r.body.run_id, 'outcome_unknown');
  return r.body.run_id as string;
}

test('a lost outcome: the run waits outcome_unknown; its view, its journal and the list filters show the call and its effect key', async () => {
  const runId = await lostRefund(1);
  const key = effectKey(runId, 'tool/call');
  assert.equal(posts.at(-1)!.key, `"${key}"`, 'the POST carried its effect key');
  const v = await t.request('GET', `${RUNS}/${runId}`, { token: t.adminKey });
  assert.equal(v.body.state, 'outcome_unknown');
  assert.deepEqual(
    { ...v.body.unknown_outcome, since: undefined },
    {
      step_id: 'tool/call',
      tool: 'http.request',
      seat: null,
      effect_key: key,
      attempt: 1,
      since: undefined,
    },
  );
  const j = await t.request('GET', `${RUNS}/${runId}/journal`, { token: t.adminKey });
  const intent = j.body.records.find((r: { kind: string }) => r.kind === 'intent');
  assert.equal(intent.data.effect_key, key, 'the key was written before the call left');
  const wait = j.body.records.at(-1);
  assert.equal(wait.kind, 'waiting');
  assert.equal(wait.data.reason, 'outcome_unknown');
  assert.equal(wait.data.effect.effect_key, key);
  const list = await t.request('GET', `${RUNS}?state=outcome_unknown`, { token: t.adminKey });
  assert.ok(list.body.items.some((r: { run_id: string }) => r.run_id === runId));
  const waiting = await t.request('GET', `${RUNS}?state=waiting`, { token: t.adminKey });
  assert.ok(!waiting.body.items.some((r: { run_id: string }) => r.run_id === runId));
  // A wait on an operator, not a stalled run.
  assert.equal(v.body.stalled, false);
});

test('retry issues the POST again with the same Idempotency-Key; the run completes; a second resolution is refused', async () => {
  const runId = await lostRefund(2);
  const before = posts.length;
  vanish = false;
  const r = await resolve(runId, 'tool/call', { resolution: 'retry', comment: 'the service keeps keys' });
  assert.equal(r.status, 200, r.text);
  await reached(runId, 'completed');
  assert.equal(posts.length, before + 1);
  assert.equal(posts.at(-1)!.key, posts.at(-2)!.key, 'the same key both times');
  assert.equal(posts.at(-1)!.key, `"${effectKey(runId, 'tool/call')}"`);
  const v = (await t.request('GET', `${RUNS}/${runId}`, { token: t.adminKey })).body;
  assert.deepEqual(v.output, { status: 201, content_type: 'application/json', body: '{"refund":"done"}', truncated: false });
  const j = (await t.request('GET', `${RUNS}/${runId}/journal`, { token: t.adminKey })).body.records as {
    kind: string;
    data: Record<string, unknown>;
  }[];
  const resolved = j.find((x) => x.kind === 'outcome_resolved')!;
  assert.equal(resolved.data['resolution'], 'retry');
  assert.equal(resolved.data['comment'], 'the service keeps keys');
  assert.equal(j.filter((x) => x.kind === 'intent').length, 2);
  assert.ok(v.flags.reissued?.length === 1, 'the re-issue is flagged');
  const again = await resolve(runId, 'tool/call', { resolution: 'retry' });
  assert.equal(again.status, 409);
  assert.equal(again.body.details.reason, 'run_terminal');
  const audit = await t.request('GET', `${A}/audit?target=${encodeURIComponent(`${runId}:tool/call`)}`, { token: t.adminKey });
  assert.ok(audit.body.entries.some((e: { action: string; outcome: string }) => e.action === 'jobs.run.outcome' && e.outcome === 'ok'));
});

test('record completes the step with the given result (nothing is sent); fail fails the run', async () => {
  const runId = await lostRefund(3);
  const before = posts.length;
  const r = await resolve(runId, 'tool/call', { resolution: 'record', result: { status: 201, body: 'seen in the ledger' } });
  assert.equal(r.status, 200, r.text);
  await reached(runId, 'completed');
  assert.equal(posts.length, before, 'nothing was sent');
  assert.deepEqual((await t.modules.runs.runs.getRun(runId))!.output, { status: 201, body: 'seen in the ledger' });

  const failed = await lostRefund(4);
  const f = await resolve(failed, 'tool/call', { resolution: 'fail' });
  assert.equal(f.status, 200, f.text);
  await reached(failed, 'failed');
  const run = (await t.modules.runs.runs.getRun(failed))!;
  assert.equal(run.error?.reason, 'outcome_unknown');
});

test('resolution requests: bad bodies are 400, other steps 404, runs not waiting on a lost outcome 409, two at once one wins', async () => {
  const runId = await lostRefund(5);
  for (const body of [
    {},
    { resolution: 'record' },
    { resolution: 'retry', result: 1 },
    { resolution: 'maybe' },
    { resolution: 'fail', x: 1 },
  ]) {
    const r = await resolve(runId, 'tool/call', body);
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.equal(r.body.error, 'invalid_request');
  }
  assert.equal((await resolve(runId, 'other/step', { resolution: 'fail' })).status, 404);
  assert.equal((await resolve('run_00000000000000000000', 'tool/call', { resolution: 'fail' })).status, 404);
  assert.equal(await state(runId), 'outcome_unknown', 'nothing changed');
  const both = await Promise.all([
    resolve(runId, 'tool/call', { resolution: 'fail' }),
    resolve(runId, 'tool/call', { resolution: 'fail' }),
  ]);
  assert.deepEqual(both.map((r) => r.status).sort(), [200, 409]);
  // The loser is refused at whichever check it reaches after the winner: the recorded resolution, the run
  // no longer waiting, or (when the winner's drive already failed the run) the run having ended.
  const loser = both.find((r) => r.status === 409)!.body.details.reason;
  assert.ok(['already_resolved', 'no_unknown_outcome', 'run_terminal'].includes(loser), loser);
  await reached(runId, 'failed');
  // A run that never lost an outcome.
  const plain = await t.request('POST', RUNS, {
    token: t.adminKey,
    body: { job_type: 'compute', workspace_id: 'w1', spec: { code: 'return 1' } },
  });
  await reached(plain.body.run_id, 'completed');
  const r = await resolve(plain.body.run_id, 'compute/call', { resolution: 'fail' });
  assert.equal(r.status, 409);
});

test('a caller without the authority the run acts with cannot resolve it (403 wider_than_caller, audited); the run stays waiting', async () => {
  const runId = await lostRefund(6);
  const p = await ok(api, 'POST', `${A}/principals`, {
    kind: 'service',
    name: 'narrow-op',
    roles: ['operator'],
    authority: { allowed_tools: ['http.request'], egress_allowlist: [origin] },
  });
  const key = await ok(api, 'POST', `${A}/api-keys`, { name: 'narrow', owner_id: p.id });
  const r = await resolve(runId, 'tool/call', { resolution: 'retry' }, key.secret);
  assert.equal(r.status, 403, r.text);
  assert.equal(r.body.details.reason, 'wider_than_caller');
  assert.equal(await state(runId), 'outcome_unknown');
  const audit = await t.request('GET', `${A}/audit?actor=${p.id}`, { token: t.adminKey });
  assert.ok(
    audit.body.entries.some((e: { action: string; outcome: string }) => e.action === 'jobs.run.outcome' && e.outcome === 'refused'),
  );
  // Without the permission at all: 403 before anything is read.
  const reader = await ok(api, 'POST', `${A}/api-keys`, { name: 'reader', scopes: ['system.orchestration.admin.read'] });
  assert.equal((await resolve(runId, 'tool/call', { resolution: 'retry' }, reader.secret)).status, 403);
  // A cancel still ends it.
  const c = await t.request('POST', `${RUNS}/${runId}/cancel`, { token: t.adminKey });
  assert.equal(c.body.state, 'cancelled');
});

test("a crew run: an agent's lost POST waits outcome_unknown in the crew view and list; the crew route resolves it", async () => {
  vanish = true;
  const cap = { allowed_tools: ['http.request'], permission_mode: 'auto', egress_allowlist: [`POST:${origin}`] };
  ai.setResponder((req) =>
    req.messages.at(-1)!.role === 'tool'
      ? { content: 'refunded' }
      : { tool_calls: [{ name: 'http__request', arguments: { method: 'POST', url: `${origin}/refunds`, body: { order: 7 } } }] },
  );
  const tm = await team(api, 'sequential', [{ role: 'clerk', cap }]);
  const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'refund order 7' });
  await t.modules.teams.teams.settled(run.run_id);
  const v = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
  assert.equal(v.state, 'outcome_unknown', JSON.stringify(v.error));
  const step = v.unknown_outcome.step_id as string;
  assert.match(step, /\/tool\/0\.0$/);
  assert.equal(v.unknown_outcome.tool, 'http.request');
  assert.equal(v.unknown_outcome.seat, tm.billets['clerk']);
  assert.equal(v.unknown_outcome.effect_key, effectKey(run.run_id, step));
  const listed = await ok(api, 'GET', `${T}/runs?state=outcome_unknown`);
  assert.ok(listed.runs.some((r: { run_id: string }) => r.run_id === run.run_id));
  // Only through the run's own crew.
  const other = await team(api, 'sequential', [{ role: 'other', cap }]);
  const wrong = await t.request('POST', `${T}/crews/${other.crew}/runs/${run.run_id}/outcomes/${encodeURIComponent(step)}`, {
    token: t.adminKey,
    body: { resolution: 'retry' },
  });
  assert.equal(wrong.status, 404);
  vanish = false;
  const before = posts.length;
  const r = await t.request('POST', `${T}/crews/${tm.crew}/runs/${run.run_id}/outcomes/${encodeURIComponent(step)}`, {
    token: t.adminKey,
    body: { resolution: 'retry' },
  });
  assert.equal(r.status, 200, r.text);
  await t.modules.teams.teams.settled(run.run_id);
  const done = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
  assert.equal(done.state, 'completed', JSON.stringify(done.error));
  assert.equal(done.unknown_outcome, null);
  assert.equal(posts.length, before + 1);
  assert.equal(posts.at(-1)!.key, posts.at(-2)!.key);
});
