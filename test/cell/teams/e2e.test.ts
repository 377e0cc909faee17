/**
 * End to end against the real cell process (dist/cell.mjs) and a real HTTP
 * server speaking Chat Completions: a crew run whose coordinator is killed
 * with SIGKILL mid-run is recovered by a second cell process (another cell
 * id) on the same data directory; completed steps are reused, so no model is
 * called twice for a finished step. Needs `node scripts/build.mjs` first.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startCellProcess, type CellProcess } from '../../helpers/cell-process.ts';
import { startOpenAIServer, type FakeOpenAI } from '../../fixtures/openai-server.ts';
import { T, ok, provider, roleOf, team, type Api } from './_setup.ts';

let ai: FakeOpenAI;
const procs: CellProcess[] = [];
before(async () => { ai = await startOpenAIServer({ apiKey: 'sk-fake' }); });
after(async () => {
  for (const p of procs) await p.kill().catch(() => undefined);
  procs[0]?.cleanup();
  await ai.close();
});

function httpApi(url: string, token: string): Api {
  return {
    token,
    async request(method, path, opts = {}) {
      const res = await fetch(url + path, {
        method,
        headers: { authorization: `Bearer ${opts.token ?? token}`, ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}) },
        ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
      });
      const text = await res.text();
      let body: unknown;
      try { body = text ? JSON.parse(text) : undefined; } catch { body = undefined; }
      return { status: res.status, body, text };
    },
  };
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (let i = 0; Date.now() < end; i++) {
    const v = await fn();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

test('SIGKILL mid-run, a peer cell recovers: finished steps are not re-run, no model called twice for them', { timeout: 90_000 }, async () => {
  const a = await startCellProcess({ args: ['--cell-id', 'cell-a'] });
  procs.push(a);
  const apiA = httpApi(a.url, a.adminKey);
  await provider(apiA, ai);
  let hang = true;
  ai.setResponder((req) => {
    const role = roleOf(req);
    if (role === 's2' && hang) return { content: 'too late', delayMs: 60_000 };
    return { content: `${role} done` };
  });
  const tm = await team(apiA, 'sequential', [{ role: 's1' }, { role: 's2' }, { role: 's3' }]);
  const run = await ok(apiA, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'task' });
  await until('the s2 model call', async () => (ai.requests.some((r) => roleOf(r.body) === 's2') ? true : undefined));
  await a.kill('SIGKILL');

  hang = false;
  const b = await startCellProcess({ dataDir: a.dataDir, args: ['--cell-id', 'cell-b'] });
  procs.push(b);
  const apiB = httpApi(b.url, a.adminKey);
  const before = await ok(apiB, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
  assert.equal(before.state, 'running');
  assert.equal(before.coordinator, 'cell-a');

  const rec = await ok(apiB, 'POST', `${T}/crews/${tm.crew}/runs/${run.run_id}/recover`, undefined, [202]);
  assert.equal(rec.run_id, run.run_id);
  const done = await until('the recovered run to finish', async () => {
    const s = await ok(apiB, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
    return ['completed', 'failed', 'refused'].includes(s.state) ? s : undefined;
  });
  assert.equal(done.state, 'completed', JSON.stringify(done.error));
  assert.equal(done.output, 's3 done');
  assert.equal(done.coordinator, 'cell-b');
  const calls = (role: string) => ai.requests.filter((r) => roleOf(r.body) === role).length;
  assert.equal(calls('s1'), 1, 's1 finished before the kill: its recorded answer is reused');
  assert.equal(calls('s2'), 2, 's2 was in flight: asked again once');
  assert.equal(calls('s3'), 1);

  const journal = await ok(apiB, 'GET', `/api/public/v1/admin/jobs/runs/${run.run_id}/journal`);
  const records = (journal.records ?? journal.events ?? journal.journal) as { kind: string; seq: number }[];
  assert.ok(Array.isArray(records), JSON.stringify(journal).slice(0, 200));
  assert.ok(records.some((r) => r.kind === 'recovered'));
  assert.equal(records.at(-1)!.kind, 'run_finished');
  records.forEach((r, i) => assert.equal(r.seq, i + 1));

  // A second recover of a finished run is a conflict, not a re-run.
  const again = await apiB.request('POST', `${T}/crews/${tm.crew}/runs/${run.run_id}/recover`);
  assert.equal(again.status, 409);
  assert.equal(calls('s3'), 1);
  await b.stop();
});

test('posture: a sovereign cell refuses a public provider at registration', { timeout: 60_000 }, async () => {
  const c = await startCellProcess({ args: ['--posture', 'sovereign'] });
  procs.push(c);
  try {
    const api = httpApi(c.url, c.adminKey);
    const r = await api.request('POST', '/api/public/v1/admin/ai/model-providers', { body: { provider_type: 'openai-compatible', default_model: 'gpt', base_url: 'https://api.openai.com/v1' } });
    assert.equal(r.status, 403);
    assert.equal(r.body.details.reason, 'posture_forbidden');
    const local = await api.request('POST', '/api/public/v1/admin/ai/model-providers', { body: { provider_type: 'openai-compatible', default_model: 'm', base_url: `${ai.url}/v1` } });
    assert.equal(local.status, 201, local.text);
  } finally {
    await c.stop();
    c.cleanup();
  }
});
