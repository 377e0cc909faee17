// The console's lists past their first page, the stalled badge and the dark theme, in Debian's
// chromium against the real cell process (issue 23, items 2, 9 and 10):
// - more runs than one page (200): the pager says "page 1 of 2", the older page lists the oldest runs
//   and the newer page comes back;
// - the state filter and a search by run id reach past the page loaded (the cell filters);
// - a crew run whose model call hangs for longer than ten leases is `stalled`: the badge in the list
//   and on its page;
// - with the system's dark preference the page is drawn dark, and axe-core still finds no violation.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { startOpenAIServer, systemPrompt, type FakeOpenAI } from '../fixtures/openai-server.ts';
import { startCellProcess, type CellProcess } from '../helpers/cell-process.ts';
import { testStore } from '../helpers/inproc.ts';
import { A, ARGS, CHROMIUM, T, apiOf, fakeProvider, axe, crew, newContext, ok, pasteKey, shots, until, type Watch } from './helpers.ts';

const RUNS = 205;

/** The relative luminance of a CSS `rgb(r, g, b)` colour (WCAG's formula). */
function luminance(css: string): number {
  const m = /rgba?\((\d+), (\d+), (\d+)/.exec(css);
  assert.ok(m, `a colour: ${css}`);
  const [r, g, b] = [m[1], m[2], m[3]].map((v) => {
    const c = Number(v) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r! + 0.7152 * g! + 0.0722 * b!;
}

test('the console: paging past the newest 200 runs, the stalled badge, the dark theme', {
  timeout: 240_000,
  skip: existsSync(CHROMIUM) ? false : `${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)`,
}, async () => {
  const db = await testStore();
  // The model answers the stuck seat after 10 minutes: its run makes no journal progress.
  const ai: FakeOpenAI = await startOpenAIServer({
    apiKey: 'sk-fake',
    respond: (req) => (/ROLE:stuck/.test(systemPrompt(req)) ? { content: 'late', delayMs: 600_000 } : { content: 'ok' }),
  });
  // A lease of 1 s: a run with no progress for 10 s is stalled (STALL_LEASES).
  const cell: CellProcess = await startCellProcess({ args: ['--lease-ms', '1000', ...(db.url ? ['--store', db.url] : [])] });
  let browser: Browser | null = null;
  const watch: Watch = { requested: [], problems: [] };
  try {
    const api = apiOf(cell);
    await fakeProvider(api, ai.url, { max_retries: 0 });
    const stuck = await crew(api, 'stuck-summary', ['stuck']);
    const stalledId = (await ok(api, 'POST', `${T}/crews/${stuck.crew}/runs`, { input: 'summarise' })).run_id as string;
    const ids: string[] = [];
    for (let i = 0; i < RUNS; i++) {
      const r = await ok(api, 'POST', `${A}/jobs/runs`, { job_type: 'sql', workspace_id: 'paging', spec: { sql: `SELECT ${i} AS n` } });
      ids.push(r.run_id as string);
    }
    await until(
      'every run to end',
      async () => {
        const items = [
          ...(await api('GET', `${A}/jobs/runs?kind=all&limit=200&offset=0`)).body.items,
          ...(await api('GET', `${A}/jobs/runs?kind=all&limit=200&offset=200`)).body.items,
        ] as { run_id: string; state: string }[];
        return items.length === RUNS + 1 && items.every((x) => x.run_id === stalledId || x.state === 'completed');
      },
      120_000,
    );

    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS, timeout: 30_000 });
    const origin = new URL(cell.url).origin;
    const ctx = await newContext(browser, origin, watch);
    const page = await ctx.newPage();

    await pasteKey(page, cell.url, cell.adminKey);

    // ------------------------------------------------------------ page 1: the newest 200
    const status = page.locator('#runs-status');
    await until('the first page', async () => /page 1 of 2/.test((await status.textContent()) ?? ''));
    assert.match(
      (await status.textContent()) ?? '',
      new RegExp(`200 shown of ${RUNS + 1} runs \\(page 1 of 2, 200 a page, newest first\\)`),
    );
    assert.equal(await page.locator(`#runs-table tr[data-run="${ids.at(-1)}"]`).count(), 1, 'the newest run is on page 1');
    assert.equal(await page.locator(`#runs-table tr[data-run="${ids[0]}"]`).count(), 0, 'the oldest is not');
    assert.ok(await page.locator('#runs-newer').isDisabled(), 'no newer page');

    // ------------------------------------------------------------ the stalled badge, in the list and on the run's page
    // The stuck run is the oldest: on page 2. Its page first, once the cell calls it stalled.
    await until('the stuck run to be stalled', async () => (await api('GET', `${A}/jobs/runs/${stalledId}`)).body.stalled === true, 60_000);
    await page.evaluate((id) => {
      window.location.hash = `#/runs/${id}`;
    }, stalledId);
    await page.locator('#run-stalled').waitFor();
    assert.match((await page.locator('#stalled-note').textContent()) ?? '', /\S/);
    await page.goBack();
    await until('the list again', async () => /page 1 of 2/.test((await status.textContent()) ?? ''));

    // ------------------------------------------------------------ page 2: the oldest 5
    await page.locator('#runs-older').click();
    await page.waitForURL(/page=1/);
    await until('the second page', async () => /page 2 of 2/.test((await status.textContent()) ?? ''));
    assert.match((await status.textContent()) ?? '', new RegExp(`${RUNS + 1 - 200} shown of ${RUNS + 1} runs`));
    const shown = await page.locator('#runs-table tr[data-run]').evaluateAll((rs) => rs.map((r) => r.getAttribute('data-run')));
    assert.deepEqual(shown, [stalledId, ...ids.slice(0, RUNS - 200)].reverse(), 'the oldest runs, newest first');
    const stalledRow = page.locator(`#runs-table tr[data-run="${stalledId}"]`);
    assert.equal((await stalledRow.locator('.state-stalled').textContent())?.trim(), 'stalled');
    assert.ok(await page.locator('#runs-older').isDisabled(), 'no older page');
    await page.locator('#runs-newer').click();
    await until('page 1 again', async () => /page 1 of 2/.test((await status.textContent()) ?? ''));

    // ------------------------------------------------------------ filters span every run; a run id finds its run
    // The one running run is the oldest (page 2); filtered by state, the cell answers it alone.
    await page.locator('#filter-state').selectOption('running');
    await page.waitForURL(/state=running/);
    await until('the running run alone', async () => /^1 shown of 1 runs/.test((await status.textContent()) ?? ''));
    assert.deepEqual(await page.locator('#runs-table tr[data-run]').evaluateAll((rs) => rs.map((r) => r.getAttribute('data-run'))), [
      stalledId,
    ]);
    await page.locator('#filter-state').selectOption('');
    await until('every run again', async () => /page 1 of 2/.test((await status.textContent()) ?? ''));
    // The oldest SQL run is on page 2: its id typed in the search finds it from page 1.
    await page.locator('#filter-q').fill(ids[0]!);
    await page.locator('#filter-q').press('Enter');
    await until(
      'the searched run',
      async () =>
        (await page.locator('#runs-table tr[data-run]').evaluateAll((rs) => rs.map((r) => r.getAttribute('data-run')))).join() === ids[0],
    );
    await page.locator('#filter-q').fill('');
    await page.locator('#filter-q').press('Enter');
    await until('every run again', async () => /page 1 of 2/.test((await status.textContent()) ?? ''));

    // ------------------------------------------------------------ the dark theme follows the system
    const background = () => page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor);
    const text = () => page.evaluate(() => getComputedStyle(document.documentElement).color);
    await page.emulateMedia({ colorScheme: 'light' });
    assert.ok(luminance(await background()) > 0.8, 'light: a light page');
    await page.emulateMedia({ colorScheme: 'dark' });
    assert.ok(luminance(await background()) < 0.05, `dark: a dark page (${await background()})`);
    assert.ok(luminance(await text()) > 0.6, 'dark: light text');
    assert.equal(await page.evaluate(() => getComputedStyle(document.documentElement).colorScheme), 'dark');
    await axe(page, 'runs list, dark');
    await shots(page, 'console-runs-dark');

    assert.deepEqual(watch.problems, []);
  } finally {
    await browser?.close();
    await cell.stop();
    await ai.close();
    await db.drop();
  }
});
