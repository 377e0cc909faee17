import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { waitFinished } from './_wait.ts';

let t: InProcess;
let svcKey: string;
let svcId: string;
before(async () => {
  t = await inProcessCell();
  const p = await t.request('POST', '/api/public/v1/admin/principals', {
    token: t.adminKey,
    body: { kind: 'service', name: 'jobs-bot', roles: ['jobs'] },
  });
  assert.equal(p.status, 201, p.text);
  svcId = p.body.id;
  const k = await t.request('POST', '/api/public/v1/admin/api-keys', {
    token: t.adminKey,
    body: { name: 'jobs-only', owner_id: svcId, scopes: ['system.orchestration.admin.read', 'system.orchestration.admin.write'] },
  });
  assert.equal(k.status, 201, k.text);
  svcKey = k.body.secret;
});
after(async () => {
  await t.close();
});

const RUNS = '/api/public/v1/admin/jobs/runs';
const submit = (body: unknown, token = t.adminKey) => t.request('POST', RUNS, { token, body });

test('requester comes from the session: a requester field in the body is refused; the run names the key owner', async () => {
  const bad = await submit({ job_type: 'compute', workspace_id: 'w', spec: { code: 'return 1' }, requester: 'usr_someone_else' });
  assert.equal(bad.status, 400);
  assert.equal(bad.body.details.reason, 'requester_from_session');
  const ok = await submit({ job_type: 'compute', workspace_id: 'w', spec: { code: 'return 1' } }, svcKey);
  assert.equal(ok.status, 202, ok.text);
  await waitFinished(t.modules.runs.runs, ok.body.run_id);
  const s = await t.request('GET', `${RUNS}/${ok.body.run_id}`, { token: svcKey });
  assert.equal(s.body.requester, svcId);
  assert.equal(s.body.state, 'completed');
});

test('a jobs-only key reaches jobs and nothing else', async () => {
  assert.equal((await t.request('GET', RUNS, { token: svcKey })).status, 200);
  assert.equal((await t.request('GET', '/api/public/v1/admin/jobs/definitions', { token: svcKey })).status, 200);
  assert.equal((await t.request('GET', '/api/public/v1/admin/jobs/endpoints', { token: svcKey })).status, 200);
  for (const path of [
    '/api/public/v1/admin/api-keys',
    '/api/public/v1/admin/principals',
    '/api/public/v1/admin/audit',
    '/api/public/v1/admin/agent-teams/crews',
  ]) {
    const r = await t.request('GET', path, { token: svcKey });
    assert.ok(r.status === 403 || r.status === 404, `${path}: ${r.status}`);
    if (r.status === 403) assert.equal(r.body.error, 'forbidden');
  }
  const readOnly = await t.request('POST', '/api/public/v1/admin/api-keys', {
    token: t.adminKey,
    body: { name: 'jobs-read', owner_id: svcId, scopes: ['system.orchestration.admin.read'] },
  });
  const ro = readOnly.body.secret as string;
  assert.equal((await t.request('GET', RUNS, { token: ro })).status, 200);
  const w = await submit({ job_type: 'compute', workspace_id: 'w', spec: { code: 'return 1' } }, ro);
  assert.equal(w.status, 403, 'write needs system.orchestration.admin.write');
  assert.equal((await t.request('GET', RUNS)).status, 401);
});

