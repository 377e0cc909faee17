// Live tokens in the operator console (#24), in Debian's chromium against the real cell process and
// a fake OpenAI server that streams: the run page shows the model's answer growing in the running
// step ("Answering now") as the pieces are released one by one, and the section goes once the step's
// record (the whole answer) arrives and the run ends.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { startOpenAIServer, type FakeOpenAI } from '../fixtures/openai-server.ts';
import { startCellProcess } from '../helpers/cell-process.ts';
import { A, ARGS, CHROMIUM, T, apiOf, fakeProvider, crew, newContext, ok, shot, until, type Watch } from './helpers.ts';

test('the run page shows the answer growing in the running step', {
  timeout: 180_000,
  skip: existsSync(CHROMIUM) ? false : `${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)`,
}, async () => {
  const pieces = ['Pumps ', 'one and two ', 'are fine; ', 'pump three leaks.'];
  // Piece i waits for release i: the test lets the answer grow one piece at a time. A last, empty
  // piece holds the answer's end until the whole text has been seen: once the stream ends, the
  // step's record arrives and the live section goes, whether or not the page showed the last piece.
  const served = [...pieces, ''];
  const gates = served.map(() => {
    let open!: () => void;
    const p = new Promise<void>((r) => {
      open = r;
    });
    return { p, open };
  });
  const ai: FakeOpenAI = await startOpenAIServer({
    apiKey: 'sk-fake',
    respond: () => ({ content: pieces.join(''), pieces: served, beforePiece: (i) => (i > 0 ? gates[i]!.p : undefined) }),
  });
  const cell = await startCellProcess({ args: ['--cell-id', 'cell-live'] });
  let browser: Browser | null = null;
  const watch: Watch = { requested: [], problems: [] };
  try {
    const api = apiOf(cell);
    await fakeProvider(api, ai.url, { max_retries: 0, stream: true });
    const c = await crew(api, 'inspection', ['inspector']);
    const runId = (await ok(api, 'POST', `${T}/crews/${c.crew}/runs`, { input: 'inspect the pumps' })).run_id as string;

    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS, timeout: 30_000 });
    const ctx = await newContext(browser, new URL(cell.url).origin, watch);
    const page = await ctx.newPage();
    await page.goto(`${cell.url}/console`);
    await page.locator('#api-key').fill(cell.adminKey);
    await page.locator('#use-key').click();
    await page.locator('#whoami').waitFor();
    await page.goto(`${cell.url}/console#/runs/${runId}`);

    // Read without waiting: a locator's textContent waits 30 s for an element that a re-render replaced.
    const text = { textContent: () => page.evaluate(() => document.querySelector('#live-answers .live-text')?.textContent ?? null) };
    // Joined mid-step: the answer so far, then each piece as it is released.
    await until('the first piece on the page', async () => (await text.textContent()) === pieces[0]);
    assert.match((await page.locator('#live-answers').textContent()) ?? '', /inspector/);
    for (let i = 1; i < pieces.length; i++) {
      gates[i]!.open();
      const want = pieces.slice(0, i + 1).join('');
      await until(`the answer to grow to piece ${i}`, async () => (await text.textContent()) === want);
      if (i === 2) await shot(page, 'console-live-tokens.png', false);
    }
    gates[pieces.length]!.open();
    // The step's record carries the whole answer; the run ends and the live section goes.
    await until('the run to end', async () => (await api('GET', `${A}/jobs/runs/${runId}`)).body.state === 'completed');
    await page.locator('#stream-state', { hasText: 'has ended' }).waitFor({ timeout: 30_000 });
    await until('the live section to go', async () => (await page.locator('#live-answers').count()) === 0);
    assert.deepEqual(watch.problems, []);
  } finally {
    for (const g of gates) g.open();
    await browser?.close();
    await cell.stop();
    cell.cleanup();
    await ai.close();
  }
});
