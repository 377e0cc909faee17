// Fork and rerun in the operator console (issue #24), in a real browser (Debian's chromium driven by
// playwright-core) against the real cell process: a failed run shows the attempts of its failing
// step (a retry policy), "Fork here" on the step and "Rerun from the failure"; the rerun opens on
// its own page, shows where it was forked from and completes; the parent lists it among its forks;
// a read-only key sees neither control.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { chromium, type Page } from 'playwright-core';
import { startOpenAIServer, systemPrompt, type FakeOpenAI } from '../fixtures/openai-server.ts';
import { startCellProcess, type CellProcess } from '../helpers/cell-process.ts';
import { A, ARGS, CHROMIUM, T, apiOf, newContext, ok, until, type Watch } from './helpers.ts';

async function pasteKey(page: Page, url: string, key: string): Promise<void> {
  await page.goto(`${url}/console`);
  await page.locator('#api-key').fill(key);
  await page.locator('#use-key').click();
  await page.locator('#whoami').waitFor();
}

test('the console forks and reruns a failed run, shows its attempts and its lineage, by permission', {
  timeout: 180_000,
  skip: existsSync(CHROMIUM) ? false : `${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)`,
}, async () => {
  let broken = true;
  const ai: FakeOpenAI = await startOpenAIServer({
    apiKey: 'sk-fake',
    // The checker fails: a 500 (retried), then a 400 (not retried); once fixed it answers.
    respond: (req) => {
      if (!systemPrompt(req).includes('ROLE:checker') || !broken) return { content: `done by ${systemPrompt(req)}` };
      return { status: ai.requests.filter((r) => systemPrompt(r.body).includes('ROLE:checker')).length === 1 ? 500 : 400 };
    },
  });
  const cell: CellProcess = await startCellProcess();
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
  try {
    const api = apiOf(cell);
    const s = await ok(api, 'POST', `${A}/secrets`, { name: 'k', value: 'sk-fake' });
    await ok(api, 'POST', `${A}/ai/model-providers`, {
      provider_type: 'openai-compatible',
      default_model: 'm',
      base_url: `${ai.url}/v1`,
      api_key_secret_id: s.secret_id,
      max_retries: 0,
    });
    const f = await ok(api, 'POST', `${T}/formations`, { name: 'forkable', coordination_policy: 'sequential' });
    const assignments: Record<string, string> = {};
    for (const role of ['writer', 'checker']) {
      const b = await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
        role_label: role,
        required_skills: [],
        authority_cap: { allowed_tools: [], permission_mode: 'auto', clearance_level: 0 },
        ...(role === 'checker' ? { retry: { max_attempts: 2, backoff_ms: 0, max_backoff_ms: 0, on: ['provider_error'] } } : {}),
      });
      const a = await ok(api, 'POST', `${T}/agents`, {
        source: 'scratch',
        role_label: role,
        system_prompt: `ROLE:${role}`,
        authority_template: { allowed_tools: [], permission_mode: 'auto' },
      });
      await ok(api, 'POST', `${T}/agents/${a.agent_id}/budget-ledger`, { budget_limit: 100_000 });
      assignments[b.billet_id] = a.agent_id;
    }
    const crew = await ok(api, 'POST', `${T}/crews`, { formation_id: f.formation_id, assignments });
    const run = await ok(api, 'POST', `${T}/crews/${crew.crew_id}/runs`, { input: 'task' });
    await until('the run to fail', async () => (await ok(api, 'GET', `${T}/crews/${crew.crew_id}/runs/${run.run_id}`)).state === 'failed');
    broken = false;

    const watch: Watch = { requested: [], problems: [] };
    const ctx = await newContext(browser, cell.url, watch);
    const page = await ctx.newPage();
    await pasteKey(page, cell.url, cell.adminKey);
    await page.evaluate((h) => {
      window.location.hash = h;
    }, `#/runs/${run.run_id}`);
    // The failing step is selected: its attempts, and the fork control.
    const attempts = page.locator('#step-attempts');
    await attempts.waitFor();
    const text = await attempts.textContent();
    assert.match(text ?? '', /#1 failed \(provider_error\)/);
    assert.match(text ?? '', /#2 failed/);
    await page.locator('#fork-here').waitFor();
    // Rerun from the failure: a new run, opened, forked from this one.
    const calls = ai.requests.length;
    await page.locator('#rerun-run').click();
    await page.waitForFunction((id) => window.location.hash.startsWith('#/runs/') && !window.location.hash.includes(id), run.run_id);
    const forked = page.locator('#forked-from');
    await forked.waitFor();
    assert.match((await forked.textContent()) ?? '', new RegExp(run.run_id));
    const child = decodeURIComponent(await page.evaluate(() => window.location.hash.split('/')[2]!));
    const done = await until('the rerun to complete', async () => {
      const r = await ok(api, 'GET', `${T}/crews/${crew.crew_id}/runs/${child}`);
      return r.state === 'completed' ? r : null;
    });
    assert.equal(done.forked_from.run_id, run.run_id);
    assert.equal(ai.requests.length - calls, 1, 'the writer was reused; only the checker ran again');
    // The parent lists its fork.
    await page.evaluate((h) => {
      window.location.hash = h;
    }, `#/runs/${run.run_id}`);
    await page.locator('#run-forks').waitFor();
    assert.match((await page.locator('#run-forks').textContent()) ?? '', new RegExp(child));

    // A read-only key: no fork, no rerun.
    const ro = await ok(api, 'POST', `${A}/api-keys`, { name: 'ro', scopes: ['agent_teams.read', 'system.orchestration.admin.read'] });
    const roPage = await (await newContext(browser, cell.url, { requested: [], problems: [] })).newPage();
    await pasteKey(roPage, cell.url, ro.secret);
    await roPage.evaluate((h) => {
      window.location.hash = h;
    }, `#/runs/${run.run_id}`);
    await roPage.locator('#step-attempts').waitFor();
    assert.equal(await roPage.locator('#fork-here').count(), 0);
    assert.equal(await roPage.locator('#rerun-run').count(), 0);
    assert.deepEqual(watch.problems, []);
  } finally {
    await browser.close();
    await cell.stop();
    cell.cleanup();
    await ai.close();
  }
});
