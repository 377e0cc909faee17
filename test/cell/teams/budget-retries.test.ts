/**
 * Failed and retried model calls are charged (issue 36, low finding: 50 partly streamed failed calls left
 * a ledger at `spent: 0`). A provider streams part of an answer and cuts the connection: each failed call
 * is charged what streamed (one token a fragment) and its prompt estimated (one token per four
 * characters: core/engine/budget.ts), in the agent's ledger and in the attempt's journal record; a call
 * the client retries itself after a cut stream is charged the failed attempt beside the answer's usage.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { promptTokens } from '../../../core/engine/budget.ts';
import { startOpenAIServer } from '../../fixtures/openai-server.ts';
import { inProcessCell } from '../../helpers/inproc.ts';
import { A, T, agent, ok, type Api } from '../../helpers/teams.ts';

const CAP = { allowed_tools: [], permission_mode: 'auto', clearance_level: 0 };

/** A cell whose only provider streams (with `maxRetries` retries of its own), and a one-seat crew under `retry`. */
async function world(maxRetries: number, retry?: Record<string, unknown>) {
  const t = await inProcessCell();
  const ai = await startOpenAIServer({ apiKey: 'sk-fake' });
  const api: Api = { request: t.request, token: t.adminKey };
  const s = await ok(api, 'POST', `${A}/secrets`, { name: 'k', value: 'sk-fake' });
  await ok(api, 'POST', `${A}/ai/model-providers`, {
    provider_type: 'openai-compatible',
    default_model: 'fake-model',
    base_url: `${ai.url}/v1`,
    api_key_secret_id: s.secret_id,
    max_retries: maxRetries,
    stream: true,
  });
  const f = await ok(api, 'POST', `${T}/formations`, { name: 'w' });
  const b = await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
    role_label: 'worker',
    required_skills: [],
    authority_cap: CAP,
    ...(retry ? { retry } : {}),
  });
  const agentId = await agent(api, 'worker', CAP, 1_000_000);
  const crew = (await ok(api, 'POST', `${T}/crews`, { formation_id: f.formation_id, assignments: { [b.billet_id]: agentId } })).crew_id;
  const finished = async (runId: string) => {
    for (let i = 0; i < 3000; i++) {
      const st = (await t.modules.runs.runs.getRun(runId))?.state ?? '';
      if (['completed', 'failed', 'refused', 'cancelled'].includes(st)) return st;
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.fail(`run ${runId} did not end`);
  };
  const spent = async () => {
    await t.modules.teams.teams.sweepNow();
    return (await ok(api, 'GET', `${T}/agents/${agentId}/budget-ledger`)).spent as number;
  };
  const close = async () => {
    await t.close();
    await ai.close();
  };
  return { t, ai, api, crew, finished, spent, close };
}

/** Each piece after a moment, so the client has read the pieces before the cut (as from a real provider). */
const paced = () => new Promise<void>((r) => setTimeout(r, 5));

/** What one attempt that streamed `fragments` pieces and broke consumed, by the request it made. */
const cutCharge = (body: { messages: { content: string | null }[] }, fragments: number) => fragments + promptTokens(body.messages);

test('50 partly streamed failed calls are charged to the ledger and recorded on their attempts', async () => {
  const retry = { max_attempts: 10, backoff_ms: 0, max_backoff_ms: 0, on: ['provider_unreachable'] };
  const w = await world(0, retry);
  try {
    // Every call streams two pieces of its answer, then the connection is cut.
    w.ai.setResponder(() => ({ content: 'never finished', pieces: ['never ', 'fini', 'shed'], breakAfter: 2, beforePiece: paced }));
    const runs: string[] = [];
    for (let i = 0; i < 5; i++) runs.push((await ok(w.api, 'POST', `${T}/crews/${w.crew}/runs`, { input: `task ${i}` })).run_id);
    for (const r of runs) assert.equal(await w.finished(r), 'failed');
    assert.equal(w.ai.requests.length, 50, '5 runs of 10 attempts');
    const expected = w.ai.requests.reduce((n, r) => n + cutCharge(r.body, 2), 0);
    assert.equal(await w.spent(), expected, 'every cut call is charged what streamed and its prompt');
    const j = await w.t.modules.runs.runs.readJournal(runs[0]!, 0, 1000);
    const attempts = j.filter((r) => r.kind === 'attempt');
    assert.equal(attempts.length, 10);
    for (const a of attempts) assert.equal(a.data?.['usage'], cutCharge(w.ai.requests[0]!.body, 2), JSON.stringify(a.data));
  } finally {
    await w.close();
  }
});

test("a call the provider client retries after a cut stream is charged the cut attempt beside the answer's usage", async () => {
  const w = await world(1);
  try {
    let n = 0;
    w.ai.setResponder(() =>
      n++ === 0
        ? { content: 'half', pieces: ['ha', 'lf', '!'], breakAfter: 2, beforePiece: paced }
        : { content: 'whole answer', usage: { prompt_tokens: 21, completion_tokens: 4 } },
    );
    const run = (await ok(w.api, 'POST', `${T}/crews/${w.crew}/runs`, { input: 'go' })).run_id;
    assert.equal(await w.finished(run), 'completed');
    assert.equal(w.ai.requests.length, 2);
    const cut = cutCharge(w.ai.requests[0]!.body, 2);
    assert.equal(await w.spent(), 25 + cut);
    const step = (await w.t.modules.runs.runs.readJournal(run, 0, 1000)).find((r) => r.kind === 'step' && r.step_id.includes('/model/'))!;
    assert.equal(step.data?.['usage'], 25, "the step's usage is its answer's");
    assert.equal(step.data?.['failed_usage'], cut);
  } finally {
    await w.close();
  }
});
