// The device's own approvals page (issue #39, section 3: "the edge serves a minimal page of its own"), in a
// real browser (Debian's chromium driven by playwright-core) against the real edge program (`node
// dist/edge.mjs serve`, the signed tiny model): a run held by a two-person approval waits offline; the list
// route answers it in the cell's list shape behind agent_teams.read; on `/approvals` (strict CSP, no inline
// script, the key in sessionStorage only) a wrong key shows the 401, the requester's own approval the 403
// `requester_cannot_approve`, and two other principals approve with comments until the run completes; a
// key that may read but not approve sees the 403 naming agent_teams.approve, and a rejection ends a run.
// No cell: one edge process, one browser. Needs `node scripts/build.mjs` (dist/edge.mjs) and edge-runtime/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { chromium, type Page } from 'playwright-core';
import { edgeWorld, NARROW_SECRET, OTHER_SECRET, SECRET, T0 } from '../edge/_edge-fixtures.ts';
import { edgeProgramMissing, serveWorld, stopEdge, untilRun } from '../edge/_edge-process.ts';
import { ARGS, CHROMIUM, axe, newContext, type Watch } from './helpers.ts';

/** usr_3: may read, run and approve crews. */
const APPROVER_SECRET = 'svck_live_' + 'A'.repeat(43);
/** usr_4: may read and run crews, not approve. */
const READER_SECRET = 'svck_live_' + 'R'.repeat(43);
/** A key no bundle carries. */
const STRANGER_SECRET = 'svck_live_' + 'Z'.repeat(43);
const TEAMS = '/api/public/v1/admin/agent-teams';
const RUNS = `${TEAMS}/crews/crw_1/runs`;
const ENDED = (r: any) => ['completed', 'failed', 'refused', 'cancelled'].includes(r.state);

const skip = existsSync(CHROMIUM)
  ? edgeProgramMissing()
  : `${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)`;

