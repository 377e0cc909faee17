// The cell's metrics recorded by the modules (issue 13), in process on both engines: a crew run
// against a real HTTP server speaking Chat Completions moves the model-call, token, run, journal
// and finished-run figures; a refusal is counted by code and reason. Parsed with the Prometheus
// project's own parser.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { FakeOpenAI } from '../../fixtures/openai-server.ts';
import type { InProcess } from '../../helpers/inproc.ts';
import { parseExposition, type PromSample } from '../../helpers/prometheus.ts';
import { T, crewFixture, ok, roleOf, team, type Api } from '../../helpers/teams.ts';

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

const scrape = async () => parseExposition(await t.modules.ops.ops.exposition());
const value = (m: PromSample[], name: string, labels: Record<string, string> = {}) =>
  m.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).reduce((a, s) => a + s.value, 0);

test('a crew run moves model calls, tokens, latency, runs by kind and state, journal records, finished runs', async () => {
  ai.setResponder((req) => ({ content: `${roleOf(req)} done` }));
  const tm = await team(api, 'sequential', [{ role: 'writer' }, { role: 'editor' }]);
  const providerId = (await t.modules.ai.ai.providers(1))[0]!.provider_id;
  const before = await scrape();
  const r = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' }, [201]);
  await t.modules.teams.teams.settled(r.run_id);
  const after = await scrape();
  const moved = (name: string, labels: Record<string, string> = {}) => value(after, name, labels) - value(before, name, labels);
  assert.equal(moved('cell_model_calls_total', { provider: providerId, outcome: 'ok' }), 2);
  assert.equal(moved('cell_model_call_duration_seconds_count', { provider: providerId }), 2);
  assert.ok(moved('cell_model_tokens_total', { provider: providerId, kind: 'prompt' }) > 0, 'prompt tokens counted');
  assert.equal(moved('cell_runs', { kind: 'crew', state: 'completed' }), 1);
  assert.equal(moved('cell_runs_finished_total', { state: 'completed' }), 1);
  assert.equal(moved('cell_run_journal_records_total', { kind: 'run_finished' }), 1);
  assert.ok(moved('cell_run_journal_records_total') >= 4, 'steps recorded');
});

test('refusals are counted by code and reason', async () => {
  const before = await scrape();
  const r = await t.request('POST', `${T}/crews/nope/runs`, { token: t.adminKey, rawBody: '['.repeat(100) + ']'.repeat(100) });
  assert.equal(r.status, 400);
  const after = await scrape();
  assert.equal(
    value(after, 'cell_refusals_total', { code: 'invalid_request', reason: 'too_deep' }) -
      value(before, 'cell_refusals_total', { code: 'invalid_request', reason: 'too_deep' }),
    1,
  );
});

test('a scheduled fire is counted, with how late it fired', async () => {
  const before = await scrape();
  const d = await t.request('POST', '/api/public/v1/admin/jobs/definitions', {
    token: t.adminKey,
    body: { name: 'metrics-fire', job_type: 'compute', workspace_id: 'w', spec: { code: 'return 1' }, cron: '*/5 * * * *' },
  });
  assert.equal(d.status, 201, d.text);
  // 5 min 30 s on: the first five-minute slot has passed, by 30 s to 5 min 30 s (where the clock stood in its slot).
  t.clock.advance(5 * 60_000 + 30_000);
  assert.equal(await t.modules.jobs.scheduler.tick(), 1);
  const after = await scrape();
  assert.equal(value(after, 'cell_scheduler_fires_total') - value(before, 'cell_scheduler_fires_total'), 1);
  assert.equal(value(after, 'cell_scheduler_lateness_seconds_count') - value(before, 'cell_scheduler_lateness_seconds_count'), 1);
  const late = value(after, 'cell_scheduler_lateness_seconds_sum') - value(before, 'cell_scheduler_lateness_seconds_sum');
  assert.ok(late >= 30 && late <= 330, `lateness ${late} s`);
});

test('SSE subscribers: counted while a stream is open, not after it closed', async () => {
  const runs = t.modules.runs.runs;
  const runId = await t.core.store.write((tx) =>
    runs.createRunTx(tx, { kind: 'crew', crew_id: 'crw_x', requester: 'p', spec: {}, state: 'running', at: t.clock.now() }),
  );
  const gauge = async () => value(await scrape(), 'cell_sse_subscribers');
  const base = await gauge();
  const res = await t.app.request(
    `/api/public/v1/admin/jobs/runs/${runId}/events/sse`,
    { headers: { authorization: `Bearer ${t.adminKey}` } },
    {
      incoming: { socket: { remoteAddress: '127.0.0.1' } },
    } as never,
  );
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  await reader.read(); // the stream is open: its first bytes arrived
  // Subscribing reads the backlog first (a query): the gauge moves once the subscription stands.
  for (let i = 0; i < 200 && (await gauge()) === base; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(await gauge(), base + 1);
  await runs.finishRun(runId, 'completed', { output: 1 });
  while (!(await reader.read()).done);
  for (let i = 0; i < 100 && (await gauge()) !== base; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(await gauge(), base);
});
