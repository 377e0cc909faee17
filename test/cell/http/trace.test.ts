// W3C traceparent (issue 13), in process on both engines: a crew run started by a request that
// carries one sends the same trace (new span ids) to the model provider, and its journal records
// name the request's traceparent; an invalid header is ignored; a request without one adds nothing.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { parseTraceparent } from '../../../cell/http/trace.ts';
import type { FakeOpenAI } from '../../fixtures/openai-server.ts';
import type { InProcess } from '../../helpers/inproc.ts';
import { T, crewFixture, roleOf, team, type Api } from '../../helpers/teams.ts';

let t: InProcess;
let ai: FakeOpenAI;
let api: Api;
before(async () => {
  ({ t, ai, api } = await crewFixture());
});
after(async () => {
  await t.close();
  await ai.close();
});

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';

async function startRun(crew: string, headers: Record<string, string>) {
  const r = await t.request('POST', `${T}/crews/${crew}/runs`, { token: t.adminKey, body: { input: 'go' }, headers });
  assert.equal(r.status, 201, r.text);
  const runId = (r.body as { run_id: string }).run_id;
  await t.modules.teams.teams.settled(runId);
  return runId;
}

test('a traced request: provider calls carry its trace with new span ids; the run journal names it', async () => {
  ai.setResponder((req) => ({ content: `${roleOf(req)} done` }));
  const tm = await team(api, 'sequential', [{ role: 'writer' }, { role: 'editor' }]);
  const from = ai.requests.length;
  const runId = await startRun(tm.crew, { traceparent: `00-${TRACE}-${PARENT}-01` });
  const calls = ai.requests.slice(from);
  assert.equal(calls.length, 2);
  const spans = new Set<string>();
  for (const c of calls) {
    const m = new RegExp(`^00-${TRACE}-([0-9a-f]{16})-01$`).exec(c.traceparent ?? '');
    assert.ok(m, `provider call traceparent: ${c.traceparent}`);
    assert.notEqual(m[1], PARENT);
    spans.add(m[1]!);
  }
  assert.equal(spans.size, 2, 'each call its own span');
  const journal = await t.modules.runs.runs.readJournal(runId);
  const named = journal.filter((r) => (r.data as { traceparent?: string } | undefined)?.traceparent === `00-${TRACE}-${PARENT}-01`);
  assert.ok(
    named.some((r) => r.kind === 'run_finished'),
    journal.map((r) => r.kind).join(','),
  );
  assert.ok(named.length >= journal.length - 1, `${named.length} of ${journal.length} records name the trace`);
});

test('no traceparent, or an invalid one: nothing is sent on and the journal names none', async () => {
  ai.setResponder((req) => ({ content: `${roleOf(req)} done` }));
  const tm = await team(api, 'sequential', [{ role: 'solo' }]);
  for (const headers of [{}, { traceparent: `00-${'0'.repeat(32)}-${PARENT}-01` }, { traceparent: 'garbage' }]) {
    const from = ai.requests.length;
    const runId = await startRun(tm.crew, headers);
    assert.deepEqual(
      ai.requests.slice(from).map((c) => c.traceparent),
      [undefined],
    );
    const journal = await t.modules.runs.runs.readJournal(runId);
    assert.ok(!journal.some((r) => (r.data as { traceparent?: string } | undefined)?.traceparent), JSON.stringify(headers));
  }
});

test('parseTraceparent follows the W3C rules', () => {
  assert.deepEqual(parseTraceparent(`00-${TRACE}-${PARENT}-01`), { traceId: TRACE, parentId: PARENT, flags: '01' });
  assert.deepEqual(parseTraceparent(`01-${TRACE}-${PARENT}-00-more`), { traceId: TRACE, parentId: PARENT, flags: '00' });
  for (const bad of [
    undefined,
    '',
    `00-${TRACE}-${PARENT}-01-more`,
    `ff-${TRACE}-${PARENT}-01`,
    `00-${TRACE.toUpperCase()}-${PARENT}-01`,
    `00-${'0'.repeat(32)}-${PARENT}-01`,
    `00-${TRACE}-${'0'.repeat(16)}-01`,
    `00-${TRACE}-${PARENT}`,
  ]) {
    assert.equal(parseTraceparent(bad), null, String(bad));
  }
});