test('list: limit default 200, 1..2000; 0, 2001, negative and non-numeric are 400; stable order; checked_cell_id', async () => {
  for (let i = 0; i < 3; i++) {
    const r = await submit({ job_type: 'compute', workspace_id: 'w', spec: { code: `return ${i}` } });
    await waitFinished(t.modules.runs.runs, r.body.run_id);
  }
  const all = await t.request('GET', RUNS, { token: t.adminKey });
  assert.equal(all.status, 200);
  assert.equal(all.body.limit, 200);
  assert.ok(all.body.items.length >= 3);
  for (const it of all.body.items) assert.equal(it.checked_cell_id, 'cell-test');
  for (const bad of ['0', '2001', '-1', 'abc', '1.5']) {
    const r = await t.request('GET', `${RUNS}?limit=${bad}`, { token: t.adminKey });
    assert.equal(r.status, 400, `limit=${bad}`);
    assert.equal(r.body.error, 'invalid_request');
  }
  assert.equal((await t.request('GET', `${RUNS}?limit=2000`, { token: t.adminKey })).status, 200);
  assert.equal((await t.request('GET', `${RUNS}?offset=-1`, { token: t.adminKey })).status, 400);
  const p1 = await t.request('GET', `${RUNS}?limit=2&offset=0`, { token: t.adminKey });
  const p2 = await t.request('GET', `${RUNS}?limit=2&offset=2`, { token: t.adminKey });
  const ids = [...p1.body.items, ...p2.body.items].map((r: { run_id: string }) => r.run_id);
  assert.deepEqual(
    ids,
    all.body.items.slice(0, 4).map((r: { run_id: string }) => r.run_id),
    'pages concatenate to the full list',
  );
  const again = await t.request('GET', RUNS, { token: t.adminKey });
  assert.deepEqual(
    again.body.items.map((r: { run_id: string }) => r.run_id),
    all.body.items.map((r: { run_id: string }) => r.run_id),
  );
});

test('unknown run: state unknown with checked_cell_id (200, not 404)', async () => {
  const r = await t.request('GET', `${RUNS}/run_ffffffffffffffffffff`, { token: t.adminKey });
  assert.equal(r.status, 200);
  assert.deepEqual(r.body, {
    run_id: 'run_ffffffffffffffffffff',
    job_id: 'run_ffffffffffffffffffff',
    state: 'unknown',
    checked_cell_id: 'cell-test',
  });
  const j = await t.request('GET', `${RUNS}/run_ffffffffffffffffffff/journal`, { token: t.adminKey });
  assert.equal(j.status, 404);
  assert.equal((await t.request('POST', `${RUNS}/run_ffffffffffffffffffff/cancel`, { token: t.adminKey })).status, 404);
});

test('a malformed run id is 400 invalid_request naming the parameter, on every run route but the status, before any lookup', async () => {
  // One declaration (cell/runs/api.ts runIdPath) for the jobs, runs, crew and device-journal routes.
  const hash = `sha256:${'0'.repeat(64)}`;
  for (const id of ['nope', 'run_FFFFFFFFFFFFFFFFFFFF', 'run_0123', `run_${'0'.repeat(21)}`]) {
    for (const [method, path, param] of [
      ['GET', `${RUNS}/${id}/journal`, 'run_id'],
      ['GET', `${RUNS}/${id}/values/${hash}`, 'run_id'],
      ['POST', `${RUNS}/${id}/cancel`, 'run_id'],
      ['POST', `${RUNS}/${id}/rerun`, 'run_id'],
      ['POST', `${RUNS}/${id}/approvals/s1`, 'run_id'],
      ['GET', `/api/public/v1/admin/agent-teams/crews/crw_x/runs/${id}`, 'run_id'],
      ['GET', `/api/public/v1/admin/edge/journals/${id}`, 'run_id'],
    ] as const) {
      const body = method === 'POST' && path.includes('/approvals/') ? { decision: 'approve' } : undefined;
      const r = await t.request(method, path, { token: t.adminKey, ...(body ? { body } : {}) });
      assert.equal(r.status, 400, `${method} ${path}: ${r.text}`);
      assert.equal(r.body.error, 'invalid_request', path);
      assert.ok(
        r.body.details.issues.some((i: { path: string }) => i.path === param),
        `${path} names ${param}: ${r.text}`,
      );
    }
    // The status route answers any job it did not find with state unknown (the spec), a malformed id included.
    const st = await t.request('GET', `${RUNS}/${id}`, { token: t.adminKey });
    assert.equal(st.status, 200, st.text);
    assert.equal(st.body.state, 'unknown');
  }
});

