// Lost outcomes in the console (issue 43 §5, docs/engine.md "Effect keys and the crash rule"), in Debian's
// chromium against the real cell process: a `single` job POSTs to a service that closes the connection
// after reading the request, so the run waits `outcome_unknown`. The Approvals view lists it; its page
// names the call and its effect key; an operator records the result the service reports (the run goes
// on and completes with it) or fails the run (Why it failed: who failed it); the tool call shows its
// effect key and how it was resolved; a read-only key sees no resolve button. axe finds no violation in
// either theme at either width.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser } from 'playwright-core';
import { effectKey } from '../../core/engine/effect-key.ts';
import { startCellProcess, type CellProcess } from '../helpers/cell-process.ts';
import { testStore } from '../helpers/inproc.ts';
import { A, ARGS, goTo, CHROMIUM, apiOf, judgeLooks, newContext, ok, pasteKey, until, type Watch } from './helpers.ts';

test('a lost outcome: listed, named with its effect key, recorded or failed by an operator, by permission', {
  timeout: 600_000,
  skip: existsSync(CHROMIUM) ? false : `${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)`,
}, async () => {
  // The service reads each POST and closes the connection without an answer: it may have acted.
  const seen: (string | undefined)[] = [];
  const service = createServer((req, res) => {
    req.resume().on('end', () => {
      seen.push(req.headers['idempotency-key'] as string | undefined);
      req.socket.destroy();
      res.destroy();
    });
  });
  await new Promise<void>((r) => service.listen(0, '127.0.0.1', () => r()));
  const origin = `http://127.0.0.1:${(service.address() as AddressInfo).port}`;
  const db = await testStore();
  const cell: CellProcess = await startCellProcess({
    args: ['--cell-id', 'cell-outcomes', '--egress-allow-private', '127.0.0.1/32', ...(db.url ? ['--store', db.url] : [])],
  });
  let browser: Browser | null = null;
  const watch: Watch = { requested: [], problems: [] };
  try {
    const api = apiOf(cell);
    const refund = async (n: number) => {
      const r = await ok(api, 'POST', `${A}/jobs/runs`, {
        job_type: 'single',
        workspace_id: 'refunds',
        spec: {
          tool: 'http.request',
          args: { method: 'POST', url: `${origin}/refunds`, body: { order: n } },
          authority: { egress_allowlist: [`POST:${origin}`] },
        },
      });
      await until(
        `run ${r.run_id} to lose its outcome`,
        async () => (await api('GET', `${A}/jobs/runs/${r.run_id}`)).body.state === 'outcome_unknown',
      );
      return r.run_id as string;
    };
    const recorded = await refund(1);
    const failed = await refund(2);
    const key = effectKey(recorded, 'tool/call');

    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS, timeout: 30_000 });
    const ctx = await newContext(browser, new URL(cell.url).origin, watch);
    const page = await ctx.newPage();
    await pasteKey(page, cell.url, cell.adminKey);

    // ------------------------------------------------------------ Approvals lists what waits on an operator
    await goTo(page, '#/approvals', `#approvals-lost li[data-run="${recorded}"]`);
    assert.match(
      (await page.locator(`#approvals-lost li[data-run="${recorded}"]`).textContent()) ?? '',
      new RegExp(`http\\.request at tool/call, effect key ${key}`),
    );
    assert.equal(await page.locator('#approvals-lost li[data-run]').count(), 2);

    // ------------------------------------------------------------ the run's page: the call, its effect key; record the result
    await goTo(page, `#/runs/${recorded}`, '#outcome');
    assert.equal(await page.locator('h1 .state').textContent(), 'outcome_unknown');
    assert.equal(await page.locator('#outcome-tool').textContent(), 'http.request');
    assert.equal(await page.locator('#outcome-effect-key').textContent(), key);
    assert.equal(seen[0], `"${key}"`, 'the key the service saw');
    const problems = await judgeLooks(page, 'lost outcome');
    await page.locator('#outcome-result').fill('{"refund":"done","id":"r-1"}');
    await page.locator('#outcome-comment').fill('The service shows refund r-1.');
    await page.locator('button.outcome-record').click();
    const run = await until('the run to complete with the recorded result', async () => {
      const r = (await api('GET', `${A}/jobs/runs/${recorded}`)).body;
      return r.state === 'completed' ? r : null;
    });
    assert.deepEqual(run.output, { refund: 'done', id: 'r-1' });
    assert.equal(seen.length, 2, 'recording sends nothing');
    await page.locator('#outcome-history .resolutions li[data-resolution="record"]').waitFor({ timeout: 30_000 });
    assert.match(
      (await page.locator('#outcome-history').textContent()) ?? '',
      /\(you\)\s*chose record[\s\S]*The service shows refund r-1\./,
    );
    const call = page.locator('#tool-calls .tool-call[data-tool="http.request"]');
    await call.waitFor();
    assert.equal(await call.locator('.effect-key').textContent(), key);
    assert.match((await call.locator('.tool-resolution').textContent()) ?? '', /^record by .*\(you\)/);

    // ------------------------------------------------------------ a read-only key sees it, resolves nothing
    const ro = (await ok(api, 'POST', `${A}/api-keys`, { name: 'reader', scopes: ['system.orchestration.admin.read'] })).secret as string;
    const roPage = await ctx.newPage();
    await pasteKey(roPage, cell.url, ro);
    await goTo(roPage, `#/runs/${failed}`, '#outcome');
    assert.equal(await roPage.locator('button.outcome-retry, button.outcome-record, button.outcome-fail').count(), 0);
    await roPage.close();

    // ------------------------------------------------------------ fail it: Why it failed says who
    await goTo(page, `#/runs/${failed}`, '#outcome');
    await page.locator('button.outcome-fail').click();
    await goTo(page, `#/runs/${failed}`, '#failure[data-kind="outcome"]');
    assert.equal(await page.locator('#failure-reason').textContent(), 'outcome_unknown');
    assert.match((await page.locator('#failure-resolved-by').textContent()) ?? '', /\(you\)/);
    problems.push(...(await judgeLooks(page, 'a lost outcome failed')));
    assert.deepEqual(problems, [], 'axe and the layout in every look');
    assert.deepEqual(watch.problems, [], 'no page error');
  } finally {
    await browser?.close();
    await cell.stop();
    cell.cleanup();
    await db.drop();
    service.close();
    service.closeAllConnections();
  }
});
