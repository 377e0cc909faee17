/**
 * A waiting run belongs to no cell (its driver let its lease go): an approval
 * recorded on another cell of the group resumes it there. Two in-process
 * cells on one PostgreSQL store; skipped on the embedded engine.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startOpenAIServer } from '../../fixtures/openai-server.ts';
import { TEST_ENGINE } from '../../helpers/inproc.ts';
import { until, twoCells } from './_two-cells.ts';
import { ok, provider, team, T, type Api } from '../../helpers/teams.ts';

test('an approval on another cell resumes a waiting run there', { skip: TEST_ENGINE !== 'postgres' }, async () => {
  const ai = await startOpenAIServer({
    apiKey: 'sk-fake',
    respond: (req) =>
      req.messages.at(-1)!.role === 'tool'
        ? { content: 'stored' }
        : { tool_calls: [{ name: 'kv__put', arguments: { key: 'greeting', value: 'hello' } }] },
  });
  const { a, b, close } = await twoCells();
  try {
    const api: Api = { request: a.request, token: a.adminKey };
    await provider(api, ai);
    const cap = { allowed_tools: ['kv.put', 'kv.get'], permission_mode: 'ask', egress_allowlist: ['kv:*'] };
    const tm = await team(api, 'sequential', [{ role: 'scribe', cap }]);
    const r = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'remember hello' });
    const waiting = await until('the run to wait', async () => {
      const s = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${r.run_id}`);
      return s.state === 'waiting' ? s : null;
    });
    const row = await a.row('SELECT lease_owner FROM runs WHERE run_id = ?', [r.run_id]);
    assert.equal(row?.['lease_owner'], null, 'a waiting run belongs to no cell');
    const step = waiting.pending_approvals[0].step_id as string;
    const apiB: Api = { request: b.request, token: a.adminKey };
    await ok(apiB, 'POST', `${T}/crews/${tm.crew}/runs/${r.run_id}/approvals/${encodeURIComponent(step)}`, { decision: 'approve' });
    const done = await until('the run to complete', async () => {
      const s = await ok(apiB, 'GET', `${T}/crews/${tm.crew}/runs/${r.run_id}`);
      return s.state === 'completed' ? s : null;
    });
    assert.equal(done.coordinator, 'cell-b', 'resumed where the decision was recorded');
  } finally {
    await close();
    await ai.close();
  }
});