test('cancel interrupts a running compute step, is recorded, and is idempotent', async () => {
  const r = await submit({ job_type: 'compute', workspace_id: 'w', spec: { code: 'for (;;) {}', time_limit_ms: 30_000 } });
  // Wait until the step is running (run_started journaled), then cancel.
  let started!: () => void;
  const isRunning = new Promise<void>((resolve) => {
    started = resolve;
  });
  const unsub = await t.modules.runs.runs.subscribe(r.body.run_id, 0, (rec) => {
    if (rec.kind === 'run_started') started();
  });
  await isRunning;
  unsub();
  const journal = () => t.modules.runs.runs.readJournal(r.body.run_id);
  const cancelAt = Date.now();
  const c1 = await t.request('POST', `${RUNS}/${r.body.run_id}/cancel`, { token: t.adminKey });
  assert.equal(c1.status, 200);
  assert.equal(
    c1.body.state,
    'cancelled',
    JSON.stringify(c1.body) + JSON.stringify((await journal()).map((x) => [x.kind, x.step_id, x.data])),
  );
  assert.ok(Date.now() - cancelAt < 10_000, 'the endless step was interrupted, not waited out');
  const c2 = await t.request('POST', `${RUNS}/${r.body.run_id}/cancel`, { token: t.adminKey });
  assert.equal(c2.status, 200);
  assert.deepEqual(c2.body, c1.body, 'cancelling again answers the same');
  const kinds = (await journal()).map((x) => x.kind);
  assert.ok(kinds.includes('cancel_requested'));
  assert.equal(kinds.at(-1), 'run_finished');
  const records = await journal();
  assert.equal(records.at(-1)!.data!['outcome'], 'cancelled', JSON.stringify(records.map((x) => [x.kind, x.data])));
  // A finished run: cancel is safe and changes nothing.
  const done = await submit({ job_type: 'compute', workspace_id: 'w', spec: { code: 'return 5' } });
  await waitFinished(t.modules.runs.runs, done.body.run_id);
  const c3 = await t.request('POST', `${RUNS}/${done.body.run_id}/cancel`, { token: t.adminKey });
  assert.equal(c3.body.state, 'completed');
  assert.deepEqual(c3.body.output.result, 5);
});

test('bad input is 400, never 5xx', async () => {
  for (const body of [
    { job_type: 'nope', workspace_id: 'w', spec: {} },
    { job_type: 'sql', workspace_id: '../etc', spec: { sql: 'SELECT 1' } },
    { job_type: 'sql', workspace_id: 'w', spec: { sql: 'SELECT 1', statements: [{ sql: 'SELECT 2' }] } },
    { job_type: 'compute', workspace_id: 'w', spec: { code: 'return 1', time_limit_ms: 0 } },
    { job_type: 'notebook', workspace_id: 'w', spec: { cells: [] } },
    { job_type: 'notebook', workspace_id: 'w', spec: { cells: [{ type: 'python', code: 'x' }] } },
  ]) {
    const r = await submit(body);
    assert.equal(r.status, 400, JSON.stringify(body) + r.text);
  }
  const raw = await t.request('POST', RUNS, { token: t.adminKey, rawBody: '{not json' });
  assert.equal(raw.status, 400);
});

