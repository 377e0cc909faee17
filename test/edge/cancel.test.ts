// Cancelling an offline run at the edge (edge/offline.ts): the requester cancels, another principal is
// refused as the cell refuses a caller without reach, a waiting run ends `cancelled` with a final record
// in a journal that verifies with the device key, and an ended run is answered as it is.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { verifyJournal } from '../../core/journal/verify.ts';
import { TEST_FAIL_MODEL_CALLS_ENV } from '../../edge/offline.ts';
import { findRuntime } from '../../runtime/local-model.ts';
import { edgeWorld, OTHER_SECRET } from './_edge-fixtures.ts';
import { start } from './_offline-app.ts';

let skip: string | false = false;
try {
  findRuntime();
} catch {
  skip = 'edge-runtime/ is not installed (npm install --prefix edge-runtime --omit=optional)';
}

const RUNS = '/api/public/v1/admin/agent-teams/crews/crw_1/runs';

test('the requester cancels an offline run; another principal cannot; the journal ends cancelled and verifies', {
  skip,
  timeout: 60_000,
}, async () => {
  // The first local model call fails and the step waits a long backoff: the run is waiting when it is cancelled.
  const w = await edgeWorld({
    otherOwnerKey: true,
    policies: { a: { retry: { max_attempts: 3, backoff_ms: 600_000, max_backoff_ms: 600_000, on: ['provider_error'] } } },
  });
  process.env[TEST_FAIL_MODEL_CALLS_ENV] = '1';
  const e = await start(w);
  delete process.env[TEST_FAIL_MODEL_CALLS_ENV];
  try {
    const p = await e.req('POST', RUNS, { input: 'check the valve' });
    assert.equal(p.status, 202, JSON.stringify(p.body));
    const id = p.body.run_id as string;
    let run: any;
    for (let i = 0; i < 400; i++) {
      run = (await e.req('GET', `${RUNS}/${id}`)).body;
      if (run.state !== 'running') break;
      await new Promise((r) => setTimeout(r, 25));
    }
    assert.equal(run.state, 'waiting', JSON.stringify(run));

    // Another principal, with every permission the route needs: refused, and the run is untouched.
    const other = await e.req('POST', `${RUNS}/${id}/cancel`, undefined, OTHER_SECRET);
    assert.equal(other.status, 403, JSON.stringify(other.body));
    assert.equal(other.body.details.reason, 'shared_change_exceeds_caller');
    assert.equal((await e.req('GET', `${RUNS}/${id}`)).body.state, 'waiting');
    assert.equal((await e.req('POST', `${RUNS}/run_nope/cancel`)).status, 404);

    // The requester: the waiting run is driven again to record its end.
    const c = await e.req('POST', `${RUNS}/${id}/cancel`);
    assert.equal(c.status, 200, JSON.stringify(c.body));
    assert.equal(c.body.cancel_requested, true);
    for (let i = 0; i < 400; i++) {
      run = (await e.req('GET', `${RUNS}/${id}`)).body;
      if (run.state === 'cancelled') break;
      await new Promise((r) => setTimeout(r, 25));
    }
    assert.equal(run.state, 'cancelled', JSON.stringify(run));
    assert.equal(run.cancel_requested_by, 'usr_1');

    const j = (await e.req('GET', `/api/public/v1/admin/jobs/runs/${id}/journal`)).body;
    const last = j.records.at(-1);
    assert.equal(last.kind, 'run_finished');
    assert.equal(last.data.outcome, 'cancelled');
    const v = await verifyJournal(j.records, (kid: string) => (kid === w.device.device_id ? w.device.public_jwk : undefined));
    assert.equal(v.ok, true, JSON.stringify(v));
    assert.equal(
      j.records.filter((r: { kind: string }) => r.kind === 'step').length,
      0,
      'nothing ran after the cancel: the failed call is the only call',
    );

    // An ended run is answered as it is.
    const again = await e.req('POST', `${RUNS}/${id}/cancel`);
    assert.equal(again.status, 200);
    assert.equal(again.body.state, 'cancelled');
  } finally {
    await e.setup.model?.dispose();
    rmSync(w.dir, { recursive: true, force: true });
  }
});
