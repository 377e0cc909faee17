// "Why it failed" for every way a run ends badly (issue 43 §1, §2), in Debian's chromium against the real
// cell process, one cell and one browser for the file. Each kind is triaged to its step, selected in the
// graph, with what that kind needs:
//
// - a model error under a retry policy: 3 attempts (the policy's), not the provider's 2;
// - a budget refusal and a gate refusal: the refusing step selected, its seat, the limit or rule;
// - a step timeout: the deadline, and the timeline's bar lasting until the run ended;
// - an approval rejected (who, when, the comment, bidi-isolated) and one timed out (its deadline);
// - a SQL job (the failing statement), a notebook (the failing cell), a cancelled run (who cancelled);
// - runs filtered by failure reason on the cell, and searched by it;
// - the decision's comment in the journal the console exports, and on the run.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
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
  axe,
  fakeProvider,
  judgeLooks,
  newContext,
  ok,
  pasteKey,
  until,
  type Api,
  type Watch,
} from './helpers.ts';

const RLO = '\u202E';
const COMMENT = `Not ${RLO}yet: the figures are off`;

/** A crew of one seat `role`, its billet with `billet` fields and `cap`, `pre` stages before it. */
async function crewOf(api: Api, role: string, o: { billet?: object; cap?: object; pre?: unknown[] } = {}): Promise<string> {
  const f = await ok(api, 'POST', `${T}/formations`, {
    name: `${role}-formation`,
    coordination_policy: 'sequential',
    ...(o.pre ? { pre: o.pre } : {}),
  });
  const b = await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
    role_label: role,
    required_skills: [],
    authority_cap: { allowed_tools: [], permission_mode: 'auto', clearance_level: 0, ...o.cap },
    ...o.billet,
  });
  const a = await ok(api, 'POST', `${T}/agents`, {
    source: 'scratch',
    role_label: role,
    system_prompt: `ROLE:${role}`,
    authority_template: { allowed_tools: [], permission_mode: 'auto' },
  });
  await ok(api, 'POST', `${T}/agents/${a.agent_id}/budget-ledger`, { budget_limit: 100_000 });
  return (await ok(api, 'POST', `${T}/crews`, { formation_id: f.formation_id, assignments: { [b.billet_id]: a.agent_id } })).crew_id;
}

const approval = (timeout_ms: number) => ({ kind: 'human_approval', config: { rule: 'quorum', quorum: 1, timeout_ms, prompt: 'Go on?' } });

