// The operator console in a real browser (Debian's chromium driven by
// playwright-core) against the real cell process (dist/cell.mjs) and a real
// HTTP server speaking the OpenAI protocol for the crew's model calls:
//
// - alice signs in through the code flow (login and consent in the pop-up),
//   starts a crew run whose human_approval stage needs two approvers, and
//   watches the graph change state live; she approves and the run still waits;
// - bob signs in in another browser and approves; alice's page, never
//   reloaded, sees the run complete and the journal verify green;
// - a journal record of a second run is tampered with in the store while the
//   cell is stopped: the console shows red at that record;
// - victor (viewer) sees no approve button, and the API refuses him anyway;
// - the owner pastes an API key, mints a key (secret shown once, copied),
//   rotates and revokes it, and finds it all on the audit trail;
// - no request leaves the cell's origin, no CSP violation, no page error, and
//   axe-core finds no accessibility violation.
// Screenshots land in test/artifacts/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { contentHash } from '../../core/canonical.ts';
import { MIGRATIONS } from '../../cell/migrations.ts';
import { openStore } from '../../cell/store/open.ts';
import { startOpenAIServer, systemPrompt, type FakeOpenAI } from '../fixtures/openai-server.ts';
import { startCellProcess } from '../helpers/cell-process.ts';
import { testStore } from '../helpers/inproc.ts';
import { A, ARGS, CHROMIUM, T, apiOf, axe, crew, judgeLooks, newContext, ok, shot, signIn, until, type Watch } from './helpers.ts';

// Installed in the page as text (functions defined in the test would reach the page with the
// transpiler's helpers): samples every graph node's state every 25 ms, and marks the document.
const WATCH_GRAPH = `(() => {
  window.__doc = 1;
  window.__seen = {};
  setInterval(function () {
    document.querySelectorAll('#graph [data-node]').forEach(function (el) {
      var id = el.getAttribute('data-node'), s = el.getAttribute('data-state');
      var list = window.__seen[id] || (window.__seen[id] = []);
      if (list[list.length - 1] !== s) list.push(s);
    });
  }, 25);
})()`;

