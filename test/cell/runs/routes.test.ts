import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell } from '../../helpers/inproc.ts';

const ids = (text: string) => [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));

test('journal and SSE routes: snapshot, after_seq, resume by header or query, 204 when nothing is left', async () => {
  const t = await inProcessCell();
  try {
    const runs = t.modules.runs.runs;
    const runId = await t.core.store.write((tx) =>
      runs.createRunTx(tx, { kind: 'crew', crew_id: 'crw_x', requester: 'p', spec: {}, state: 'running', at: t.clock.now() }),
    );
    for (let i = 0; i < 3; i++) await runs.appendJournal(runId, { step_id: `s${i}`, kind: 'step' });
    await runs.finishRun(runId, 'completed', { output: 1 });
    const base = `/api/public/v1/admin/jobs/runs/${runId}`;
    const j = await t.request('GET', `${base}/journal?after_seq=2`, { token: t.adminKey });
    assert.equal(j.status, 200);
    assert.deepEqual(
      j.body.records.map((r: { seq: number }) => r.seq),
      [3, 4],
    );
    assert.equal(j.body.finished, true);
    assert.equal(j.body.state, 'completed');
    assert.equal((await t.request('GET', `${base}/journal?after_seq=-1`, { token: t.adminKey })).status, 400);

    const all = await t.request('GET', `${base}/events/sse`, { token: t.adminKey });
    assert.equal(all.status, 200);
    assert.match(all.headers.get('content-type') ?? '', /text\/event-stream/);
    assert.deepEqual(ids(all.text), [1, 2, 3, 4], 'a finished run: the whole journal, then the stream ends');
    // Each record's frame, byte for byte: event, one data line (the record as JSON), id, blank line.
    const full = await t.request('GET', `${base}/journal`, { token: t.adminKey });
    const frames = (full.body.records as { seq: number; kind: string }[]).map(
      (r) => `event: ${r.kind}\ndata: ${JSON.stringify(r)}\nid: ${r.seq}\n\n`,
    );
    assert.equal(all.text, `retry: 1000\n\n${frames.join('')}`);
    assert.match(all.text, /^event: run_finished$/m);
    assert.match(all.text, /^retry: 1000$/m);
    const byHeader = await t.request('GET', `${base}/events/sse`, { token: t.adminKey, headers: { 'last-event-id': '2' } });
    assert.deepEqual(ids(byHeader.text), [3, 4]);
    const byQuery = await t.request('GET', `${base}/events/sse?last_event_id=3`, { token: t.adminKey });
    assert.deepEqual(ids(byQuery.text), [4]);
    const none = await t.request('GET', `${base}/events/sse`, { token: t.adminKey, headers: { 'last-event-id': '4' } });
    assert.equal(none.status, 204);
    assert.equal(runs.subscriberCount(runId), 0, 'closed streams unsubscribe');
    const crewRead = await t.request('GET', `/api/public/v1/admin/jobs/runs/${runId}`, { token: t.adminKey });
    assert.equal(crewRead.body.kind, 'crew', 'crew runs share the run id space');
  } finally {
    await t.close();
  }
});