test('why it failed, for every way a run ends badly: triaged to its step, filtered and searched by reason', {
  timeout: 600_000,
  skip: existsSync(CHROMIUM) ? false : `${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)`,
}, async () => {
  const ai: FakeOpenAI = await startOpenAIServer({
    apiKey: 'sk-fake',
    respond: (req) => {
      const s = systemPrompt(req);
      if (/ROLE:broken/.test(s)) return { status: 500 };
      if (/ROLE:slow/.test(s)) return { content: 'late', delayMs: 3000 };
      if (/ROLE:stuck/.test(s)) return { content: 'later', delayMs: 120_000 };
      return { content: 'done', usage: { prompt_tokens: 30, completion_tokens: 10 } };
    },
  });
  const db = await testStore();
  const cell: CellProcess = await startCellProcess({ args: ['--cell-id', 'cell-triage', ...(db.url ? ['--store', db.url] : [])] });
  let browser: Browser | null = null;
  const watch: Watch = { requested: [], problems: [] };
  try {
    const api = apiOf(cell);
    await fakeProvider(api, ai.url, { max_retries: 1 });
    const me = (await ok(api, 'GET', `${A}/whoami`)).principal.id as string;
    const runs: Record<string, string> = {};
    const start = async (k: string, crew: string) => {
      runs[k] = (await ok(api, 'POST', `${T}/crews/${crew}/runs`, { input: 'go' })).run_id;
    };
    await start(
      'model',
      await crewOf(api, 'broken', { billet: { retry: { max_attempts: 3, backoff_ms: 0, max_backoff_ms: 0, on: ['provider_error'] } } }),
    );
    await start('budget', await crewOf(api, 'thrifty', { cap: { budget_ceiling: 5 } }));
    await start(
      'gate',
      await crewOf(api, 'gated', { pre: [{ kind: 'gate', config: { rules: [{ name: 'long-enough', expr: 'size(input) > 100' }] } }] }),
    );
    await start('timeout', await crewOf(api, 'slow', { billet: { timeout_ms: 300 } }));
    await start('rejected', await crewOf(api, 'reviewed', { pre: [approval(3_600_000)] }));
    await start('late', await crewOf(api, 'unreviewed', { pre: [approval(1000)] }));
    await start('cancelled', await crewOf(api, 'stuck'));
    runs['sql'] = (
      await ok(api, 'POST', `${A}/jobs/runs`, {
        job_type: 'sql',
        workspace_id: 'triage',
        spec: { statements: [{ sql: 'CREATE TABLE t (a INTEGER)' }, { sql: 'SELECT nope FROM t' }] },
      })
    ).run_id;
    runs['notebook'] = (
      await ok(api, 'POST', `${A}/jobs/runs`, {
        job_type: 'notebook',
        workspace_id: 'triage',
        spec: {
          cells: [
            { type: 'markdown', source: '# Squares' },
            { type: 'compute', code: 'return 1' },
            { type: 'compute', code: 'throw new Error("boom")' },
          ],
        },
      })
    ).run_id;
    const rj = await until('the reviewed run to wait', async () => {
      const r = (await api('GET', `${A}/jobs/runs/${runs['rejected']}`)).body;
      return r.state === 'waiting' ? r : null;
    });
    await ok(api, 'POST', `${T}/crews/${rj.crew_id}/runs/${runs['rejected']}/approvals/${encodeURIComponent('pre:0')}`, {
      decision: 'reject',
      comment: COMMENT,
    });
    await until('the stuck run to call its model', async () => ai.requests.some((r) => /ROLE:stuck/.test(systemPrompt(r.body))));
    await ok(api, 'POST', `${A}/jobs/runs/${runs['cancelled']}/cancel`);
    await until(
      'every run to end',
      async () => {
        for (const id of Object.values(runs))
          if (!['failed', 'refused', 'cancelled'].includes((await api('GET', `${A}/jobs/runs/${id}`)).body.state)) return false;
        return true;
      },
      120_000,
    );

    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS, timeout: 30_000 });
    const ctx = await newContext(browser, new URL(cell.url).origin, watch);
    const page = await ctx.newPage();
    await pasteKey(page, cell.url, cell.adminKey);

    /** Opens a run's page, waits for its failure panel, and answers the panel's kind, the step and the selected node. */
    const open = async (k: string) => {
      await goTo(page, `#/runs/${runs[k]}`);
      const panel = page.locator(`#failure[data-kind]`);
      await panel.waitFor({ timeout: 30_000 });
      await page.locator('#graph [data-node][aria-pressed="true"]').waitFor({ timeout: 30_000 });
      const selected = page.locator('#graph [data-node][aria-pressed="true"]');
      return {
        kind: await panel.getAttribute('data-kind'),
        step: ((await page.locator('#failure-step').textContent()) ?? '').trim(),
        node: await selected.getAttribute('data-node'),
        state: await selected.getAttribute('data-state'),
        details: (await page.locator('#step-details h3 code').textContent())?.trim(),
      };
    };

    // ------------------------------------------------------------ a model error: the policy's 3 attempts
    let t = await open('model');
    assert.equal(t.kind, 'model');
    assert.match(t.step, /^agent:[^/]+\/model\/0$/);
    assert.equal(t.node, t.step.split('/')[0]);
    assert.equal(t.state, 'failed');
    assert.match(
      (await page.locator('#failure-attempts').textContent()) ?? '',
      /^3 attempts under the step's retry policy, all failed \(provider_error\); the provider was asked 2 times for the last/,
    );
    assert.match((await page.locator('#failure-seat').textContent()) ?? '', /^broken$/);
    const looks = await judgeLooks(page, 'a model error');

    // ------------------------------------------------------------ a budget refusal: the refusing step selected, its limit
    t = await open('budget');
    assert.equal(t.kind, 'budget');
    assert.match(t.step, /^agent:blt_[0-9a-f]{20}$/, 'the step the refusal record names (the error names none)');
    assert.deepEqual([t.node, t.state, t.details], [t.step, 'refused', t.step], 'selected in the graph, its records shown');
    assert.equal(await page.locator('.failure-fact[data-fact="Ceiling"]').textContent(), '5');
    assert.match((await page.locator('#failure-sentence').textContent()) ?? '', /token ceiling/);

    // ------------------------------------------------------------ a gate refusal: the rule
    t = await open('gate');
    assert.deepEqual([t.kind, t.step, t.node, t.state], ['policy', 'pre:0', 'pre:0', 'refused']);
    assert.equal(await page.locator('.failure-fact[data-fact="Rule"]').textContent(), 'long-enough');

    // ------------------------------------------------------------ a step timeout: its deadline, and its real duration on the timeline
    t = await open('timeout');
    assert.deepEqual([t.kind, t.state], ['timeout', 'failed']);
    assert.match(
      (await page.locator('#failure-deadline').textContent()) ?? '',
      /^300 ms after the call started at \d\d:\d\d:\d\d\.\d{3}: due \d\d:\d\d:\d\d\.\d{3}, stopped/,
    );
    const bar = ((await page.locator(`#timeline [data-node="${t.node}"] .tl-text`).textContent()) ?? '').trim();
    const lasted = /, (\d+) ms/.exec(bar);
    assert.ok(lasted && Number(lasted[1]) >= 300, `the failed step lasted until the run ended: ${bar}`);

    // ------------------------------------------------------------ an approval rejected: who, when, why
    t = await open('rejected');
    assert.deepEqual([t.kind, t.step, t.node, t.state], ['approval_rejected', 'pre:0', 'pre:0', 'refused']);
    const rejected = page.locator('#failure-rejected');
    assert.match((await rejected.textContent()) ?? '', /\(you\)\s*rejected/);
    assert.ok(await rejected.locator('time').count(), 'when');
    assert.equal(await rejected.locator('.decision-comment bdi').textContent(), COMMENT, 'why, isolated');
    assert.equal(await page.locator('#run-decisions .decision-comment bdi').textContent(), COMMENT, 'kept on the run');
    // The comment travels with the journal the console exports.
    await page.locator('#journal-verdict[data-verdict="ok"]').waitFor({ timeout: 30_000 });
    const [download] = await Promise.all([page.waitForEvent('download'), page.locator('#download-journal').click()]);
    const exported = JSON.parse(readFileSync((await download.path())!, 'utf8'));
    const received = exported.records.find((r: { kind: string }) => r.kind === 'approval_received');
    assert.deepEqual([received.data.by, received.data.decision, received.data.comment], [me, 'reject', COMMENT]);
    // The failure panel fits and passes axe in both themes at both widths (its comment bidi-isolated).
    looks.push(...(await judgeLooks(page, 'a rejected run')));

    // ------------------------------------------------------------ an approval timed out: its deadline
    t = await open('late');
    assert.deepEqual([t.kind, t.step, t.node, t.state], ['approval_timeout', 'pre:0', 'pre:0', 'refused']);
    assert.match(
      (await page.locator('#failure-timed-out').textContent()) ?? '',
      /^due \d\d:\d\d:\d\d\.\d{3}, decided at .*; 0 of 1 approval came in time/,
    );

    // ------------------------------------------------------------ job failures: the statement, the cell
    t = await open('sql');
    assert.deepEqual([t.kind, t.step, t.node, t.state], ['job', 'sql/call', 'sql', 'failed']);
    assert.match((await page.locator('#failure-statement').textContent()) ?? '', /^statement 2\s*SELECT nope FROM t$/);
    t = await open('notebook');
    assert.deepEqual([t.kind, t.node, t.state], ['job', 'cell-2', 'failed']);
    assert.match((await page.locator('#failure-cell').textContent()) ?? '', /^cell 3 \(compute\)\s*throw new Error\("boom"\)$/);
    looks.push(...(await judgeLooks(page, 'a failed notebook')));
    assert.deepEqual(looks, [], 'axe and the layout in every look');

    // ------------------------------------------------------------ a cancel: who
    t = await open('cancelled');
    assert.deepEqual([t.kind, t.state], ['cancelled', 'cancelled']);
    assert.match((await page.locator('#failure-cancelled-by').textContent()) ?? '', /\(you\)/);

    // ------------------------------------------------------------ runs by failure reason: the cell's filter, and the search
    await goTo(page, '#/runs');
    await page.locator(`#runs-table tr[data-run="${runs['timeout']}"]`).waitFor();
    await page.locator('#filter-reason').selectOption('step_timeout');
    await page.waitForURL(/reason=step_timeout/);
    const shown = () => page.locator('#runs-table tr[data-run]').evaluateAll((rs) => rs.map((r) => r.getAttribute('data-run')));
    await until('the runs that timed out', async () => (await shown()).join() === runs['timeout']);
    // The rows are filtered in the page at once; the count, once the cell answered the filtered list.
    await until('the cell to filter: 1 of 1', async () =>
      /^1 shown of 1 runs/.test((await page.locator('#runs-status').textContent()) ?? ''),
    );
    await page.locator('#filter-reason').selectOption('');
    await until('every run again', async () => (await shown()).length === Object.keys(runs).length);
    // A reason in the list is a link to its filter.
    await page.locator(`#runs-table tr[data-run="${runs['gate']}"] td.reason button`).click();
    await page.waitForURL(/reason=gate_declined/);
    await until('the runs a gate refused', async () => (await shown()).join() === runs['gate']);
    await goTo(page, '#/runs');
    await page.locator('#filter-q').fill('sql_error');
    await page.locator('#filter-q').press('Enter');
    await until('the search by reason', async () => (await shown()).join() === runs['sql']);
    await axe(page, 'runs searched by reason');

    assert.deepEqual(watch.problems, [], 'no page error');
  } finally {
    await browser?.close();
    await cell.stop();
    cell.cleanup();
    await db.drop();
    await ai.close();
  }
});