test('the edge approvals page: list, sign-in, refusals shown as answered, two approvals complete the run', {
  skip,
  timeout: 120_000,
}, async () => {
  const w = await edgeWorld({
    maxTokens: 4,
    otherOwnerKey: true,
    narrowKey: true,
    extraKeys: [
      { key_id: 'key_4', owner_id: 'usr_3', secret: APPROVER_SECRET, scopes: ['agent_teams'] },
      { key_id: 'key_5', owner_id: 'usr_4', secret: READER_SECRET, scopes: ['agent_teams.read', 'agent_teams.write'] },
    ],
    stages: { pre: [{ kind: 'human_approval', config: { rule: 'two_person', timeout_ms: 3_600_000, prompt: 'Open the valve?' } }] },
  });
  const edge = await serveWorld(w, { offsetMs: T0 + 1000 - Date.now() });
  const call = async (method: string, path: string, secret = SECRET, body?: unknown) => {
    const r = await fetch(edge.url + path, {
      method,
      headers: { authorization: `Bearer ${secret}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: r.status, body: (await r.json()) as any };
  };
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS, timeout: 30_000 });
  try {
    const started = await call('POST', RUNS, SECRET, { input: 'Inspect pump 7.' });
    assert.equal(started.status, 202, JSON.stringify(started.body));
    const id = started.body.run_id as string;
    await untilRun(
      async () => (await call('GET', `${RUNS}/${id}`)).body,
      (r) => r.state === 'waiting' || ENDED(r),
    );

    // The list of what waits for a decision: the cell's list shape and query, behind agent_teams.read.
    const waiting = await call('GET', `${TEAMS}/runs?state=waiting`, APPROVER_SECRET);
    assert.equal(waiting.status, 200, JSON.stringify(waiting.body));
    assert.deepEqual(
      {
        ...waiting.body,
        runs: waiting.body.runs.map((r: any) => [r.run_id, r.state, r.requester, r.pending_approvals.map((p: any) => p.step_id)]),
      },
      { runs: [[id, 'waiting', 'usr_1', ['pre:0']]], limit: 100, offset: 0, total: 1 },
    );
    const perCrew = await call('GET', `${RUNS}?limit=1&offset=0`, APPROVER_SECRET);
    assert.deepEqual([perCrew.status, perCrew.body.total, perCrew.body.runs[0].pending_approvals[0].prompt], [200, 1, 'Open the valve?']);
    assert.equal((await call('GET', `${TEAMS}/runs?state=completed`, APPROVER_SECRET)).body.total, 0);
    const noRead = await call('GET', `${TEAMS}/runs?state=waiting`, NARROW_SECRET);
    assert.deepEqual([noRead.status, noRead.body.details?.required_permission], [403, 'agent_teams.read']);
    assert.equal((await call('GET', `${TEAMS}/runs`, STRANGER_SECRET)).status, 401);
    const badQuery = await call('GET', `${TEAMS}/runs?state=sleeping&limit=0`, APPROVER_SECRET);
    assert.deepEqual(
      [badQuery.status, badQuery.body.error, badQuery.body.details.issues.map((i: any) => i.path).sort()],
      [400, 'invalid_request', ['limit', 'state']],
    );
    assert.equal((await call('GET', `${TEAMS}/crews/crw_9/runs`, APPROVER_SECRET)).status, 404);

    // The page: public static content under the console's policy; no request leaves the device.
    const watch: Watch = { requested: [], problems: [] };
    const context = await newContext(browser, edge.url, watch);
    const page: Page = await context.newPage();
    const res = await page.goto(`${edge.url}/approvals`);
    assert.equal(res?.status(), 200);
    const csp = res!.headers()['content-security-policy'] ?? '';
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.match(csp, /require-trusted-types-for 'script'/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
    assert.equal(res!.headers()['x-frame-options'], 'DENY');
    await axe(page, 'edge approvals, signed out');

    const signIn = async (secret: string) => {
      await page.locator('#key').fill(secret);
      await page.getByRole('button', { name: 'Sign in' }).click();
    };
    const errorText = () => page.locator('#error').innerText();
    const card = page.locator(`article[data-run="${id}"][data-step="pre:0"]`);

    // A key the bundle does not carry: the 401 as answered, and the page stays signed out.
    await signIn(STRANGER_SECRET);
    await page.locator('#error').waitFor();
    assert.match(await errorText(), /401 unauthorized/);
    assert.match(await errorText(), /unknown_key/);
    assert.equal(await page.locator('#signin').isVisible(), true);
    assert.equal(await page.evaluate(() => sessionStorage.length), 0);

    // The requester sees its run's approval, and its own decision is refused under two_person.
    await signIn(SECRET);
    await card.waitFor();
    assert.equal(await page.locator('#error').isVisible(), false);
    const shown = await card.innerText();
    for (const s of ['usr_1', 'two_person', 'Open the valve?', 'Inspect pump 7.', started.body.run_id])
      assert.ok(shown.includes(s), `${s} in ${shown}`);
    const listed = waiting.body.runs[0].pending_approvals[0];
    assert.ok(shown.includes(listed.input_hash), 'the digest approved is shown');
    await axe(page, 'edge approvals, a pending approval');
    // The key is kept for the tab only: not in the URL, not in localStorage, not in a cookie.
    assert.equal(await page.evaluate(() => sessionStorage.getItem('agent-cell-edge-approvals-key')), SECRET);
    assert.equal(await page.evaluate(() => localStorage.length), 0);
    assert.deepEqual(await context.cookies(), []);
    assert.ok(!page.url().includes(SECRET));
    await card.getByLabel('Comment').fill('my own run');
    await card.getByRole('button', { name: 'Approve' }).click();
    await page.locator('#error').waitFor();
    assert.match(await errorText(), /403 forbidden/);
    assert.match(await errorText(), /requester_cannot_approve/);
    assert.deepEqual((await call('GET', `${RUNS}/${id}`)).body.pending_approvals[0].decisions, []);

    // Two other principals approve with comments, each through the page: the run completes.
    await page.getByRole('button', { name: 'Sign out' }).click();
    assert.equal(await page.evaluate(() => sessionStorage.length), 0);
    await signIn(APPROVER_SECRET);
    await card.waitFor();
    await card.getByLabel('Comment').fill('gauge checked');
    await card.getByRole('button', { name: 'Approve' }).click();
    await page.getByText(`Recorded: approve on pre:0 of ${id} (run waiting).`).waitFor();
    assert.match(await card.innerText(), /usr_3: approve \(gauge checked\)/);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await signIn(OTHER_SECRET);
    await card.waitFor();
    await card.getByLabel('Comment').fill('second person');
    await card.getByRole('button', { name: 'Approve' }).click();
    await page.getByText(`Recorded: approve on pre:0 of ${id}`).waitFor();
    const done = await untilRun(async () => (await call('GET', `${RUNS}/${id}`)).body, ENDED);
    assert.equal(done.state, 'completed', JSON.stringify(done));
    assert.deepEqual(
      done.decisions.map((d: any) => [d.principal, d.decision, d.comment, d.input_hash]),
      [
        ['usr_3', 'approve', 'gauge checked', listed.input_hash],
        ['usr_2', 'approve', 'second person', listed.input_hash],
      ],
    );
    await page.getByRole('button', { name: 'Refresh' }).click();
    await page.getByText('Nothing waits for a decision.').waitFor();

    // A reader that may not approve sees the list and the 403 naming the permission; a rejection ends the run.
    const second = (await call('POST', RUNS, SECRET, { input: 'Drain tank 2.' })).body.run_id as string;
    await untilRun(
      async () => (await call('GET', `${RUNS}/${second}`)).body,
      (r) => r.state === 'waiting' || ENDED(r),
    );
    const card2 = page.locator(`article[data-run="${second}"][data-step="pre:0"]`);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await signIn(READER_SECRET);
    await card2.getByRole('button', { name: 'Reject' }).click();
    await page.locator('#error').waitFor();
    assert.match(await errorText(), /403 forbidden/);
    assert.match(await errorText(), /agent_teams\.approve/);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await signIn(APPROVER_SECRET);
    await card2.getByLabel('Comment').fill('not today');
    await card2.getByRole('button', { name: 'Reject' }).click();
    await page.getByText(`Recorded: reject on pre:0 of ${second}`).waitFor();
    const rejected = await untilRun(async () => (await call('GET', `${RUNS}/${second}`)).body, ENDED);
    assert.notEqual(rejected.state, 'completed', JSON.stringify(rejected));
    assert.deepEqual(
      rejected.decisions.map((d: any) => [d.principal, d.decision, d.comment]),
      [['usr_3', 'reject', 'not today']],
    );
    assert.deepEqual(watch.problems, []);
    // Everything came from the device, and no credential was ever in a URL.
    for (const u of watch.requested) {
      assert.equal(new URL(u).origin, edge.url, u);
      for (const k of [SECRET, APPROVER_SECRET, OTHER_SECRET, STRANGER_SECRET, READER_SECRET]) assert.ok(!u.includes(k.slice(10)), u);
    }
    await context.close();
  } finally {
    await browser.close();
    await stopEdge(edge.proc, 'SIGTERM');
  }
});