test('published endpoints: publish, invoke (sync result), scopes 403, own rpm 429 + Retry-After, input schema 400, unpublish', async () => {
  const pub = await t.request('POST', '/api/public/v1/admin/jobs/endpoints', {
    token: t.adminKey,
    body: {
      name: 'double',
      job_type: 'compute',
      spec: { code: 'return input.n * 2;' },
      rate_limit_rpm: 2,
      required_scopes: ['system.orchestration.admin.read'],
      input_schema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] },
    },
  });
  assert.equal(pub.status, 201, pub.text);
  const path = pub.body.invoke_path as string;
  assert.equal(pub.body.rate_limit_rpm, 2);
  const inv = await t.request('POST', path, { token: svcKey, body: { n: 21 } });
  assert.equal(inv.status, 200, inv.text);
  assert.equal(inv.body.state, 'completed');
  assert.equal(inv.body.output.result, 42);
  const j = await t.modules.runs.runs.readJournal(inv.body.run_id);
  assert.equal(j.at(-1)!.kind, 'run_finished', 'each invocation is a run with a journal');
  const badInput = await t.request('POST', path, { token: svcKey, body: { n: 'x' } });
  assert.equal(badInput.status, 400);
  const limited = await t.request('POST', path, { token: svcKey, body: { n: 1 } });
  assert.equal(limited.status, 429, 'third call over an rpm of 2');
  assert.equal(limited.body.error, 'rate_limited');
  assert.ok(Number(limited.headers.get('retry-after')) >= 1);
  assert.equal(
    (await t.request('GET', RUNS, { token: svcKey })).status,
    200,
    'the gateway and the key are not throttled by the endpoint budget',
  );
  t.clock.advance(60_000);
  assert.equal((await t.request('POST', path, { token: svcKey, body: { n: 2 } })).status, 200, 'the budget refills');
  const other = await t.request('POST', '/api/public/v1/admin/api-keys', {
    token: t.adminKey,
    body: { name: 'teams-only', scopes: ['agent_teams.read'] },
  });
  const denied = await t.request('POST', path, { token: other.body.secret, body: { n: 1 } });
  assert.equal(denied.status, 403);
  assert.equal(denied.body.details.reason, 'missing_scope');
  assert.equal((await t.request('POST', path, { body: { n: 1 } })).status, 401);
  const list = await t.request('GET', '/api/public/v1/admin/jobs/endpoints', { token: t.adminKey });
  assert.equal(list.body.items.length, 1);
  assert.equal(
    (await t.request('DELETE', `/api/public/v1/admin/jobs/endpoints/${pub.body.endpoint_id}`, { token: t.adminKey })).status,
    200,
  );
  assert.equal((await t.request('POST', path, { token: svcKey, body: { n: 1 } })).status, 404);
  const def = await t.request('POST', '/api/public/v1/admin/jobs/endpoints', {
    token: t.adminKey,
    body: { name: 'd', job_type: 'notebook', spec: { cells: [{ type: 'compute', code: 'return input.input;' }] } },
  });
  assert.equal(def.body.rate_limit_rpm, 60, 'default rpm');
  assert.deepEqual(def.body.required_scopes, ['system.orchestration.admin.read'], 'deny by default: a scope is always required');
  // The caller's own per-key ceiling still applies on invocations.
  const slowKey = await t.request('POST', '/api/public/v1/admin/api-keys', {
    token: t.adminKey,
    body: { name: 'slow', owner_id: svcId, scopes: ['system.orchestration.admin.read'], rate_limit_rpm: 1 },
  });
  assert.equal(slowKey.status, 201, slowKey.text);
  const ep2 = `/api/public/v1/jobs/endpoints/${def.body.endpoint_id}/invoke`;
  assert.equal((await t.request('POST', ep2, { token: slowKey.body.secret, body: 3 })).status, 200);
  const keyLimited = await t.request('POST', ep2, { token: slowKey.body.secret, body: 3 });
  assert.equal(keyLimited.status, 429);
  assert.match(keyLimited.body.message, /credential/);
});

test('an endpoint call whose body is not JSON is 400 malformed_request, as at the rest of the cell and the edge', async () => {
  const pub = await t.request('POST', '/api/public/v1/admin/jobs/endpoints', {
    token: t.adminKey,
    body: { name: 'echo', job_type: 'compute', spec: { code: 'return input;' }, rate_limit_rpm: 100 },
  });
  assert.equal(pub.status, 201, pub.text);
  const path = pub.body.invoke_path as string;
  for (const rawBody of ['{"n": 1', '']) {
    const bad = await t.request('POST', path, { token: svcKey, rawBody });
    assert.equal(bad.status, 400, `${JSON.stringify(rawBody)}: ${bad.text}`);
    assert.equal(bad.body.error, 'invalid_request');
    assert.equal(bad.body.details.reason, 'malformed_request');
  }
  const plain = await t.request('POST', path, { token: svcKey, rawBody: '1', headers: { 'content-type': 'text/plain' } });
  assert.equal(plain.status, 400, plain.text);
  assert.equal(plain.body.details.reason, 'unsupported_media_type');
  const empty = await t.request('POST', path, { token: svcKey });
  assert.equal(empty.status, 200, `no body is the input null: ${empty.text}`);
  assert.equal(empty.body.output.result, null);
});
