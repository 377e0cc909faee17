/**
 * An event stream open on one cell of a group ends when its credential is revoked on another (issue 36,
 * low finding): two real cell processes on one PostgreSQL database; a run waits on a timer; its stream is
 * read over HTTP from the second cell with an API key (and another with an OAuth token); the key and the
 * token are revoked through the first cell; each stream ends with a `closed` event within the window a
 * revocation takes to reach every cell (one second), where it used to deliver on.
 *
 * Needs `node scripts/build.mjs` first, and PostgreSQL 15 (test/helpers/postgres.ts).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { pgUnavailable } from '../helpers/postgres.ts';
import { call, ok, startGroup, type Group } from '../helpers/group.ts';

const skip = pgUnavailable() ?? false;
const A = '/api/public/v1/admin';
const T = `${A}/agent-teams`;

/** Reads a stream over HTTP until it ends; resolves with its text and when it ended. */
async function follow(base: string, path: string, token: string) {
  const res = await fetch(base + path, { headers: { authorization: `Bearer ${token}` } });
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let text = '';
  let endedAt = 0;
  const ended = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        endedAt = Date.now();
        return;
      }
      text += dec.decode(value, { stream: true });
    }
  })();
  for (let i = 0; i < 400 && !text.includes('event: waiting'); i++) await new Promise((r) => setTimeout(r, 5));
  assert.match(text, /event: waiting/);
  return { text: () => text, ended, endedAt: () => endedAt, cancel: () => reader.cancel() };
}

describe('event streams across a group end when their credential is revoked on another cell', { skip, timeout: 120_000 }, () => {
  let g: Group;
  let a: string;
  let b: string;
  before(async () => {
    g = await startGroup(2);
    [a, b] = g.cells.map((c) => c.url) as [string, string];
  });
  after(async () => {
    await g?.stop();
  });

  test('a key revoked on cell A ends its stream on cell B within the second; a token likewise', async (t) => {
    const admin = { token: g.adminKey };
    const cap = { allowed_tools: [], permission_mode: 'auto', clearance_level: 0 };
    const agent = await ok(a, 'POST', `${T}/agents`, { ...admin, body: { source: 'scratch', role_label: 'r', authority_template: cap } });
    await ok(a, 'POST', `${T}/agents/${agent.agent_id}/budget-ledger`, { ...admin, body: { budget_limit: 1000 } });
    const f = await ok(a, 'POST', `${T}/formations`, {
      ...admin,
      body: { name: 'later', pre: [{ kind: 'timer', config: { delay_ms: 3_600_000 } }] },
    });
    const billet = await ok(a, 'POST', `${T}/formations/${f.formation_id}/billets`, {
      ...admin,
      body: { role_label: 'r', required_skills: [], authority_cap: cap },
    });
    const crew = await ok(a, 'POST', `${T}/crews`, {
      ...admin,
      body: { formation_id: f.formation_id, assignments: { [billet.billet_id]: agent.agent_id } },
    });
    const run = await ok(a, 'POST', `${T}/crews/${crew.crew_id}/runs`, { ...admin, body: { input: 'x' } });
    for (let i = 0; i < 500 && (await call(a, 'GET', `${A}/jobs/runs/${run.run_id}`, admin)).body?.state !== 'waiting'; i++)
      await new Promise((r) => setTimeout(r, 10));

    const key = await ok(a, 'POST', `${A}/api-keys`, { ...admin, body: { name: 'watcher', scopes: ['system.orchestration.admin.read'] } });
    const tok = await call(a, 'POST', '/oauth/token', {
      form: { grant_type: 'client_credentials' },
      headers: { authorization: `Basic ${Buffer.from(`${key.key_id}:${key.secret}`).toString('base64')}` },
    });
    assert.equal(tok.status, 200, tok.text);
    const path = `${A}/jobs/runs/${run.run_id}/events/sse`;
    const byToken = await follow(b, path, tok.body.access_token);
    const revokedAt = Date.now();
    const rev = await call(a, 'POST', '/oauth/revoke', {
      form: { token: tok.body.access_token },
      headers: { authorization: `Basic ${Buffer.from(`${key.key_id}:${key.secret}`).toString('base64')}` },
    });
    assert.equal(rev.status, 200);
    await byToken.ended;
    const tokenMs = byToken.endedAt() - revokedAt;
    assert.match(byToken.text(), /event: closed\ndata: .*"reason":"revoked"/);

    const byKey = await follow(b, path, key.secret);
    const keyRevokedAt = Date.now();
    await ok(a, 'POST', `${A}/api-keys/${key.key_id}/revoke`, admin);
    await byKey.ended;
    const keyMs = byKey.endedAt() - keyRevokedAt;
    assert.match(byKey.text(), /event: closed\ndata: .*"reason":"revoked"/);
    t.diagnostic(`stream on B ended ${tokenMs} ms after the token's revocation on A, ${keyMs} ms after the key's`);
    assert.ok(
      tokenMs < 1500 && keyMs < 1500,
      `streams on cell B ended ${tokenMs} ms (token) and ${keyMs} ms (key) after the revocation on A`,
    );
  });
});
