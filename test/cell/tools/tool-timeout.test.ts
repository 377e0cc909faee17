/**
 * A step's `timeout_ms` cancels a tool call in flight (issue #24), for every
 * kind of tool that can wait: the run fails `step_timeout` near the deadline,
 * and the work stops.
 * - http.get (a crew seat's tool call under its billet's timeout): the server
 *   that never answers sees its connection closed.
 * - compute (a job's endless loop under the spec's timeout): QuickJS is
 *   interrupted; with every sandbox slot taken by such loops, the next job
 *   still runs at once, so the slots were freed.
 * - sql (a job's endless statement): the embedded engine's worker is
 *   terminated, PostgreSQL's backend too (pg_stat_activity no longer shows the
 *   statement); the workspace takes its next job at once.
 * Every time cap here is far above the timeout, so only the timeout can end them.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import pg from 'pg';
import type { FakeOpenAI } from '../../fixtures/openai-server.ts';
import type { InProcess } from '../../helpers/inproc.ts';
import { A, T, ok, type Api, agent, crewFixture } from '../../helpers/teams.ts';

let t: InProcess;
let ai: FakeOpenAI;
let api: Api;
before(async () => {
  ({ t, ai, api } = await crewFixture({ egressAllowPrivate: ['127.0.0.1'] }));
});
after(async () => {
  await t.close();
  await ai.close();
});

/** Far above every timeout below: a run that ends before it was ended by its timeout. */
const CAP_MS = 60_000;

async function ended(runId: string): Promise<any> {
  for (let i = 0; i < 6000; i++) {
    const state = (await t.modules.runs.runs.getRun(runId))?.state ?? '';
    if (['completed', 'failed', 'refused', 'cancelled'].includes(state)) return ok(api, 'GET', `${A}/jobs/runs/${runId}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.fail(`run ${runId} did not end`);
}

async function job(job_type: string, workspace_id: string, spec: Record<string, unknown>): Promise<string> {
  return (await ok(api, 'POST', `${A}/jobs/runs`, { job_type, workspace_id, spec })).run_id as string;
}

test('http.get: the timeout aborts the request (the server sees its connection closed) and fails the step', async () => {
  let received = 0;
  let closed = 0;
  let openFor = Infinity;
  const silent = createServer((req: IncomingMessage, res: ServerResponse) => {
    received++;
    const at = Date.now();
    req.resume();
    res.on('close', () => {
      if (res.writableEnded) return;
      closed++;
      openFor = Date.now() - at;
    });
  });
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/never`;
  try {
    ai.setResponder((req) =>
      req.messages.at(-1)!.role === 'tool' ? { content: 'done' } : { tool_calls: [{ name: 'http__get', arguments: { url } }] },
    );
    const cap = { allowed_tools: ['http.get'], permission_mode: 'auto', clearance_level: 0, egress_allowlist: ['127.0.0.1'] };
    const f = await ok(api, 'POST', `${T}/formations`, { name: 'http-timeout' });
    const b = await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
      role_label: 'fetcher',
      required_skills: [],
      authority_cap: cap,
      timeout_ms: 1000,
    });
    const a = await agent(api, 'fetcher', cap);
    const c = await ok(api, 'POST', `${T}/crews`, { formation_id: f.formation_id, assignments: { [b.billet_id]: a } });
    const run = await ok(api, 'POST', `${T}/crews/${c.crew_id}/runs`, { input: 'go' });
    const done = await ended(run.run_id);
    assert.equal(done.state, 'failed');
    assert.equal(done.error.reason, 'step_timeout', JSON.stringify(done.error));
    assert.equal(done.error.details.tool, 'http.get');
    assert.equal(received, 1);
    for (let i = 0; i < 500 && closed === 0; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(closed, 1, 'the request was aborted: the server saw its connection closed');
    // Closed by the step's deadline (1 s), not by http.get's own 5 s header timeout.
    assert.ok(openFor < 4000, `the connection stayed open ${openFor} ms`);
  } finally {
    silent.closeAllConnections();
    await new Promise<void>((r) => silent.close(() => r()));
    ai.setResponder(() => ({ content: 'ok' }));
  }
});

test('compute: the timeout interrupts an endless loop and frees its sandbox', async () => {
  const t0 = Date.now();
  // As many loops as the pool has slots (4): if they kept running, the next job would wait for their cap.
  const loops = await Promise.all(
    [1, 2, 3, 4].map(() => job('compute', 'tt-compute', { code: 'while (true) {}', time_limit_ms: CAP_MS, timeout_ms: 1000 })),
  );
  for (const id of loops) {
    const r = await ended(id);
    assert.equal(r.state, 'failed');
    assert.equal(r.error.reason, 'step_timeout', JSON.stringify(r.error));
  }
  const next = await ended(await job('compute', 'tt-compute', { code: 'return 41 + 1', time_limit_ms: CAP_MS }));
  assert.equal(next.state, 'completed', JSON.stringify(next.error));
  assert.equal(next.output.result, 42);
  assert.ok(Date.now() - t0 < CAP_MS / 2, `the loops were stopped (took ${Date.now() - t0} ms)`);
});

test('sql: the timeout stops the statement (its backend on PostgreSQL) and the workspace takes the next job', async () => {
  const endless =
    t.engine === 'postgres'
      ? 'SELECT pg_sleep(600)'
      : 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000000000) SELECT count(*) FROM c';
  const t0 = Date.now();
  const slow = await ended(await job('sql', 'tt-sql', { sql: endless, time_limit_ms: CAP_MS, timeout_ms: 1000 }));
  assert.equal(slow.state, 'failed');
  assert.equal(slow.error.reason, 'step_timeout', JSON.stringify(slow.error));
  if (t.engine === 'postgres') {
    const c = new pg.Client({ connectionString: t.core.config.storeUrl! });
    await c.connect();
    try {
      let left = -1;
      for (let i = 0; i < 500; i++) {
        left = Number((await c.query("SELECT count(*) AS n FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(600)'")).rows[0].n);
        if (left === 0) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.equal(left, 0, 'the statement no longer runs');
    } finally {
      await c.end();
    }
  }
  // Jobs of one workspace run one at a time: the next one ran, so the first no longer holds the workspace.
  const next = await ended(await job('sql', 'tt-sql', { sql: 'SELECT 1 AS one', time_limit_ms: CAP_MS }));
  assert.equal(next.state, 'completed', JSON.stringify(next.error));
  assert.ok(Date.now() - t0 < CAP_MS / 2, `the statement was stopped (took ${Date.now() - t0} ms)`);
});

test('a job spec refuses a timeout_ms out of range', async () => {
  for (const timeout_ms of [0, 86_400_001, 1.5, 'soon']) {
    const r = await t.request('POST', `${A}/jobs/runs`, {
      token: t.adminKey,
      body: { job_type: 'compute', workspace_id: 'tt-compute', spec: { code: 'return 1', timeout_ms } },
    });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.body.error, 'invalid_request');
  }
});
