// The console, round 3 (issue 43 §3, §4, the CSP), in Debian's chromium against the real cell process,
// one cell and one browser for the file:
//
// - every view, at 1280 and 390 px, in the light and the dark theme: axe-core finds no violation, and no
//   page is wider than the screen, with a 200-character (or the longest the API takes) name and a
//   right-to-left override (U+202E) in every entity shown: crews, formations, seats, schedules, keys,
//   principals, approval prompts and comments; wherever such a name is shown it is bidi-isolated;
// - at 390 px the header and navigation take less than a fifth of the screen, and the row actions
//   (Rotate, Revoke, Archive) are on screen, not past its edge;
// - schedules: searched, run now (the run says who fired it), paused and resumed, and deleted, which asks
//   first (kept once, then confirmed); a run's cancel asks the same way;
// - approval cards show the crew, the run's input and what the step will do: a tool call's tool and its
//   exact arguments, checked against the digest a decision approves;
// - the page is sent with `require-trusted-types-for 'script'`, the console works under it, and a string
//   assigned to an HTML sink is refused;
// - while the cell does not answer, approvals say "unknown", never "Waiting for you (0)".
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { startOpenAIServer, systemPrompt, type FakeOpenAI } from '../fixtures/openai-server.ts';
import { startCellProcess, type CellProcess } from '../helpers/cell-process.ts';
import { testStore } from '../helpers/inproc.ts';
import {
  A,
  ARGS,
  goTo,
  CHROMIUM,
  T,
  apiOf,
  fakeProvider,
  hostile,
  judgeLooks,
  newContext,
  ok,
  pasteKey,
  until,
  type Watch,
} from './helpers.ts';

const RLO = '\u202E';

