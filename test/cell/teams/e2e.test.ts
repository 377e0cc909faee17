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
import { T, httpApi, ok, provider, roleOf, team } from '../../helpers/teams.ts';
import { until } from '../../helpers/until.ts';
import { TEST_ENGINE } from '../../helpers/inproc.ts';

let ai: FakeOpenAI;
const procs: CellProcess[] = [];
before(async () => {
  ai = await startOpenAIServer({ apiKey: 'sk-fake' });
});
after(async () => {
  for (const p of procs) await p.kill().catch(() => undefined);
  procs[0]?.cleanup();
  await ai.close();
});

test('SIGKILL mid-run, a peer cell recovers: finished steps are not re-run, no model called twice for them', {
  timeout: 90_000,
}, async () => {
  // On PostgreSQL a group of two (multi-cell); cell-a's long lease keeps the peer from taking the run over by itself.
  const group = TEST_ENGINE === 'postgres' ? ['--posture', 'multi-cell'] : [];
  const a = await startCellProcess({ args: ['--cell-id', 'cell-a', '--lease-ms', '60000', ...group] });
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
  const graphA = await ok(apiA, 'GET', `${T}/formations/${tm.formation}/graph?crew_id=${tm.crew}`);
  const run = await ok(apiA, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'task' });
  await until('the s2 model call', async () => (ai.requests.some((r) => roleOf(r.body) === 's2') ? true : undefined));
  await a.kill('SIGKILL');

  hang = false;
  const b = await startCellProcess({ dataDir: a.dataDir, args: ['--cell-id', 'cell-b', ...group] });
  procs.push(b);
  const apiB = httpApi(b.url, a.adminKey);
  const graphB = await ok(apiB, 'GET', `${T}/formations/${tm.formation}/graph?crew_id=${tm.crew}`);
  assert.equal(graphB.graph_hash, graphA.graph_hash, 'the compiler gives the same hash in another process');
  assert.deepEqual(graphB.graph, graphA.graph);
  const before = await ok(apiB, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
  assert.equal(before.graph_hash, graphA.graph_hash);
  assert.equal(before.state, 'running');
  assert.equal(before.coordinator, 'cell-a');

  // Recover is refused while cell-a's heartbeat is fresh, allowed once it is late (suspect).
  await until('cell-a to be late', async () => {
    const cells = await ok(apiB, 'GET', '/api/public/v1/admin/cells');
    return cells.items.find((c: { cell_id: string }) => c.cell_id === 'cell-a').state !== 'live' ? true : undefined;
  });
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
  for (const [i, r] of records.entries()) assert.equal(r.seq, i + 1);

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
    const r = await api.request('POST', '/api/public/v1/admin/ai/model-providers', {
      body: { provider_type: 'openai-compatible', default_model: 'gpt', base_url: 'https://api.openai.com/v1' },
    });
    assert.equal(r.status, 403);
    assert.equal(r.body.details.reason, 'posture_forbidden');
    const local = await api.request('POST', '/api/public/v1/admin/ai/model-providers', {
      body: { provider_type: 'openai-compatible', default_model: 'm', base_url: `${ai.url}/v1` },
    });
    assert.equal(local.status, 201, local.text);
  } finally {
    await c.stop();
    c.cleanup();
  }
});

