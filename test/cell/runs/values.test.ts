// GET /api/public/v1/admin/jobs/runs/{run_id}/values/{hash}: a step's input or
// output by the hash its journal record names, never another run's value.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { contentHash } from '../../../core/canonical.ts';
import { inProcessCell } from '../../helpers/inproc.ts';

test("values: served when the run's journal names the hash, with a hash the client can check", async () => {
  const t = await inProcessCell();
  try {
    const runs = t.modules.runs.runs;
    const mk = () =>
      t.core.store.write((tx) =>
        runs.createRunTx(tx, { kind: 'job', job_type: 'compute', requester: 'p', spec: {}, state: 'running', at: t.clock.now() }),
      );
    const runA = await mk();
    const runB = await mk();
    const input = { question: 'what is 6 x 7?' };
    const output = { answer: 42, note: 'ünïcødé' };
    await runs.appendJournal(runA, { step_id: 's1', kind: 'step', input_hash: contentHash(input), output_hash: contentHash(output) }, [
      input,
      output,
    ]);
    const secret = { only: 'in run B' };
    await runs.appendJournal(runB, { step_id: 's1', kind: 'step', output_hash: contentHash(secret) }, [null, secret]);
    await runs.finishRun(runA, 'completed', { output });

    const base = `/api/public/v1/admin/jobs/runs/${runA}/values`;
    const got = await t.request('GET', `${base}/${encodeURIComponent(contentHash(output))}`, { token: t.adminKey });
    assert.equal(got.status, 200, got.text);
    assert.deepEqual(got.body, { run_id: runA, hash: contentHash(output), value: output });
    assert.equal(contentHash(got.body.value), got.body.hash, 'the value is the one the record commits to');
    const raw = await t.request('GET', `${base}/${contentHash(input)}`, { token: t.adminKey });
    assert.deepEqual(raw.body.value, input, 'an unencoded colon in the hash works too');
    const none = await t.request('GET', `${base}/${contentHash(null)}`, { token: t.adminKey });
    assert.equal(none.status, 200, 'the empty input of a record is null');
    assert.equal(none.body.value, null);

    // Another run's value, stored in the same table, is not served through this run.
    const foreign = await t.request('GET', `${base}/${contentHash(secret)}`, { token: t.adminKey });
    assert.equal(foreign.status, 404);
    assert.equal(foreign.body.error, 'not_found');
    assert.equal(
      (await t.request('GET', `/api/public/v1/admin/jobs/runs/${runB}/values/${contentHash(secret)}`, { token: t.adminKey })).body.value
        .only,
      'in run B',
    );

    const unknownRun = await t.request('GET', `/api/public/v1/admin/jobs/runs/run_00000000000000000000/values/${contentHash(output)}`, {
      token: t.adminKey,
    });
    assert.equal(unknownRun.status, 404);
    const bad = await t.request('GET', `${base}/md5:abc`, { token: t.adminKey });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error, 'invalid_request');

    const narrow = await t.request('POST', '/api/public/v1/admin/api-keys', {
      token: t.adminKey,
      body: { name: 'teams only', scopes: ['agent_teams.read'] },
    });
    assert.equal(narrow.status, 201);
    const refused = await t.request('GET', `${base}/${contentHash(output)}`, { token: narrow.body.secret });
    assert.equal(refused.status, 403, 'reading values needs system.orchestration.admin.read, like the journal');
    assert.equal((await t.request('GET', `${base}/${contentHash(output)}`)).status, 401);
  } finally {
    await t.close();
  }
});
