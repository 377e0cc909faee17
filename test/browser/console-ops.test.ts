// The operator console, round 2, in a real browser (Debian's chromium driven by
// playwright-core) against the real cell process, signed in with pasted API
// keys; one browser, the views visited in one session:
//
// - why a run failed: the failing step selected, the error code, the model
//   provider's HTTP status, the attempts; reason and duration in the runs list;
// - graph steps reached with Tab; the Cells view lists the group;
// - honest liveness: a banner within 5 s of the cell stopping, gone after it
//   restarts, and never "nothing waits" from data the cell did not confirm;
// - axe-core finds no violation on any view; screenshots at 1280 and 390 px
//   land in test/artifacts/ (CONSOLE_DOC_IMAGES=1 refreshes docs/images/).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startOpenAIServer, systemPrompt, type FakeOpenAI } from '../fixtures/openai-server.ts';
import { startCellProcess, type CellProcess } from '../helpers/cell-process.ts';
import { testStore } from '../helpers/inproc.ts';
import { A, ARGS, CHROMIUM, T, apiOf, axe, crew, newContext, ok, shots, until, type Watch } from './helpers.ts';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

async function pasteKey(page: Page, url: string, key: string): Promise<void> {
  await page.goto(`${url}/console`);
  await page.locator('#api-key').fill(key);
  await page.locator('#use-key').click();
  await page.locator('#whoami').waitFor();
}

async function go(page: Page, hash: string): Promise<void> {
  await page.evaluate((h) => {
    window.location.hash = h;
  }, hash);
}