test('every coordination policy end to end in the real process', { timeout: 90_000 }, async () => {
  const c = await startCellProcess();
  procs.push(c);
  try {
    const api = httpApi(c.url, c.adminKey);
    await provider(api, ai, 'sk-fake', true); // this cell asks for streamed answers
    ai.setResponder((req) => {
      const role = roleOf(req);
      const user = req.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';
      if (role === 'lead') {
        const m = /(blt_[0-9a-f]{20}): analyst/.exec(user);
        return { content: m ? m[1]! : 'lead approves' };
      }
      if (role.startsWith('voter')) return { content: role === 'voter3' ? 'blue' : 'Green' };
      return { content: `${role} answer` };
    });
    const finish = async (crew: string, input: unknown) => {
      const r = await ok(api, 'POST', `${T}/crews/${crew}/runs`, { input });
      return until(`run ${r.run_id}`, async () => {
        const s = await ok(api, 'GET', `${T}/crews/${crew}/runs/${r.run_id}`);
        return ['completed', 'failed', 'refused', 'cancelled'].includes(s.state) ? s : undefined;
      });
    };
    const seq = await team(api, 'sequential', [{ role: 'first' }, { role: 'second' }]);
    const par = await team(api, 'parallel', [{ role: 'p1' }, { role: 'p2' }]);
    const con = await team(api, 'consensus', [{ role: 'voter1' }, { role: 'voter2' }, { role: 'voter3' }]);
    const mgr = await team(api, 'manager-delegates', [
      { role: 'lead' },
      { role: 'analyst', reports_to: 'lead' },
      { role: 'designer', reports_to: 'lead' },
    ]);
    const [s1, s2, s3, s4] = await Promise.all([
      finish(seq.crew, 'a'),
      finish(par.crew, 'b'),
      finish(con.crew, 'c'),
      finish(mgr.crew, 'd'),
    ]);
    assert.equal(s1.state, 'completed', JSON.stringify(s1.error));
    assert.equal(s1.output, 'second answer');
    assert.equal(s2.state, 'completed', JSON.stringify(s2.error));
    assert.deepEqual(Object.values(s2.output as object).sort(), ['p1 answer', 'p2 answer']);
    assert.equal(s3.state, 'completed', JSON.stringify(s3.error));
    assert.match(JSON.stringify(s3.output), /green/i);
    assert.equal(s4.state, 'completed', JSON.stringify(s4.error));
    assert.equal(s4.output, 'lead approves');
    assert.ok(!ai.requests.some((r) => roleOf(r.body) === 'designer'), 'the report not chosen is never called');
    assert.ok(
      ai.requests.filter((r) => roleOf(r.body) === 'lead').every((r) => r.body['stream'] === true),
      'streamed',
    );
    const journal = await ok(api, 'GET', `/api/public/v1/admin/jobs/runs/${s4.run_id}/journal`);
    const recs = (journal.records ?? journal.events ?? journal.journal) as { kind: string; data?: { choice?: string } }[];
    assert.equal(recs.find((r) => r.data?.choice)!.data!.choice, mgr.billets['analyst']);
  } finally {
    await c.stop();
    c.cleanup();
  }
});

test('an approval that times out fails closed, also across a restart', { timeout: 60_000 }, async () => {
  const a = await startCellProcess();
  procs.push(a);
  const api = httpApi(a.url, a.adminKey);
  await provider(api, ai);
  ai.setResponder(() => ({ content: 'never needed' }));
  const approval = (ms: number) => [{ kind: 'human_approval', config: { rule: 'quorum', quorum: 1, timeout_ms: ms } }];
  const quick = await team(api, 'sequential', [{ role: 'q1' }], { pre: approval(300) });
  const slow = await team(api, 'sequential', [{ role: 'q2' }], { pre: approval(2500) });
  const r1 = await ok(api, 'POST', `${T}/crews/${quick.crew}/runs`, { input: 'x' });
  const r2 = await ok(api, 'POST', `${T}/crews/${slow.crew}/runs`, { input: 'x' });
  const s1 = await until('the short approval to time out', async () => {
    const s = await ok(api, 'GET', `${T}/crews/${quick.crew}/runs/${r1.run_id}`);
    return s.state === 'refused' ? s : undefined;
  });
  assert.equal(s1.error.reason, 'approval_timeout');
  assert.equal((await ok(api, 'GET', `${T}/crews/${slow.crew}/runs/${r2.run_id}`)).state, 'waiting');
  await a.kill('SIGKILL');
  await new Promise((r) => setTimeout(r, 2600));
  const b = await startCellProcess({ dataDir: a.dataDir });
  procs.push(b);
  const apiB = httpApi(b.url, a.adminKey);
  const s2 = await until('the restarted cell to time the approval out', async () => {
    const s = await ok(apiB, 'GET', `${T}/crews/${slow.crew}/runs/${r2.run_id}`);
    return s.state === 'refused' ? s : undefined;
  });
  assert.equal(s2.error.reason, 'approval_timeout');
  assert.ok(!ai.requests.some((r) => ['q1', 'q2'].includes(roleOf(r.body))), 'no model was called behind a closed approval');
  await b.stop();
  b.cleanup();
});