test('the console by the same standard in dark and at 390 px, hostile names, schedules and approvals you can act on, trusted types', {
  timeout: 600_000,
  skip: existsSync(CHROMIUM) ? false : `${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)`,
}, async () => {
  const ai: FakeOpenAI = await startOpenAIServer({
    apiKey: 'sk-fake',
    respond: (req) => {
      // The asker calls calc once, then answers with the result.
      if (/ROLE:asker/.test(systemPrompt(req)) && !req.messages.some((m) => m.role === 'tool'))
        return { tool_calls: [{ name: 'calc', arguments: { expression: '6*7' } }] };
      return { content: `done ${RLO}txet`, usage: { prompt_tokens: 20, completion_tokens: 5 } };
    },
  });
  const db = await testStore();
  const cell: CellProcess = await startCellProcess({ args: ['--cell-id', 'cell-std', ...(db.url ? ['--store', db.url] : [])] });
  let browser: Browser | null = null;
  const watch: Watch = { requested: [], problems: [] };
  try {
    const api = apiOf(cell);
    await fakeProvider(api, ai.url, { max_retries: 0 });
    const me = (await ok(api, 'GET', `${A}/whoami`)).principal.id as string;

    // ------------------------------------------------------------ hostile names in every entity
    const CAP = { allowed_tools: ['calc'], permission_mode: 'ask', clearance_level: 0 };
    const f = await ok(api, 'POST', `${T}/formations`, {
      name: hostile('formation', 100),
      coordination_policy: 'sequential',
      pre: [{ kind: 'human_approval', config: { rule: 'quorum', quorum: 1, timeout_ms: 3_600_000, prompt: `Publish ${RLO}it now?` } }],
    });
    const billet = await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
      role_label: hostile('asker', 100),
      required_skills: [],
      authority_cap: CAP,
    });
    const agent = await ok(api, 'POST', `${T}/agents`, {
      source: 'scratch',
      role_label: 'asker',
      system_prompt: 'ROLE:asker',
      authority_template: CAP,
    });
    await ok(api, 'POST', `${T}/agents/${agent.agent_id}/budget-ledger`, { budget_limit: 100_000 });
    const crewName = hostile('crew', 100);
    const crew = await ok(api, 'POST', `${T}/crews`, {
      formation_id: f.formation_id,
      assignments: { [billet.billet_id]: agent.agent_id },
      name: crewName,
    });
    const input = { question: `what is 6*7 ${RLO}?`, note: hostile('input', 200) };
    // A run approved with a hostile comment, that then waits for its tool call (ask mode).
    const run = (await ok(api, 'POST', `${T}/crews/${crew.crew_id}/runs`, { input })).run_id as string;
    await until('the run to wait for its approval', async () => (await api('GET', `${A}/jobs/runs/${run}`)).body.state === 'waiting');
    await ok(api, 'POST', `${T}/crews/${crew.crew_id}/runs/${run}/approvals/${encodeURIComponent('pre:0')}`, {
      decision: 'approve',
      comment: `Checked ${RLO}${hostile('comment', 200)}`,
    });
    const tool = await until('the tool call to wait', async () => {
      const r = (await api('GET', `${T}/crews/${crew.crew_id}/runs/${run}`)).body;
      return r.state === 'waiting' && r.pending_approvals?.[0]?.kind === 'tool_call' ? r.pending_approvals[0] : null;
    });
    const squares = await ok(api, 'POST', `${A}/jobs/definitions`, {
      name: hostile('squares', 200),
      job_type: 'compute',
      workspace_id: 'demo',
      cron: '0 3 * * *',
      timezone: 'Europe/Paris',
      spec: { code: 'return input.xs.map((x) => x * x)', input: { xs: [1, 2] } },
    });
    const nightly = await ok(api, 'POST', `${A}/jobs/definitions`, {
      name: 'nightly-report',
      job_type: 'compute',
      workspace_id: 'demo',
      cron: '30 4 * * *',
      spec: { code: 'return 1', input: {} },
    });
    const longUser = `${'u'.repeat(90)}.long-name`;
    const other = await ok(api, 'POST', `${A}/principals`, {
      kind: 'user',
      name: longUser,
      roles: ['viewer'],
      password: 'a long password here',
    });
    await ok(api, 'POST', `${A}/api-keys`, { name: hostile('key', 100), owner_id: other.id });
    await ok(api, 'POST', `${A}/api-keys`, { name: hostile('mine', 100) });

    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS, timeout: 30_000 });
    const origin = new URL(cell.url).origin;
    const ctx = await newContext(browser, origin, watch);
    const page = await ctx.newPage();

    // ------------------------------------------------------------ the CSP requires Trusted Types, and the console works under it
    const html = await fetch(`${cell.url}/console`);
    assert.match(html.headers.get('content-security-policy') ?? '', /(^|; )require-trusted-types-for 'script'(;|$)/);
    // The sign-in page, before any session, in every look.
    await page.goto(`${cell.url}/console`);
    await page.locator('#api-key').waitFor();
    const signInLooks = await judgeLooks(page, 'sign-in');
    assert.deepEqual(signInLooks, [], 'the sign-in page in every look');
    await pasteKey(page, cell.url, cell.adminKey);
    const seen = watch.problems.length;
    assert.equal(
      await page.evaluate(() => {
        try {
          document.body.insertAdjacentHTML('beforeend', '<b id="tt-probe">x</b>');
          return 'assigned';
        } catch (e) {
          return (e as Error).name;
        }
      }),
      'TypeError',
      'a string is refused by an HTML sink',
    );
    // The refusal is reported like any violation; it is this probe's own, and the only one so far.
    await until('the refusal to be reported', async () => watch.problems.length > seen);
    assert.deepEqual(watch.problems.splice(seen), [
      "console This document requires 'TrustedHTML' assignment. The action has been blocked.",
    ]);

    // ------------------------------------------------------------ every view, every look
    const problems: string[] = [];
    const views: [string, string, string][] = [
      ['runs', '#/runs', `#runs-table tr[data-run="${run}"]`],
      ['run', `#/runs/${run}`, '#run-decisions .decision-comment'],
      ['approvals', '#/approvals', `#approvals-mine article.approval[data-run="${run}"] .will-do-tool`],
      ['schedules', '#/schedules', `article[data-schedule="${squares.schedule_id}"]`],
      ['formation', `#/formations/${f.formation_id}`, '#formation-graph svg [data-node]'],
      ['principals', '#/principals', `#principals-table tr[data-name="${longUser}"]`],
      ['keys', '#/keys', '#keys-table tbody tr'],
      ['audit', '#/audit', '#audit-table tbody tr'],
      ['cells', '#/cells', '#cells-table, #cells-single'],
      ['verify', '#/verify', '#dropzone'],
    ];
    for (const [name, hash, ready] of views) {
      await goTo(page, hash, ready);
      if (name === 'run') await page.locator('#journal-verdict[data-verdict="ok"]').waitFor({ timeout: 30_000 });
      problems.push(...(await judgeLooks(page, name)));
    }
    assert.deepEqual(problems, [], 'every view passes axe and lays out in every look');

    // ------------------------------------------------------------ 390 px: a short navigation band, row actions on screen
    await page.setViewportSize({ width: 390, height: 844 });
    for (const [hash, ready, actions] of [
      ['#/keys', '#keys-table tbody tr', 'button.rotate, button.revoke'],
      ['#/principals', `#principals-table tr[data-name="${longUser}"]`, 'button.archive'],
    ] as const) {
      await goTo(page, hash, ready);
      const band = await page.evaluate(() => {
        const top = document.querySelector('header.top')!.getBoundingClientRect();
        const nav = document.querySelector('nav.nav')!.getBoundingClientRect();
        return nav.bottom - top.top;
      });
      assert.ok(band < 844 / 5, `${hash}: the header and navigation take ${band} px of 844`);
      const boxes = await page.locator(actions).evaluateAll((bs) =>
        bs.map((b) => {
          const r = b.getBoundingClientRect();
          return { left: r.left, right: r.right };
        }),
      );
      assert.ok(boxes.length >= 2, `${hash}: row actions are there (${boxes.length})`);
      for (const b of boxes) assert.ok(b.left >= 0 && b.right <= 390, `${hash}: a row action at ${b.left}-${b.right} px is on screen`);
    }
    await page.setViewportSize({ width: 1366, height: 900 });

    // ------------------------------------------------------------ approval cards: crew, input, what the step will do
    await goTo(page, '#/approvals', `#approvals-mine article.approval[data-run="${run}"] .will-do-tool`);
    const card = page.locator(`#approvals-mine article.approval[data-run="${run}"]`);
    assert.equal((await card.locator('.crew bdi').textContent()) ?? '', crewName, 'the crew, by name');
    assert.deepEqual(JSON.parse((await card.locator('.run-input pre').textContent()) ?? 'null'), input, "the run's input");
    assert.equal(await card.locator('.will-do .tool-name').textContent(), 'calc');
    assert.match((await card.locator('.will-do-tool').textContent()) ?? '', /exactly the call a decision approves/);
    assert.deepEqual(
      JSON.parse((await card.locator('.will-do pre').textContent()) ?? 'null'),
      { expression: '6*7' },
      'its exact arguments',
    );
    assert.equal(tool.prompt, 'tool calc');

    // ------------------------------------------------------------ schedules: search, run now, pause, resume
    await goTo(page, '#/schedules', `article[data-schedule="${nightly.schedule_id}"]`);
    await page.locator('#schedules-search').fill('nightly');
    await until('the search to leave one schedule', async () => (await page.locator('article[data-schedule]').count()) === 1);
    assert.equal(await page.locator(`article[data-schedule="${nightly.schedule_id}"]`).count(), 1);
    await page.locator('#schedules-search').fill('');
    const sq = page.locator(`article[data-schedule="${squares.schedule_id}"]`);
    await sq.waitFor();
    assert.equal(await sq.locator('.next-fires li').count(), 4, 'the next fire and the four after it');
    await sq.locator('button.run-now').click();
    const started = sq.locator('.started a');
    await started.waitFor();
    const fired = ((await started.textContent()) ?? '').trim();
    assert.match(fired, /^run_[0-9a-f]{20}$/);
    const firedRun = await until('the fired run to complete', async () => {
      const r = (await api('GET', `${A}/jobs/runs/${fired}`)).body;
      return r.state === 'completed' ? r : null;
    });
    assert.equal(firedRun.flags.fired_by, me);
    assert.equal(firedRun.source, `schedule:${squares.schedule_id}`);
    await sq.locator(`.last-runs li[data-run="${fired}"] .fired-by`).waitFor({ timeout: 30_000 });
    assert.match((await sq.locator(`.last-runs li[data-run="${fired}"] .fired-by`).textContent()) ?? '', /run now by .*\(you\)/);
    await sq.locator('button.disable').click();
    await page.locator(`article[data-schedule="${squares.schedule_id}"][data-enabled="false"]`).waitFor();
    assert.equal((await api('GET', `${A}/jobs/definitions/${squares.schedule_id}`)).body.enabled, false, 'paused');
    assert.equal(await sq.locator('.disabled-reason').textContent(), 'paused by an operator');
    await sq.locator('button.enable').click();
    await page.locator(`article[data-schedule="${squares.schedule_id}"][data-enabled="true"]`).waitFor();
    assert.equal((await api('GET', `${A}/jobs/definitions/${squares.schedule_id}`)).body.enabled, true, 'resumed');
    // Delete asks first: kept once, then confirmed; the list no longer shows it.
    await sq.locator('button.delete').click();
    assert.match((await sq.locator('.buttons').textContent()) ?? '', /Delete .*\?/);
    await sq.locator('button', { hasText: 'Keep it' }).click();
    assert.equal((await api('GET', `${A}/jobs/definitions/${squares.schedule_id}`)).body.deleted, false, 'kept');
    await sq.locator('button.delete').click();
    await sq.locator('button.confirm').click();
    await until('the deleted schedule to leave the list', async () => (await sq.count()) === 0);
    assert.equal((await api('GET', `${A}/jobs/definitions/${squares.schedule_id}`)).body.deleted, true, 'deleted');

    // ------------------------------------------------------------ a run's cancel asks first: kept once, then confirmed
    const doomed = (await ok(api, 'POST', `${T}/crews/${crew.crew_id}/runs`, { input })).run_id as string;
    await until('the second run to wait', async () => (await api('GET', `${A}/jobs/runs/${doomed}`)).body.state === 'waiting');
    await goTo(page, `#/runs/${doomed}`, '#cancel-run');
    await page.locator('#cancel-run').click();
    await page.locator('button', { hasText: 'Keep running' }).click();
    await page.locator('#cancel-run').waitFor();
    assert.equal((await api('GET', `${A}/jobs/runs/${doomed}`)).body.state, 'waiting', 'kept running');
    await page.locator('#cancel-run').click();
    await page.locator('#cancel-confirm.confirm').click();
    await until('the run to be cancelled', async () => (await api('GET', `${A}/jobs/runs/${doomed}`)).body.state === 'cancelled');

    // ------------------------------------------------------------ the cell stops: approvals are unknown, never "(0)"
    await goTo(page, '#/approvals', '#approvals-mine');
    await cell.stop();
    await page.locator('#liveness-banner').waitFor({ timeout: 10_000 });
    await until('the approvals to say unknown', async () =>
      /Waiting for you \(unknown\)/.test((await page.locator('#approvals-mine h2').textContent()) ?? ''),
    );
    assert.doesNotMatch((await page.locator('main').textContent()) ?? '', /Waiting for (you|others) \(0\)/);
    assert.equal((await page.locator('#approvals-badge').textContent())?.trim().startsWith('?'), true, 'the badge says it does not know');

    const tt = watch.problems.filter((p) => /Trusted Type|TrustedHTML|TrustedScript/i.test(p));
    assert.deepEqual(tt, [], 'no Trusted Types violation');
    assert.deepEqual(
      watch.problems.filter((p) => !/Failed to fetch|ERR_CONNECTION_REFUSED|net::/.test(p)),
      [],
      'no page error',
    );
  } finally {
    await browser?.close();
    await cell.stop();
    cell.cleanup();
    await db.drop();
    await ai.close();
  }
});
