// An open event stream ends when its credential stops (issue 36, low finding: a stream kept delivering
// after its key was revoked). The stream of a run that waits (a timer an hour away) is opened with a
// key, an OAuth token, or a key whose role later loses the permission; the credential is revoked (or
// narrowed); the stream ends with a `closed` event carrying the refusal, promptly. A stream whose
// credential stays good stays open through the same changes. In process, on either engine.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { actor } from '../../helpers/actors.ts';
import { basic, form } from '../../helpers/oauth.ts';

const A = '/api/public/v1/admin';
const T = `${A}/agent-teams`;

async function must(t: InProcess, method: string, path: string, body?: unknown): Promise<any> {
  const r = await t.request(method, path, { token: t.adminKey, ...(body !== undefined ? { body } : {}) });
  assert.ok(r.status >= 200 && r.status < 300, `${method} ${path} -> ${r.status} ${r.text}`);
  return r.body;
}

/** A crew run that waits an hour on a timer before its seat: its stream stays open. */
async function waitingRun(t: InProcess): Promise<string> {
  const cap = { allowed_tools: [], permission_mode: 'auto', clearance_level: 0 };
  const a = await must(t, 'POST', `${T}/agents`, { source: 'scratch', role_label: 'r', authority_template: cap });
  await must(t, 'POST', `${T}/agents/${a.agent_id}/budget-ledger`, { budget_limit: 1000 });
  const f = await must(t, 'POST', `${T}/formations`, { name: 'later', pre: [{ kind: 'timer', config: { delay_ms: 3_600_000 } }] });
  const b = await must(t, 'POST', `${T}/formations/${f.formation_id}/billets`, {
    role_label: 'r',
    required_skills: [],
    authority_cap: cap,
  });
  const crew = await must(t, 'POST', `${T}/crews`, { formation_id: f.formation_id, assignments: { [b.billet_id]: a.agent_id } });
  const run = await must(t, 'POST', `${T}/crews/${crew.crew_id}/runs`, { input: 'x' });
  for (let i = 0; i < 500 && (await t.modules.runs.runs.getRun(run.run_id))?.state !== 'waiting'; i++)
    await new Promise((r) => setTimeout(r, 10));
  assert.equal((await t.modules.runs.runs.getRun(run.run_id))?.state, 'waiting');
  return run.run_id as string;
}

interface Stream {
  text(): string;
  /** Resolves with the time (ms since `since`) the stream ended. */
  ended: Promise<number>;
  cancel(): Promise<void>;
}

/** Opens the run's stream with `token` and reads it as it comes. */
async function open(t: InProcess, runId: string, token: string): Promise<Stream & { since: () => void }> {
  const res = await t.app.request(`${A}/jobs/runs/${runId}/events/sse`, { headers: { authorization: `Bearer ${token}` } }, {
    incoming: { socket: { remoteAddress: '127.0.0.1' } },
  } as never);
  assert.equal(res.status, 200, await (res.status === 200 ? Promise.resolve('') : res.text()));
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let text = '';
  let start = performance.now();
  const ended = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return performance.now() - start;
      text += dec.decode(value, { stream: true });
    }
  })();
  // Until the backlog arrived, nothing else is asserted.
  for (let i = 0; i < 200 && !text.includes('event: waiting'); i++) await new Promise((r) => setTimeout(r, 5));
  assert.match(text, /event: waiting/);
  return {
    text: () => text,
    ended,
    since: () => {
      start = performance.now();
    },
    cancel: () => reader.cancel(),
  };
}

/** The `closed` event's data, or undefined. */
function closedEvent(text: string): { error: string; details?: Record<string, unknown> } | undefined {
  const m = /event: closed\ndata: (.*)\n\n/.exec(text);
  return m ? JSON.parse(m[1]!) : undefined;
}

const WINDOW_MS = 1000;

/** The time the stream took to end, or a failure when it is still open after 5 s. */
async function endOf(s: Stream): Promise<number> {
  const open = new Promise<never>((_, reject) =>
    setTimeout(() => reject(new Error('the stream is still open 5 s after the change')), 5000).unref(),
  );
  return Promise.race([s.ended, open]);
}

test('a stream opened with an API key ends when the key is revoked; one whose key stays good stays open', async () => {
  const t = await inProcessCell();
  try {
    const runId = await waitingRun(t);
    const reader = await actor(t, { name: 'watcher', permissions: ['system.orchestration.admin.read'] });
    const bystander = await actor(t, { name: 'bystander', permissions: ['system.orchestration.admin.read'] });
    const s = await open(t, runId, reader.key);
    const other = await open(t, runId, bystander.key);
    s.since();
    await must(t, 'POST', `${A}/api-keys/${reader.keyId}/revoke`);
    const ms = await endOf(s);
    assert.ok(ms < WINDOW_MS, `the stream ended ${Math.round(ms)} ms after the revocation`);
    const closed = closedEvent(s.text());
    assert.equal(closed?.error, 'unauthorized', s.text());
    assert.equal(closed?.details?.['reason'], 'revoked');
    // The other stream heard the same change, judged its own key again, and goes on.
    const late = await Promise.race([other.ended.then(() => 'ended'), new Promise((r) => setTimeout(() => r('open'), 300))]);
    assert.equal(late, 'open');
    assert.equal(closedEvent(other.text()), undefined);
    await other.cancel();
    assert.equal(t.modules.runs.runs.subscriberCount(runId), 0, 'both streams unsubscribed');
  } finally {
    await t.close();
  }
});

test('a stream opened with an OAuth token ends when the token is revoked', async () => {
  const t = await inProcessCell();
  try {
    const runId = await waitingRun(t);
    const svc = await actor(t, { name: 'robot', permissions: ['system.orchestration.admin.read'] });
    // The key serves as the client secret (spec: client_credentials).
    const tok = await form(t, '/oauth/token', { grant_type: 'client_credentials' }, basic(svc.keyId, svc.key));
    assert.equal(tok.status, 200, tok.text);
    const s = await open(t, runId, tok.body.access_token);
    s.since();
    const rev = await form(t, '/oauth/revoke', { token: tok.body.access_token }, basic(svc.keyId, svc.key));
    assert.equal(rev.status, 200);
    const ms = await endOf(s);
    assert.ok(ms < WINDOW_MS, `the stream ended ${Math.round(ms)} ms after the revocation`);
    const closed = closedEvent(s.text());
    assert.equal(closed?.error, 'unauthorized', s.text());
    assert.equal(closed?.details?.['reason'], 'revoked');
  } finally {
    await t.close();
  }
});

test('a stream ends when its credential no longer grants reading runs (the role lost the permission)', async () => {
  const t = await inProcessCell();
  try {
    const runId = await waitingRun(t);
    const reader = await actor(t, { name: 'narrowed', permissions: ['system.orchestration.admin.read', 'audit.read'] });
    const s = await open(t, runId, reader.key);
    s.since();
    await must(t, 'PATCH', `${A}/roles/${reader.role}`, { permissions: ['audit.read'] });
    const ms = await endOf(s);
    assert.ok(ms < WINDOW_MS, `the stream ended ${Math.round(ms)} ms after the change`);
    const closed = closedEvent(s.text());
    assert.equal(closed?.error, 'forbidden', s.text());
    assert.equal(closed?.details?.['required_permission'], 'system.orchestration.admin.read');
  } finally {
    await t.close();
  }
});