test('the operator console: sign in, run, watch live, two approvers, verify, tamper, refuse, keys, offline, accessible', {
  timeout: 240_000,
  skip: existsSync(CHROMIUM)
    ? false
    : `${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium; make test does when root)`,
}, async () => {
  const ai: FakeOpenAI = await startOpenAIServer({
    apiKey: 'sk-fake',
    // Slow enough that a running step can be seen running.
    respond: (req) => ({
      content: `${/ROLE:(\S+)/.exec(systemPrompt(req))?.[1] ?? 'agent'} says: done`,
      delayMs: 900,
      usage: { prompt_tokens: 40, completion_tokens: 12 },
    }),
  });
  // The cell's store, named here (a PostgreSQL database with CELL_TEST_STORE=postgres): the test opens it while the cell is stopped.
  const db = await testStore();
  const cellArgs = ['--cell-id', 'cell-console', ...(db.url ? ['--store', db.url] : [])];
  let cell = await startCellProcess({ args: cellArgs });
  let browser: Browser | null = null;
  const watch: Watch = { requested: [], problems: [] };
  try {
    // ------------------------------------------------------------ setup over the API
    let api = apiOf(cell);
    // Operators whose envelope ceiling covers the crews' seats (no tools, mode auto): running a crew exercises its seats' authority.
    const user = async (name: string, roles: string[]) =>
      (
        await ok(api, 'POST', `${A}/principals`, {
          kind: 'user',
          name,
          roles,
          password: `${name} has a long password`,
          authority: { permission_mode: 'auto' },
        })
      ).id as string;
    const alice = await user('alice', ['operator']);
    const bob = await user('bob', ['operator']);
    const victor = await user('victor', ['viewer']);
    const secret = await ok(api, 'POST', `${A}/secrets`, { name: 'fake-openai', value: 'sk-fake' });
    await ok(api, 'POST', `${A}/ai/model-providers`, {
      provider_type: 'openai-compatible',
      default_model: 'fake-model',
      base_url: `${ai.url}/v1`,
      api_key_secret_id: secret.secret_id,
      max_retries: 0,
    });
    const approval = {
      kind: 'human_approval',
      config: { rule: 'quorum', quorum: 2, approvers: [alice, bob], timeout_ms: 3_600_000, prompt: 'Publish the summary?' },
    };
    const gated = await crew(api, 'reviewed-summary', ['writer', 'editor'], [approval]);
    const plain = await crew(api, 'plain-summary', ['writer']);

    // A second run, completed, whose journal we tamper with while the cell is stopped.
    const run2 = (await ok(api, 'POST', `${T}/crews/${plain.crew}/runs`, { input: 'summarise the week' })).run_id as string;
    await until('run 2 to complete', async () => (await api('GET', `${A}/jobs/runs/${run2}`)).body.state === 'completed');
    const j2 = (await ok(api, 'GET', `${A}/jobs/runs/${run2}/journal`)).records as { seq: number; kind: string; step_id: string }[];
    const target = j2.find((r) => r.kind === 'step' && /^agent:[^/]+$/.test(r.step_id));
    assert.ok(target, 'the agent step of run 2 is journaled');
    await cell.stop();
    const store = await openStore(db.url ? { engine: 'postgres', url: db.url } : { engine: 'embedded', dir: join(cell.dataDir, 'store') }, {
      migrations: MIGRATIONS,
      log: () => undefined,
    });
    const stored = (await store.get('SELECT record FROM journal WHERE run_id = ? AND seq = ?', [run2, target.seq]))!;
    const forged = { ...JSON.parse(String(stored['record'])), output_hash: contentHash('a forged answer') };
    await store.write((tx) =>
      tx.run('UPDATE journal SET record = ? WHERE run_id = ? AND seq = ?', [JSON.stringify(forged), run2, target.seq]),
    );
    await store.close();
    cell = await startCellProcess({ dataDir: cell.dataDir, args: cellArgs });
    api = apiOf(cell);
    const origin = new URL(cell.url).origin;

    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS, timeout: 30_000 });

    // ------------------------------------------------------------ alice: sign in, start the run, watch it
    const ctxA = await newContext(browser, origin, watch);
    const pageA = await signIn(ctxA, cell.url, 'alice', 'alice has a long password');
    assert.equal(
      await pageA.locator('#whoami').evaluate((e) => /OAuth \(DPoP\)/.test(e.textContent ?? '')),
      true,
      'a DPoP-bound OAuth session',
    );
    await axe(pageA, 'runs list');
    await shot(pageA, 'console-runs.png');

    await pageA.locator('#nav-formations').click();
    await pageA.getByRole('link', { name: /reviewed-summary/ }).click();
    await pageA.locator('#formation-graph svg [data-node="pre:0"]').waitFor();
    assert.equal(
      await pageA.locator('#formation-graph svg [data-node]').count(),
      3,
      'the compiled graph before running: approval, writer, editor',
    );
    await axe(pageA, 'formations');
    await pageA.locator(`article[data-crew="${gated.crew}"] textarea.run-input`).fill('{"topic": "the week in review"}');
    await pageA.locator(`article[data-crew="${gated.crew}"] button.run-button`).click();
    await pageA.waitForURL(/#\/runs\/run_[0-9a-f]{20}$/);
    const run1 = /#\/runs\/(run_[0-9a-f]{20})$/.exec(pageA.url())![1]!;
    // Record every state every node of the graph takes, from now on, without reloading the page.
    await pageA.locator('#graph svg [data-node="pre:0"]').waitFor();
    await pageA.evaluate(WATCH_GRAPH);
    await pageA.locator('#graph [data-node="pre:0"][data-state="waiting"]').waitFor({ timeout: 30_000 });
    await pageA.locator('#run-approvals article.approval').waitFor();
    assert.match((await pageA.locator('#run-approvals .tally').textContent()) ?? '', /0 of 2/);
    await axe(pageA, 'run view (waiting)');

    // alice approves, with a comment: one of two; the run still waits.
    await pageA.locator('#run-approvals textarea').fill('Figures checked against the ledger.');
    await pageA.locator('#run-approvals button.approve').click();
    await until('the tally to show one approval', async () =>
      /1 of 2/.test((await pageA.locator('#run-approvals .tally').textContent()) ?? ''),
    );
    assert.match((await pageA.locator('#run-approvals .needed').textContent()) ?? '', /1 more/);
    assert.match((await pageA.locator('#run-approvals .blocked').textContent()) ?? '', /You have decided/);
    // The decision wakes the run: its drive reads the decisions, finds one of two, and leaves it waiting
    // (running meanwhile: on a loaded machine the read below can come before that drive ends).
    await until(
      'one of two approvals: the run still waits',
      async () => (await api('GET', `${A}/jobs/runs/${run1}`)).body.state === 'waiting',
    );
    assert.equal(await pageA.locator('#graph [data-node="pre:0"]').getAttribute('data-state'), 'waiting');
    await shot(pageA, 'console-run-waiting.png', false);

    // ------------------------------------------------------------ bob, in another browser, approves
    const ctxB = await newContext(browser, origin, watch);
    const pageB = await signIn(ctxB, cell.url, 'bob', 'bob has a long password');
    await pageB.locator('#nav-approvals').click();
    const card = pageB.locator(`#approvals-mine article.approval[data-run="${run1}"]`);
    await card.waitFor();
    assert.match((await card.locator('.tally').textContent()) ?? '', /1 of 2/);
    assert.match(
      (await card.locator('.decision-comment').textContent()) ?? '',
      /Figures checked against the ledger\./,
      "alice's comment is on bob's card",
    );
    await axe(pageB, 'approvals');
    await shot(pageB, 'console-approvals.png');
    await card.locator('button.approve').click();
    await card
      .locator('[role="status"]')
      .filter({ hasText: 'Approved.' })
      .waitFor()
      .catch(() => undefined);

    // alice's page follows the run to its end, live, and verifies the journal.
    await until('the run to be shown completed', async () => (await pageA.locator('h1 .state').textContent()) === 'completed', 60_000);
    await pageA.locator('#stream-state', { hasText: 'journal is complete' }).waitFor();
    await pageA.locator('#journal-verdict[data-verdict="ok"]').waitFor({ timeout: 30_000 });
    const seen = (await pageA.evaluate('({ doc: window.__doc, seen: window.__seen })')) as { doc: number; seen: Record<string, string[]> };
    assert.equal(seen.doc, 1, 'the same document: the page was never reloaded');
    assert.deepEqual(
      seen.seen['pre:0']!.slice(-2),
      ['waiting', 'completed'],
      `the approval step turned completed live: ${seen.seen['pre:0']!.join(' -> ')}`,
    );
    const agents = Object.entries(seen.seen).filter(([id]) => id.startsWith('agent:'));
    assert.equal(agents.length, 2);
    for (const [id, states] of agents) {
      assert.equal(states[0], 'pending', `${id} started pending`);
      assert.ok(states.includes('running'), `${id} was seen running: ${states.join(' -> ')}`);
      assert.equal(states.at(-1), 'completed', `${id} ended completed`);
    }
    assert.match((await pageA.locator('#journal-verdict').textContent()) ?? '', /Journal verified in this browser: \d+ records/);
    // The decisions stay with the run once the step is decided (who, approved, when, the comment), on the run
    // and on the step's row of the timeline, bidi-isolated; the comment is in the signed journal it exports.
    await pageA.locator('#run-decisions .decision-comment', { hasText: 'Figures checked against the ledger.' }).waitFor();
    const decisionsText = (await pageA.locator('#run-decisions').textContent()) ?? '';
    assert.match(decisionsText, /alice \(you\) approved[\s\S]*Figures checked against the ledger\./);
    assert.ok(decisionsText.includes(`${bob} approved`) || decisionsText.includes('bob approved'), decisionsText);
    assert.equal(await pageA.locator('#run-decisions .decision-comment bdi').count(), 1, 'the comment is isolated');
    assert.match(
      (await pageA.locator('#timeline [data-node="pre:0"] .tl-decision').first().textContent()) ?? '',
      /alice[\s\S]*approved[\s\S]*Figures checked against the ledger\./,
    );
    const kept = (await api('GET', `${A}/jobs/runs/${run1}/journal`)).body.records.filter((r: any) => r.kind === 'approval_received');
    assert.deepEqual(
      kept.map((r: any) => [r.data.by, r.data.comment]),
      [
        [alice, 'Figures checked against the ledger.'],
        [bob, null],
      ],
    );
    assert.equal(await pageA.locator('#tokens-table tbody tr').count(), 2, 'tokens per seat');
    assert.match((await pageA.locator('#tokens-total').textContent()) ?? '', /^104$/, 'two model calls of 52 tokens');
    // A step's output, checked against the hash in its signed record.
    await pageA.locator('#graph [data-node^="agent:"]').first().click();
    await pageA.locator('#step-details button', { hasText: 'Show output' }).first().click();
    await pageA.locator('#step-details .value .ok-text').first().waitFor();
    assert.match((await pageA.locator('#step-details .value').first().textContent()) ?? '', /matches the hash in the signed record/);
    await axe(pageA, 'run view (completed)');
    await shot(pageA, 'console-run.png');

    // ------------------------------------------------------------ the tampered run shows red at that record
    await pageA.evaluate((id) => {
      window.location.hash = `#/runs/${id}`;
    }, run2);
    // A reload forgets the session (memory only): sign in again; the link still leads to the run.
    await pageA.reload();
    const pageA2 = await signIn(ctxA, cell.url, 'alice', 'alice has a long password', pageA);
    const bad = pageA2.locator('#journal-verdict[data-verdict="bad"]');
    await bad.waitFor({ timeout: 30_000 });
    assert.equal(await bad.getAttribute('data-seq'), String(target.seq));
    assert.match((await bad.textContent()) ?? '', new RegExp(`failed at record #${target.seq}: signature does not verify`));
    assert.equal(await pageA2.locator(`#journal-seq-${target.seq}`).getAttribute('class'), 'bad first-bad');
    assert.equal(await pageA2.locator(`#journal-seq-${target.seq - 1}`).getAttribute('class'), '', 'records before it hold');
    await shot(pageA2, 'console-tampered.png');

    // ------------------------------------------------------------ victor cannot approve, and the API refuses him anyway
    const run3 = (await ok(api, 'POST', `${T}/crews/${gated.crew}/runs`, { input: 'another week' })).run_id as string;
    await until('run 3 to wait', async () => (await api('GET', `${A}/jobs/runs/${run3}`)).body.state === 'waiting');
    const ctxV = await newContext(browser, origin, watch);
    const pageV = await signIn(ctxV, cell.url, 'victor', 'victor has a long password');
    await pageV.locator('#nav-approvals').click();
    await pageV.locator(`#approvals-others article.approval[data-run="${run3}"]`).waitFor();
    assert.ok(await pageV.locator('#no-approve-permission').isVisible());
    assert.equal(await pageV.locator('button.approve, button.reject').count(), 0, 'no approve or reject button anywhere');
    assert.match(
      (await pageV.locator(`article.approval[data-run="${run3}"] .blocked`).textContent()) ?? '',
      /lacks the permission agent_teams\.approve/,
    );
    await pageV.evaluate((id) => {
      window.location.hash = `#/runs/${id}`;
    }, run3);
    await pageV.locator('#run-approvals article.approval').waitFor();
    assert.equal(await pageV.locator('button.approve').count(), 0, 'none on the run view either');
    await axe(pageV, 'run view as a viewer');
    const vKey = await ok(api, 'POST', `${A}/api-keys`, { name: 'victor-key', owner_id: victor });
    const refused = await api(
      'POST',
      `${T}/crews/${gated.crew}/runs/${run3}/approvals/${encodeURIComponent('pre:0')}`,
      { decision: 'approve' },
      vKey.secret,
    );
    assert.equal(refused.status, 403);
    assert.equal(refused.body.error, 'forbidden');
    assert.equal(refused.body.details.required_permission, 'agent_teams.approve');
    assert.equal((await api('GET', `${A}/jobs/runs/${run3}`)).body.state, 'waiting');
    // Signing out revokes the console's token at the cell (RFC 7009) and forgets it.
    const [revoke] = await Promise.all([
      pageV.waitForRequest((r) => r.url() === `${origin}/oauth/revoke`),
      pageV.locator('#sign-out').click(),
    ]);
    const revoked = await revoke.response();
    assert.equal(revoked?.status(), 200);
    const form = new URLSearchParams(revoke.postData() ?? '');
    assert.equal(form.get('client_id'), 'console.cell-console');
    assert.match(form.get('token') ?? '', /^ey[\w-]+\.[\w-]+\.[\w-]+$/, 'the access token itself');
    await pageV.locator('#sign-in').waitFor();

    // ------------------------------------------------------------ the owner, with a pasted API key: keys and audit
    const ctxO = await newContext(browser, origin, watch);
    await ctxO.grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
    const pageO = await ctxO.newPage();
    await pageO.goto(`${cell.url}/console`);
    // The page is drawn by its script after the load event: judge it once the sign-in form is there.
    await pageO.locator('#api-key').waitFor();
    await axe(pageO, 'sign-in');
    await shot(pageO, 'console-sign-in.png');
    await pageO.locator('#api-key').fill(cell.adminKey);
    await pageO.locator('#use-key').click();
    await pageO.locator('#whoami').waitFor();
    await pageO.locator('#nav-keys').click();
    await pageO.locator('#mint-name').fill('ci-reader');
    await pageO.locator('#mint-scopes').fill('system.orchestration.admin.read');
    await pageO.locator('#mint-submit').click();
    const minted = await pageO.locator('#secret-value').inputValue();
    assert.match(minted, /^svck_live_[A-Za-z0-9_-]{43}$/);
    assert.equal((await api('GET', `${A}/jobs/runs?limit=1`, undefined, minted)).status, 200, 'the shown secret works');
    await pageO.locator('#secret-once button', { hasText: 'Copy' }).click();
    await pageO.locator('#secret-once [role="status"]', { hasText: 'Copied.' }).waitFor();
    assert.equal(await pageO.evaluate(() => navigator.clipboard.readText()), minted);
    // The secret shown once, in both themes at both widths (issue 43 §3).
    assert.deepEqual(await judgeLooks(pageO, 'keys with a secret shown'), [], 'the secret panel in every look');
    await shot(pageO, 'console-keys.png');
    await pageO.locator('#secret-dismiss').click();
    assert.equal(await pageO.locator('#secret-value').count(), 0, 'the secret is gone from the page');
    const row = pageO.locator('#keys-table tr[data-name="ci-reader"]');
    await row.locator('button.rotate').click();
    await row.locator('button.confirm').click();
    const rotated = await pageO.locator('#secret-value').inputValue();
    assert.match(rotated, /^svck_live_/);
    assert.notEqual(rotated, minted);
    assert.equal(
      (await api('GET', `${A}/jobs/runs?limit=1`, undefined, minted)).status,
      200,
      'the previous secret works in the grace window',
    );
    await pageO.locator('#secret-dismiss').click();
    await row.locator('button.revoke').click();
    await row.locator('button.confirm').click();
    await pageO.locator('#keys-table tr[data-name="ci-reader"][data-status="revoked"]').waitFor();
    assert.equal((await api('GET', `${A}/jobs/runs?limit=1`, undefined, rotated)).status, 401, 'revoked');
    await pageO.locator('#nav-audit').click();
    await pageO.locator('#audit-table tr[data-action="api_key.revoke"]').first().waitFor();
    for (const action of ['api_key.mint', 'api_key.rotate', 'crew.run.approval']) {
      assert.ok((await pageO.locator(`#audit-table tr[data-action="${action}"]`).count()) > 0, `${action} on the audit trail`);
    }
    await axe(pageO, 'audit trail');
    // A job run has no compiled graph: the console draws it from the journal, and verifies it too.
    const job = await ok(api, 'POST', `${A}/jobs/runs`, {
      job_type: 'compute',
      workspace_id: 'demo',
      spec: { code: 'return input.xs.map((x) => x * x)', input: { xs: [1, 2, 3] } },
    });
    await until('the job to complete', async () => (await api('GET', `${A}/jobs/runs/${job.run_id}`)).body.state === 'completed');
    await pageO.locator('#nav-runs').click();
    await until('focus to move to the new view', async () => (await pageO.evaluate(() => document.activeElement?.id)) === 'main');
    await pageO.locator('#filter-kind').focus();
    await pageO.locator('#filter-kind').selectOption('job');
    await pageO.waitForURL(/kind=job/);
    await pageO.locator(`#runs-table tr[data-run="${job.run_id}"]`).waitFor();
    assert.equal(await pageO.evaluate(() => document.activeElement?.id), 'filter-kind', 'a filter keeps the focus');
    await pageO.locator(`#runs-table tr[data-run="${job.run_id}"] a`).click();
    await pageO.locator('#journal-verdict[data-verdict="ok"]').waitFor({ timeout: 30_000 });
    assert.ok((await pageO.locator('#graph [data-node][data-state="completed"]').count()) >= 1, "the job's steps, completed");
    assert.match((await pageO.locator('#io').textContent()) ?? '', /\[\s*1,\s*4,\s*9\s*\]/);
    await pageO.locator('#nav-cells').click();
    await pageO.locator('#cells-single, #cells-table').first().waitFor();
    await pageO.locator('#sign-out').click();
    await pageO.locator('#sign-in').waitFor();

    // ------------------------------------------------------------ offline and strict
    const foreign = watch.requested.filter((u) => !u.startsWith('data:') && u !== 'about:blank' && new URL(u).origin !== origin);
    assert.deepEqual(foreign, [], "no request left the cell's origin");
    assert.ok(watch.requested.some((u) => u.endsWith('/console/assets/console.js')));
    assert.ok(
      watch.requested.some((u) => u.includes('/events/sse')),
      'runs were followed over SSE',
    );
    const csp = watch.problems.filter((p) => /Content Security Policy|Refused to/i.test(p));
    assert.deepEqual(csp, [], 'no CSP violation');
    assert.deepEqual(watch.problems, [], 'no page error');
  } finally {
    await browser?.close();
    await cell.stop();
    cell.cleanup();
    await db.drop();
    await ai.close();
  }
});
