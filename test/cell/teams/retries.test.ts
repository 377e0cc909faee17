/**
 * Step timeouts and retries (issue #24): a billet's retry policy retries a
 * provider 500 twice and then succeeds (3 calls at the fake provider, 3
 * attempt records, the waits recorded as due times); a billet's timeout
 * cancels the call in flight (the provider sees its connection closed) and
 * fails the step `step_timeout`; bad policies are refused at authoring naming
 * the field; the policy is part of the graph (and its hash).
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import type { FakeOpenAI } from '../../fixtures/openai-server.ts';
import type { InProcess } from '../../helpers/inproc.ts';
import { T, agent, ok, provider, roleOf, type Api, crewFixture } from '../../helpers/teams.ts';

let t: InProcess;
let ai: FakeOpenAI;
let api: Api;
before(async () => {
  ({ t, ai, api } = await crewFixture());
});
after(async () => {
  await t.close();
  await ai.close();
});

const CAP = { allowed_tools: [], permission_mode: 'auto', clearance_level: 0 };

/** A one-seat crew whose billet carries `policy`. */
async function crewWith(policy: Record<string, unknown>): Promise<{ crew: string; formation: string }> {
  const f = await ok(api, 'POST', `${T}/formations`, { name: `policy-${Math.random().toString(16).slice(2, 8)}` });
  const b = await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
    role_label: 'worker',
    required_skills: [],
    authority_cap: CAP,
    ...policy,
  });
  const a = await agent(api, 'worker', CAP);
  const c = await ok(api, 'POST', `${T}/crews`, { formation_id: f.formation_id, assignments: { [b.billet_id]: a } });
  return { crew: c.crew_id, formation: f.formation_id };
}

async function finished(crew: string, runId: string): Promise<any> {
  for (let i = 0; i < 3000; i++) {
    const state = (await t.modules.runs.runs.getRun(runId))?.state ?? '';
    if (['completed', 'failed', 'refused', 'cancelled'].includes(state)) return ok(api, 'GET', `${T}/crews/${crew}/runs/${runId}`);
    // The cell's clock is the test's: a backoff wait passes when the test moves it on.
    if (state === 'waiting') t.clock.advance(60);
    await new Promise((res) => setTimeout(res, 20));
  }
  const j = await t.modules.runs.runs.readJournal(runId, 0, 10_000);
  assert.fail(
    `run ${runId} did not finish: ${(await t.modules.runs.runs.getRun(runId))?.state} ${JSON.stringify(j.map((r) => [r.kind, r.step_id, r.data]))}`,
  );
}

test('a retry policy retries a 500 twice, then the call succeeds: 3 calls, 3 attempt records', async () => {
  const retry = { max_attempts: 3, backoff_ms: 100, max_backoff_ms: 150, on: ['provider_error', 'provider_timeout'] };
  const tm = await crewWith({ retry });
  let n = 0;
  ai.setResponder((req) => (roleOf(req) === 'worker' && n++ < 2 ? { status: 500 } : { content: 'third time lucky' }));
  const calls = ai.requests.length;
  const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' });
  const done = await finished(tm.crew, run.run_id);
  assert.equal(done.state, 'completed', JSON.stringify(done.error));
  assert.equal(done.output, 'third time lucky');
  assert.equal(ai.requests.length - calls, 3);
  const j = await t.modules.runs.runs.readJournal(run.run_id, 0, 10_000);
  const attempts = j.filter((r) => r.kind === 'attempt');
  assert.deepEqual(
    attempts.map((r) => [(r.data as any).attempt, (r.data as any).outcome, (r.data as any).reason ?? null]),
    [
      [1, 'failed', 'provider_error'],
      [2, 'failed', 'provider_error'],
      [3, 'ok', null],
    ],
  );
  // The waits are due times in the journal (durable timers), doubling up to the cap.
  const [a1, a2] = attempts as any[];
  assert.equal(a1.data.retry_at - a1.at, 100);
  assert.equal(a2.data.retry_at - a2.at, 150);
  const waits = j.filter((r) => r.kind === 'waiting');
  assert.ok(waits.length >= 2 && waits.every((w) => (w.data as any).reason === 'retry_backoff'));
  // A drive before the due time waits for the same due time: the wait resumes, it does not restart.
  assert.deepEqual([...new Set(waits.map((w) => (w.data as any).wake_at))], [a1.data.retry_at, a2.data.retry_at]);
  const step = j.find((r) => r.kind === 'step' && r.step_id.endsWith('/model/0'))!;
  assert.equal((step.data as any).attempts, 3);
  // The third attempt came no sooner than its due time (a model call's intent is its reservation, not a
  // record: the third attempt's reservation was made at or after the due time).
  assert.ok(!j.some((r) => r.kind === 'intent'), 'no intent record before a model call');
  const rsv = await t.rows('SELECT created_at FROM team_reservations WHERE run_id = ? ORDER BY created_at', [run.run_id]);
  assert.equal(rsv.length, 3, 'one reservation an attempt');
  assert.ok(Number(rsv[2]!['created_at']) >= a2.data.retry_at);
  ai.setResponder(() => ({ content: 'ok' }));
});

test('a failure the policy does not name is not retried', async () => {
  const tm = await crewWith({ retry: { max_attempts: 3, backoff_ms: 0, max_backoff_ms: 0, on: ['provider_rate_limited'] } });
  ai.setResponder(() => ({ status: 500 }));
  const calls = ai.requests.length;
  const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' });
  const done = await finished(tm.crew, run.run_id);
  assert.equal(done.state, 'failed');
  assert.equal(ai.requests.length - calls, 1);
  const j = await t.modules.runs.runs.readJournal(run.run_id, 0, 10_000);
  assert.deepEqual(
    j.filter((r) => r.kind === 'attempt').map((r) => (r.data as any).reason),
    ['provider_error'],
  );
  ai.setResponder(() => ({ content: 'ok' }));
});