test('the operator console: why a run failed, keyboard graph, cells, honest liveness', {
  timeout: 240_000,
  skip: existsSync(CHROMIUM) ? false : `${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)`,
}, async () => {
  const ai: FakeOpenAI = await startOpenAIServer({
    apiKey: 'sk-fake',
    respond: (req) =>
      /ROLE:unlucky/.test(systemPrompt(req)) ? { status: 500 } : { content: 'done', usage: { prompt_tokens: 30, completion_tokens: 10 } },
  });
  const db = await testStore();
  const port = await freePort();
  const cellArgs = ['--cell-id', 'cell-ops', '--port', String(port), ...(db.url ? ['--store', db.url] : [])];
  let cell: CellProcess = await startCellProcess({ args: cellArgs });
  let browser: Browser | null = null;
  const watch: Watch = { requested: [], problems: [] };
  try {
    const api = apiOf(cell);
    const secret = await ok(api, 'POST', `${A}/secrets`, { name: 'fake-openai', value: 'sk-fake' });
    await ok(api, 'POST', `${A}/ai/model-providers`, {
      provider_type: 'openai-compatible',
      default_model: 'fake-model',
      base_url: `${ai.url}/v1`,
      api_key_secret_id: secret.secret_id,
      max_retries: 1,
    });
    const failing = await crew(api, 'failing-summary', ['unlucky']);
    const plain = await crew(api, 'plain-summary', ['writer', 'editor']);
    const bad = (await ok(api, 'POST', `${T}/crews/${failing.crew}/runs`, { input: 'summarise' })).run_id as string;
    const good = (await ok(api, 'POST', `${T}/crews/${plain.crew}/runs`, { input: 'summarise' })).run_id as string;
    await until('both runs to end', async () => {
      const [a, b] = [(await api('GET', `${A}/jobs/runs/${bad}`)).body.state, (await api('GET', `${A}/jobs/runs/${good}`)).body.state];
      return a === 'failed' && b === 'completed';
    });

    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS, timeout: 30_000 });
    const origin = new URL(cell.url).origin;
    const ctx = await newContext(browser, origin, watch);
    const page = await ctx.newPage();
    await pasteKey(page, cell.url, cell.adminKey);

    // ------------------------------------------------------------ the runs list: reason and duration
    const row = page.locator(`#runs-table tr[data-run="${bad}"]`);
    await row.waitFor();
    assert.equal((await row.locator('td.reason').textContent())?.trim(), 'model_error');
    assert.match((await row.locator('td.duration').textContent()) ?? '', /^\d+(\.\d)? (ms|s)$/);
    assert.equal(await row.locator('td.source [data-source="api"]').count(), 1, 'started over the API');
    assert.match((await page.locator('#runs-status').textContent()) ?? '', /· live$/);
    await axe(page, 'runs list');
    await shots(page, 'console-runs');

    // ------------------------------------------------------------ why it failed
    await row.locator('a').first().click();
    const upstream = page.locator('#failure-upstream');
    await upstream.waitFor();
    assert.match((await upstream.textContent()) ?? '', /answered HTTP 500 \(provider_error\): the model provider failed/);
    assert.match((await page.locator('#failure-attempts').textContent()) ?? '', /^2 attempts, all failed/);
    assert.equal(await page.locator('#failure-reason').textContent(), 'model_error');
    assert.match((await page.locator('#failure-step').textContent()) ?? '', /^agent:/);
    const failedNode = page.locator('#graph [data-node^="agent:"][data-state="failed"]');
    assert.equal(await failedNode.getAttribute('aria-pressed'), 'true', 'the failing step is selected');
    assert.match((await failedNode.getAttribute('class')) ?? '', /\bselected\b/);
    await page.locator('#step-details').waitFor();
    assert.equal(
      (await page.locator('#step-details h3 code').textContent())?.trim(),
      await failedNode.getAttribute('data-node'),
      "the failing step's records are shown",
    );
    assert.equal((await page.locator('#no-output').textContent())?.trim(), 'No output: the run failed.');
    await page.locator('#journal-verdict[data-verdict="ok"]').waitFor({ timeout: 30_000 });
    await axe(page, 'failed run');
    await shots(page, 'console-run-failed');

    // ------------------------------------------------------------ Tab reaches a graph step; Enter selects it
    await go(page, `#/runs/${good}`);
    await page.locator('#graph [data-node][data-state="completed"]').first().waitFor();
    await page.locator('#main').focus();
    let reached: string | null = null;
    for (let i = 0; i < 40 && reached === null; i++) {
      await page.keyboard.press('Tab');
      reached = await page.evaluate(() => document.activeElement?.getAttribute('data-node') ?? null);
    }
    assert.ok(reached, 'Tab reaches a step of the graph');
    await page.keyboard.press('Enter');
    await page.locator('#step-details').waitFor();
    assert.equal((await page.locator('#step-details h3 code').textContent())?.trim(), reached);
    await page.locator('#journal-verdict[data-verdict="ok"]').waitFor({ timeout: 30_000 });
    await axe(page, 'completed run');
    await shots(page, 'console-run');

    // ------------------------------------------------------------ the group of cells
    await page.locator('#nav-cells').click();
    const me = page.locator('#cells-table tr[data-cell="cell-ops"]');
    await me.waitFor();
    assert.match((await me.textContent()) ?? '', /this cell/);
    assert.equal(await me.locator('.state').textContent(), 'live');
    await axe(page, 'cells');
    await shots(page, 'console-cells');

    // ------------------------------------------------------------ honest liveness: stop the cell, then start it again
    await page.locator('#nav-approvals').click();
    await page.locator('#approvals-mine', { hasText: 'Nothing waits for your decision.' }).waitFor();
    await cell.stop();
    const stoppedAt = Date.now();
    const banner = page.locator('#liveness-banner');
    await banner.waitFor({ timeout: 5000 });
    assert.ok(Date.now() - stoppedAt <= 5000, 'the banner within 5 s of the stop');
    assert.match((await banner.textContent()) ?? '', /Disconnected from the cell, retrying\. Last update (just now|\d+ s ago)/);
    await until('the approvals to stop saying nothing waits', async () => (await page.locator('text=Nothing waits').count()) === 0, 6000);
    assert.match((await page.locator('#approvals-mine').textContent()) ?? '', /Unknown: the cell has not answered since/);
    await page.locator('#nav-runs').click();
    await page.waitForTimeout(300);
    assert.doesNotMatch((await page.locator('#runs-status').textContent()) ?? '', /live$/, 'never "live" on stale data');
    await axe(page, 'disconnected');
    await shots(page, 'console-disconnected');
    cell = await startCellProcess({ dataDir: cell.dataDir, args: cellArgs });
    await banner.waitFor({ state: 'detached', timeout: 10_000 });
    await until(
      'the runs list to be live again',
      async () => /· live$/.test((await page.locator('#runs-status').textContent()) ?? ''),
      15_000,
    );

    assert.deepEqual(
      watch.problems.filter((p) => !/Failed to fetch|ERR_CONNECTION_REFUSED/.test(p)),
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
