/**
 * Jobs API against the real cell process (dist/cell.mjs): every job type end
 * to end (sandbox caps included), list bounds, unknown run, idempotent cancel,
 * and the SSE stream read by a real EventSource client (eventsource@4) with a
 * disconnect and a Last-Event-ID resume.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { EventSource } from 'eventsource';
import { startCellProcess, type CellProcess } from '../helpers/cell-process.ts';
import { TEST_ENGINE } from '../helpers/inproc.ts';

const SQLITE_ONLY =
  TEST_ENGINE === 'postgres'
    ? 'SQLite dialect and files: on PostgreSQL a workspace database is a schema (test/cell/jobs/sql-workspaces.test.ts)'
    : false;

let cell: CellProcess;
before(async () => {
  cell = await startCellProcess({ env: { CELL_SSE_HEARTBEAT_MS: '200' } });
});
after(async () => {
  await cell.stop();
  cell.cleanup();
});

const RUNS = '/api/public/v1/admin/jobs/runs';

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(cell.url + path, {
    method,
    headers: { authorization: `Bearer ${cell.adminKey}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
}

/** Polls the status until the run is terminal (bounded). */
async function finished(runId: string, maxMs = 30_000): Promise<any> {
  const until = Date.now() + maxMs;
  for (let i = 0; Date.now() < until && i < 2000; i++) {
    const s = await call('GET', `${RUNS}/${runId}`);
    if (['completed', 'failed', 'refused', 'cancelled'].includes(s.body.state)) return s.body;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`run ${runId} did not finish`);
}

async function runJob(job_type: string, spec: unknown, workspace_id = 'e2e'): Promise<any> {
  const r = await call('POST', RUNS, { job_type, workspace_id, spec });
  assert.equal(r.status, 202, JSON.stringify(r.body));
  assert.match(r.body.run_id, /^run_[0-9a-f]{20}$/);
  return finished(r.body.run_id);
}

test('each job type runs end to end on the real process', { skip: SQLITE_ONLY }, async () => {
  const c = await runJob('compute', { code: 'return input.xs.map((x) => x * x);', input: { xs: [1, 2, 3] } });
  assert.equal(c.state, 'completed', JSON.stringify(c));
  assert.deepEqual(c.output.result, [1, 4, 9]);
  const s1 = await runJob('sql', {
    statements: [
      { sql: 'CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER)' },
      { sql: 'INSERT INTO kv VALUES (:k, :v)', params: { k: 'a', v: 1 } },
    ],
  });
  assert.equal(s1.state, 'completed', JSON.stringify(s1));
  const s2 = await runJob('sql', { sql: 'SELECT k, v FROM kv' });
  assert.deepEqual(s2.output.results[0].rows, [['a', 1]]);
  const nb = await runJob('notebook', {
    cells: [
      { type: 'markdown', source: 'hello' },
      { type: 'sql', sql: 'SELECT v FROM kv' },
      { type: 'compute', code: 'return input.cells[1].results[0].rows[0][0] + 1;' },
    ],
  });
  assert.equal(nb.state, 'completed', JSON.stringify(nb));
  assert.equal(nb.output.cells[2].result, 2);
  const single = await runJob('single', { tool: 'calc', args: { expression: '2 ^ 10' } });
  assert.equal(single.state, 'completed', JSON.stringify(single));
});

test('compute sandbox on the real process: endless loop, memory hog, host access', async () => {
  const loop = await runJob('compute', { code: 'while (true) {}', time_limit_ms: 500 });
  assert.equal(loop.state, 'failed');
  assert.equal(loop.error.reason, 'time_limit');
  assert.match(loop.error.message, /time cap of 500 ms/);
  const mem = await runJob('compute', {
    code: 'const keep = []; for (let i = 0; ; i++) keep.push({ i, s: "payload-" + i });',
    memory_limit_bytes: 8 * 1024 * 1024,
    time_limit_ms: 20_000,
  });
  assert.equal(mem.state, 'failed');
  assert.equal(mem.error.reason, 'memory_limit', JSON.stringify(mem.error));
  const host = await runJob('compute', { code: 'return process.env;' });
  assert.equal(host.state, 'failed');
  assert.equal(host.error.reason, 'script_error');
  assert.match(host.error.message, /process/);
  const imp = await runJob('compute', { code: 'return import("node:fs");' });
  assert.equal(imp.state, 'failed', 'no module loader: a dynamic import never reaches the host');
  // The cell still answers quickly after all that.
  const ok = await runJob('compute', { code: 'return 1;' });
  assert.equal(ok.state, 'completed');
});

test('list bounds, unknown run and idempotent cancel on the real process', async () => {
  for (const bad of ['0', '2001', '-5', 'ten']) assert.equal((await call('GET', `${RUNS}?limit=${bad}`)).status, 400, bad);
  const l = await call('GET', RUNS);
  assert.equal(l.status, 200);
  assert.equal(l.body.limit, 200);
  assert.ok(l.body.items.every((i: any) => typeof i.checked_cell_id === 'string'));
  const u = await call('GET', `${RUNS}/run_00000000000000000000`);
  assert.equal(u.status, 200);
  assert.equal(u.body.state, 'unknown');
  assert.equal(typeof u.body.checked_cell_id, 'string');
  const r = await call('POST', RUNS, { job_type: 'compute', workspace_id: 'e2e', spec: { code: 'for (;;) {}', time_limit_ms: 60_000 } });
  await new Promise((res) => setTimeout(res, 300));
  const t0 = Date.now();
  const c1 = await call('POST', `${RUNS}/${r.body.run_id}/cancel`);
  assert.equal(c1.status, 200);
  assert.equal(c1.body.state, 'cancelled');
  assert.ok(Date.now() - t0 < 8_000, 'the running step was interrupted');
  const c2 = await call('POST', `${RUNS}/${r.body.run_id}/cancel`);
  assert.deepEqual(c2.body, c1.body);
  const j = await call('GET', `${RUNS}/${r.body.run_id}/journal`);
  const kinds = j.body.records.map((x: any) => x.kind);
  assert.ok(kinds.includes('cancel_requested'));
  assert.equal(j.body.records.at(-1).data.outcome, 'cancelled');
});

