// The docs page in a real browser (Debian's chromium driven by
// playwright-core) against the real cell process: the operations list
// renders, a known operation is shown and can be tried, nothing is fetched
// from anywhere but the cell, and the strict CSP is not violated.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium } from 'playwright-core';
import { startCellProcess } from '../helpers/cell-process.ts';

const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = resolve(import.meta.dirname, '../artifacts');
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

test('the docs page renders the curated document offline, from the cell only', {
  timeout: 240_000,
  skip: existsSync(CHROMIUM)
    ? false
    : `${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium; make test does when root)`,
}, async () => {
  const cell = await startCellProcess();
  const profile = mkdtempSync(join(tmpdir(), 'docs-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    viewport: { width: 1280, height: 1000 },
    timeout: 30_000,
  });
  try {
    const origin = new URL(cell.url).origin;
    const requested: string[] = [];
    const problems: string[] = [];
    context.on('request', (r) => {
      requested.push(r.url());
    });
    // Anything not from the cell is refused outright, so "works with no network" is what is tested.
    await context.route(
      (url) => url.origin !== origin && url.protocol !== 'data:',
      (route) => route.abort('blockedbyclient'),
    );
    const page = context.pages()[0] ?? (await context.newPage());
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(m.text());
    });
    page.on('pageerror', (e) => {
      problems.push(String(e));
    });

    const res = await page.goto(`${cell.url}/api/public/v1/docs`, { waitUntil: 'load', timeout: 30_000 });
    assert.equal(res?.status(), 200);
    assert.match(res?.headers()['content-security-policy'] ?? '', /default-src 'self'/);

    // The operations list, and known operations in it. Swagger UI renders only the operations near
    // the viewport (a window virtualizer), so the page is scrolled down, a screen at a time, and
    // every path rendered on the way is collected, until the whole document has gone by.
    await page.locator('.opblock').first().waitFor({ state: 'visible', timeout: 30_000 });
    const paths = new Set<string>();
    const operations = await page.evaluate(() => (window as any).ui.getSystem().specSelectors.operations().size as number);
    for (let screens = 0; screens < 400; screens++) {
      for (const p of await page
        .locator('.opblock-summary-path')
        .evaluateAll((els) => els.map((e) => e.getAttribute('data-path') ?? e.textContent ?? '')))
        paths.add(p);
      const atEnd = await page.evaluate(() => {
        const before = window.scrollY;
        window.scrollBy(0, window.innerHeight * 0.8);
        return window.scrollY === before;
      });
      if (atEnd) break;
      await page.waitForTimeout(50);
    }
    assert.ok(operations > 100, `the page holds the whole curated document (${operations} operations)`);
    assert.ok(paths.has('/api/public/v1/openapi.json'), `paths shown: ${[...paths].join(', ')}`);
    assert.ok(paths.has('/api/public/v1/admin/api-keys'), 'the API keys operations are listed');
    assert.ok(paths.has('/api/public/v1/admin/catalog/sources'), 'the catalog sources operations are listed');
    assert.ok(paths.has('/.well-known/agent-cell/run-log/checkpoint'), 'the run log operations are listed');
    assert.equal(problems.length, 0, problems.join('\n'));
    await page.evaluate(() => window.scrollTo(0, 0));
    assert.ok(
      await page
        .locator('.info .title')
        .first()
        .textContent()
        .then((t) => /agent-cell/.test(t ?? '')),
      'document title shown',
    );

    // Try one operation from the page: the request goes to the cell and succeeds. A small answer (the cell's
    // keys): the page highlights what it shows, and the whole document took it 6 s.
    const op = page
      .locator('.opblock-get', { has: page.locator('.opblock-summary-path[data-path="/.well-known/cell-keys.json"]') })
      .first();
    await op.locator('.opblock-summary').first().click();
    await op.getByRole('button', { name: 'Try it out' }).click();
    await op.getByRole('button', { name: 'Execute' }).click();
    await op.locator('.live-responses-table tr.response .response-col_status').first().waitFor({ timeout: 120_000 });
    const status = (await op.locator('.live-responses-table tr.response .response-col_status').first().textContent())?.trim();
    assert.equal(status, '200', 'the tried operation answered 200');
    assert.ok(requested.includes(`${origin}/api/public/v1/openapi.json`), 'the page fetched the document');
    assert.ok(requested.includes(`${origin}/.well-known/cell-keys.json`), 'the tried request went to the cell');

    mkdirSync(ARTIFACTS, { recursive: true });
    await op.locator('.opblock-summary').first().click();
    await page.evaluate(() => {
      (document.activeElement as HTMLElement | null)?.blur();
      window.scrollTo(0, 0);
    });
    await page.screenshot({ path: join(ARTIFACTS, 'docs-page.png') });

    const foreign = requested.filter((u) => !u.startsWith('data:') && new URL(u).origin !== origin);
    assert.deepEqual(foreign, [], "no request left the cell's origin");
    assert.ok(requested.some((u) => u.endsWith('/docs/assets/swagger-ui-bundle.js')));
    const csp = problems.filter((p) => /Content Security Policy|Refused to/i.test(p));
    assert.deepEqual(csp, [], 'no CSP violation');
    assert.deepEqual(problems, [], 'no console error');
  } finally {
    await context.close();
    await cell.stop();
    cell.cleanup();
    rmSync(profile, { recursive: true, force: true });
  }
});