test('a timeout cancels the call in flight: the provider sees the connection closed, the step fails step_timeout', async () => {
  // A provider that never answers and tells when the caller hangs up.
  let closed = 0;
  let received = 0;
  const slow = createServer((req: IncomingMessage, res: ServerResponse) => {
    received++;
    req.resume();
    res.on('close', () => {
      if (!res.writableEnded) closed++;
    });
  });
  await new Promise<void>((r) => slow.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(slow.address() as AddressInfo).port}`;
  const providerId = await provider(api, { url } as FakeOpenAI, 'sk-slow');
  try {
    const f = await ok(api, 'POST', `${T}/formations`, { name: 'timeout-team' });
    const b = await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
      role_label: 'sleeper',
      required_skills: [],
      authority_cap: CAP,
      timeout_ms: 400,
    });
    const a = await ok(api, 'POST', `${T}/agents`, {
      source: 'scratch',
      role_label: 'sleeper',
      authority_template: CAP,
      provider_id: providerId,
    });
    await ok(api, 'POST', `${T}/agents/${a.agent_id}/budget-ledger`, { budget_limit: 100_000 });
    const c = await ok(api, 'POST', `${T}/crews`, { formation_id: f.formation_id, assignments: { [b.billet_id]: a.agent_id } });
    const run = await ok(api, 'POST', `${T}/crews/${c.crew_id}/runs`, { input: 'go' });
    const done = await finished(c.crew_id, run.run_id);
    assert.equal(done.state, 'failed');
    assert.equal(done.error.reason, 'step_timeout');
    assert.equal(received, 1);
    for (let i = 0; i < 500 && closed === 0; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(closed, 1, 'the provider saw the call cancelled');
  } finally {
    slow.closeAllConnections();
    await new Promise<void>((r) => slow.close(() => r()));
  }
});

test('bad step policies are refused at authoring, naming the field; a policy is part of the graph', async () => {
  const f = await ok(api, 'POST', `${T}/formations`, { name: 'bad-policy' });
  const post = (extra: Record<string, unknown>) =>
    t.request('POST', `${T}/formations/${f.formation_id}/billets`, {
      token: t.adminKey,
      body: { role_label: 'x', required_skills: [], authority_cap: CAP, ...extra },
    });
  const cases: [Record<string, unknown>, string][] = [
    [{ timeout_ms: 0 }, 'timeout_ms'],
    [{ retry: { max_attempts: 3, backoff_ms: 10, max_backoff_ms: 100, on: ['nope'] } }, 'retry.on.0'],
    [{ retry: { max_attempts: 1, backoff_ms: 10, max_backoff_ms: 100, on: ['tool_error'] } }, 'retry.max_attempts'],
    [{ retry: { max_attempts: 3, backoff_ms: 100, max_backoff_ms: 10, on: ['tool_error'] } }, 'retry.max_backoff_ms'],
    [{ retry: { max_attempts: 3, backoff_ms: 10, max_backoff_ms: 100, on: [] } }, 'retry.on'],
  ];
  for (const [body, field] of cases) {
    const r = await post(body);
    assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
    assert.equal(r.body.error, 'invalid_request');
    const named = [r.body.details.field, ...(r.body.details.issues ?? []).map((i: any) => i.path)];
    assert.ok(named.includes(field), `${JSON.stringify(body)} names ${field}: ${JSON.stringify(r.body.details)}`);
  }
  const stage = await t.request('POST', `${T}/formations`, {
    token: t.adminKey,
    body: { name: 'bad-stage', post: [{ kind: 'tool', config: { tool: 'calc', timeout_ms: -1 } }] },
  });
  assert.equal(stage.status, 400, stage.text);

  const plain = await crewWith({});
  const timed = await crewWith({ timeout_ms: 5000 });
  const g1 = await ok(api, 'GET', `${T}/formations/${plain.formation}/graph`);
  const g2 = await ok(api, 'GET', `${T}/formations/${timed.formation}/graph`);
  assert.equal(g2.graph.nodes[0].config.timeout_ms, 5000);
  assert.equal(g1.graph.nodes[0].config.timeout_ms, undefined);
  assert.notEqual(g1.graph_hash, g2.graph_hash);
});

test('a billet change sets or removes its step policy (a new version), checked the same way', async () => {
  const tm = await crewWith({});
  const billets = await ok(api, 'GET', `${T}/formations/${tm.formation}/billets`);
  const id = billets.billets[0].billet_id as string;
  const path = `${T}/formations/${tm.formation}/billets/${id}`;
  const bad = await t.request('PATCH', path, {
    token: t.adminKey,
    body: { retry: { max_attempts: 3, backoff_ms: 50, max_backoff_ms: 10, on: ['provider_error'] } },
  });
  assert.equal(bad.status, 400, bad.text);
  assert.equal(bad.body.details.field, 'retry.max_backoff_ms');
  const set = await ok(api, 'PATCH', path, {
    timeout_ms: 1000,
    retry: { max_attempts: 2, backoff_ms: 0, max_backoff_ms: 0, on: ['tool_error'] },
  });
  assert.equal(set.timeout_ms, 1000);
  assert.deepEqual(set.retry.on, ['tool_error']);
  const g = await ok(api, 'GET', `${T}/formations/${tm.formation}/graph`);
  assert.equal(g.graph.nodes[0].config.retry.max_attempts, 2);
  const removed = await ok(api, 'PATCH', path, { retry: null });
  assert.equal(removed.retry, undefined);
  assert.equal(removed.timeout_ms, 1000);
  assert.ok(removed.formation_version > set.formation_version);
});