/** Every kind of journal record a job run writes (an event's type is its record's kind). */
const RECORD_KINDS = ['run_started', 'intent', 'step', 'cancel_requested', 'taken_over', 'run_finished'];

function authFetch(extra: Record<string, string> = {}) {
  return (input: string | URL, init?: any) =>
    fetch(input, { ...init, headers: { ...(init?.headers ?? {}), authorization: `Bearer ${cell.adminKey}`, ...extra } });
}

test('SSE: a real EventSource reads live events with ids, disconnects, resumes with Last-Event-ID without loss or duplicates; the stream ends after run_finished', async () => {
  // Six compute cells of ~150 ms each: events arrive over about a second.
  const cells = Array.from({ length: 6 }, (_, i) => ({
    type: 'compute',
    code: `const t = Date.now(); while (Date.now() - t < 150) {} return ${i};`,
  }));
  const r = await call('POST', RUNS, { job_type: 'notebook', workspace_id: 'e2e', spec: { cells } });
  assert.equal(r.status, 202);
  const url = `${cell.url}${RUNS}/${r.body.run_id}/events/sse`;
  const seen: number[] = [];
  const kinds: string[] = [];

  // First client: read the first few events, then disconnect.
  await new Promise<void>((resolve, reject) => {
    const es = new EventSource(url, { fetch: authFetch() });
    const timer = setTimeout(() => {
      es.close();
      reject(new Error('no events'));
    }, 20_000);
    es.onmessage = () => {};
    // Records written in one commit arrive in one chunk: what follows the third is the second client's.
    const on = (e: MessageEvent) => {
      if (seen.length >= 3) return;
      seen.push(Number(e.lastEventId));
      kinds.push(e.type);
      if (seen.length >= 3) {
        clearTimeout(timer);
        es.close();
        resolve();
      }
    };
    for (const k of RECORD_KINDS) es.addEventListener(k, on as any);
    es.onerror = () => {};
  });
  assert.deepEqual(seen, [1, 2, 3]);

  // Second client resumes after the last id it saw.
  const last = seen.at(-1)!;
  await new Promise<void>((resolve, reject) => {
    const es = new EventSource(url, { fetch: authFetch({ 'last-event-id': String(last) }) });
    const timer = setTimeout(() => {
      es.close();
      reject(new Error(`stream did not finish; saw ${seen.join(',')}`));
    }, 30_000);
    const on = (e: MessageEvent) => {
      seen.push(Number(e.lastEventId));
      kinds.push(e.type);
      const rec = JSON.parse(e.data);
      assert.equal(rec.seq, Number(e.lastEventId));
      assert.equal(rec.run_id, r.body.run_id);
      if (e.type === 'run_finished') {
        clearTimeout(timer);
        es.close();
        resolve();
      }
    };
    for (const k of RECORD_KINDS) es.addEventListener(k, on as any);
  });
  const j = await call('GET', `${RUNS}/${r.body.run_id}/journal`);
  assert.deepEqual(
    seen,
    j.body.records.map((x: any) => x.seq),
    'every event exactly once, in order',
  );
  assert.equal(kinds.at(-1), 'run_finished');

  // The server closes the stream after the terminal event; a finished run with nothing left answers 204.
  const full = await fetch(url, { headers: { authorization: `Bearer ${cell.adminKey}` } });
  assert.equal(full.status, 200);
  const text = await full.text(); // resolves only because the server ends the stream
  assert.equal((text.match(/^id: /gm) ?? []).length, j.body.records.length);
  const done = await fetch(url, { headers: { authorization: `Bearer ${cell.adminKey}`, 'last-event-id': String(seen.at(-1)) } });
  assert.equal(done.status, 204);
});

test('SSE: heartbeats are comment lines while a run is idle; unknown run is 404', async () => {
  const r = await call('POST', RUNS, {
    job_type: 'compute',
    workspace_id: 'e2e',
    spec: { code: 'const t = Date.now(); while (Date.now() - t < 900) {} return 1;', time_limit_ms: 5000 },
  });
  const res = await fetch(`${cell.url}${RUNS}/${r.body.run_id}/events/sse`, { headers: { authorization: `Bearer ${cell.adminKey}` } });
  assert.equal(res.headers.get('content-type'), 'text/event-stream');
  const text = await res.text();
  assert.match(text, /^: heartbeat$/m);
  assert.match(text, /event: run_finished/);
  const u = await fetch(`${cell.url}${RUNS}/run_00000000000000000000/events/sse`, {
    headers: { authorization: `Bearer ${cell.adminKey}` },
  });
  assert.equal(u.status, 404);
  const anon = await fetch(`${cell.url}${RUNS}/${r.body.run_id}/events/sse`);
  assert.equal(anon.status, 401);
});
