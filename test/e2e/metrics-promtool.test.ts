/**
 * The cell's metrics as Prometheus's own linter reads them (issue 25): the
 * exposition a live cell process serves on --metrics-port, after a crew run
 * filled its counters, passes `promtool check metrics` (Debian's prometheus
 * package; `make promtool-deps` installs it), and the token counters count
 * per agent and per provider what the provider reported.
 * Needs `node scripts/build.mjs` first.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, test } from 'node:test';
import { startCellProcess, type CellProcess } from '../helpers/cell-process.ts';
import { startOpenAIServer, type FakeOpenAI } from '../fixtures/openai-server.ts';
import { T, ok, provider, roleOf, team } from '../helpers/teams.ts';
import { httpApi, metric, metricsUrl, until } from './_runs.ts';

const PROMTOOL = '/usr/bin/promtool';

let ai: FakeOpenAI;
let cell: CellProcess;
before(async () => {
  ai = await startOpenAIServer({ apiKey: 'sk-fake' });
  cell = await startCellProcess({ args: ['--metrics-port', '0'] });
});
after(async () => {
  await cell?.stop();
  cell?.cleanup();
  await ai?.close();
});

test('promtool check metrics passes on a live cell, and tokens are counted per agent and per provider', { timeout: 90_000 }, async () => {
  const api = httpApi(cell.url, cell.adminKey);
  const providerId = await provider(api, ai);
  ai.setResponder((req) => ({ content: `${roleOf(req)} done`, usage: { prompt_tokens: 11, completion_tokens: 7 } }));
  const tm = await team(api, 'sequential', [{ role: 'one' }, { role: 'two' }]);
  const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'task' });
  await until('the run to complete', async () => {
    const s = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
    return s.state === 'completed' ? s : undefined;
  });
  const url = metricsUrl(cell);
  const text = await (await fetch(url)).text();

  const r = spawnSync(PROMTOOL, ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 30_000 });
  assert.equal(r.error, undefined, `promtool is missing: run 'make promtool-deps' (${String(r.error)})`);
  assert.equal(r.status, 0, `promtool check metrics:\n${r.stdout}${r.stderr}`);
  assert.equal(`${r.stdout}${r.stderr}`.trim(), '', 'no lint warning either');

  for (const role of ['one', 'two']) {
    assert.equal(await metric(url, 'cell_agent_tokens_total', { agent: tm.agents[role]!, kind: 'prompt' }), 11);
    assert.equal(await metric(url, 'cell_agent_tokens_total', { agent: tm.agents[role]!, kind: 'completion' }), 7);
  }
  assert.equal(await metric(url, 'cell_model_tokens_total', { provider: providerId, kind: 'prompt' }), 22);
  assert.equal(await metric(url, 'cell_model_tokens_total', { provider: providerId, kind: 'completion' }), 14);
  // prom-client's gauges named like counters are gone; the per-type gauges beside them stay.
  assert.ok(!/^nodejs_active_handles_total/m.test(text));
  assert.ok(/^nodejs_active_handles\{/m.test(text) || /^nodejs_active_handles /m.test(text));
});
