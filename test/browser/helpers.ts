// Shared by the console's browser tests: Debian's chromium driven by
// playwright-core, API calls to the real cell process, the sign-in pop-up,
// axe-core, and screenshots (test/artifacts/, at 1280 and 390 px wide; with
// CONSOLE_DOC_IMAGES=1 also the small PNGs of docs/images/ that docs/console.md shows).
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { CellProcess } from '../helpers/cell-process.ts';

export const CHROMIUM = '/usr/bin/chromium';
export const ARTIFACTS = resolve(import.meta.dirname, '../artifacts');
export const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
export const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
export const A = '/api/public/v1/admin';
export const T = `${A}/agent-teams`;

export type Api = (method: string, path: string, body?: unknown, token?: string) => Promise<{ status: number; body: any }>;

export function apiOf(cell: CellProcess): Api {
  return async (method, path, body, token = cell.adminKey) => {
    const r = await fetch(cell.url + path, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await r.text();
    return { status: r.status, body: text ? JSON.parse(text) : undefined };
  };
}

export async function ok(api: Api, method: string, path: string, body?: unknown): Promise<any> {
  const r = await api(method, path, body);
  assert.ok(r.status >= 200 && r.status < 300, `${method} ${path} -> ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

export { until } from '../helpers/until.ts';

/** Registers the fake OpenAI-compatible server at `baseUrl` (its key `sk-fake`) as the cell's model provider. */
export async function fakeProvider(api: Api, baseUrl: string, opts: { max_retries: number; stream?: boolean }): Promise<void> {
  const secret = await ok(api, 'POST', `${A}/secrets`, { name: 'fake-openai', value: 'sk-fake' });
  await ok(api, 'POST', `${A}/ai/model-providers`, {
    provider_type: 'openai-compatible',
    default_model: 'fake-model',
    base_url: `${baseUrl}/v1`,
    api_key_secret_id: secret.secret_id,
    ...opts,
  });
}

/** A crew: one seat per role, each agent with a ledger; `pre` stages before the team. */
export async function crew(api: Api, name: string, roles: string[], pre: unknown[] = []): Promise<{ formation: string; crew: string }> {
  const f = await ok(api, 'POST', `${T}/formations`, { name, coordination_policy: 'sequential', ...(pre.length ? { pre } : {}) });
  const assignments: Record<string, string> = {};
  for (const role of roles) {
    const b = await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
      role_label: role,
      required_skills: [],
      authority_cap: { allowed_tools: [], permission_mode: 'auto', clearance_level: 0, budget_ceiling: 5000 },
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
  const c = await ok(api, 'POST', `${T}/crews`, { formation_id: f.formation_id, assignments, name: `${name} crew` });
  return { formation: f.formation_id, crew: c.crew_id };
}

export interface Watch {
  requested: string[];
  problems: string[];
}

export async function newContext(browser: Browser, origin: string, watch: Watch): Promise<BrowserContext> {
  const ctx = await browser.newContext({ viewport: { width: 1366, height: 900 } });
  ctx.on('request', (r) => {
    watch.requested.push(r.url());
  });
  // Anything not from the cell is refused outright, so "works with no network" is what is tested.
  await ctx.route(
    (url) => url.origin !== origin && url.protocol !== 'data:' && url.href !== 'about:blank',
    (route) => route.abort('blockedbyclient'),
  );
  ctx.on('page', (p) => {
    p.on('pageerror', (e) => {
      watch.problems.push(`pageerror ${String(e)}`);
    });
    p.on('console', (m) => {
      // A fetch answered 4xx is logged by chromium as "Failed to load resource"; the console expects some (403, 404).
      if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) watch.problems.push(`console ${m.text()}`);
    });
  });
  return ctx;
}

/** Opens the console and signs in by pasting an API key. */
export async function pasteKey(page: Page, url: string, key: string): Promise<void> {
  await page.goto(`${url}/console`);
  await page.locator('#api-key').fill(key);
  await page.locator('#use-key').click();
  await page.locator('#whoami').waitFor();
}

/** Signs in through the code flow: the pop-up's login and consent pages, then back to the console. */
export async function signIn(ctx: BrowserContext, url: string, user: string, password: string, existing?: Page): Promise<Page> {
  const page = existing ?? (await ctx.newPage());
  if (!existing) await page.goto(`${url}/console`);
  await page.locator('#sign-in').waitFor();
  const [popup] = await Promise.all([ctx.waitForEvent('page'), page.locator('#sign-in').click()]);
  // The authorization server's login session (an HttpOnly cookie on /oauth) may still be open: consent only.
  await popup.locator('#username, #approve').first().waitFor();
  if (await popup.locator('#username').count()) {
    await popup.locator('#username').fill(user);
    await popup.locator('#password').fill(password);
    await popup.locator('#login').click();
  }
  await popup.locator('#approve').waitFor();
  assert.equal(await popup.locator('#who').textContent(), user);
  assert.equal(await popup.locator('#client').textContent(), 'agent-cell console');
  await Promise.all([popup.waitForEvent('close', { timeout: 30_000 }), popup.locator('#approve').click()]);
  await page.locator('#whoami').waitFor({ timeout: 30_000 });
  return page;
}

export async function axe(page: Page, where: string): Promise<void> {
  if (!(await page.evaluate(() => typeof (window as unknown as { axe?: unknown }).axe !== 'undefined'))) await page.evaluate(AXE_SOURCE);
  const r = await page.evaluate(async () => {
    const res = await (
      window as unknown as {
        axe: {
          run(
            ctx: Document,
            o: unknown,
          ): Promise<{ violations: { id: string; impact: string; help: string; nodes: { target: string[] }[] }[] }>;
        };
      }
    ).axe.run(document, { resultTypes: ['violations'] });
    return res.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      targets: v.nodes.slice(0, 3).map((n) => n.target.join(' ')),
    }));
  });
  assert.deepEqual(r, [], `${where}: axe-core found violations`);
}

export async function shot(page: Page, name: string, fullPage = true): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.evaluate(() => {
    (document.activeElement as HTMLElement | null)?.blur();
    window.scrollTo(0, 0);
  });
  await page.screenshot({ path: join(ARTIFACTS, name), fullPage });
}

export const DOCS_IMAGES = resolve(import.meta.dirname, '../../docs/images');

/**
 * The view as it is now, at 1280 px and at 390 px wide (test/artifacts/<name>-1280.png
 * and -390.png), then back to the page's size; with CONSOLE_DOC_IMAGES=1 the
 * 1280 px one, cut at 800 px high, also lands in docs/images/<name>.png.
 */
export async function shots(page: Page, name: string): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const size = page.viewportSize() ?? { width: 1366, height: 900 };
  await page.evaluate(() => {
    (document.activeElement as HTMLElement | null)?.blur();
    window.scrollTo(0, 0);
  });
  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: width === 390 ? 844 : 800 });
    await page.waitForTimeout(50);
    await page.screenshot({ path: join(ARTIFACTS, `${name}-${width}.png`), fullPage: true });
    if (width === 1280 && process.env['CONSOLE_DOC_IMAGES'] === '1') {
      await page.screenshot({ path: join(DOCS_IMAGES, `${name}.png`), fullPage: false });
    }
  }
  await page.setViewportSize(size);
}

/** Goes to a view by its fragment (no reload: the session lives in the page) and waits for `ready`. */
export async function goTo(page: Page, hash: string, ready?: string): Promise<void> {
  await page.evaluate((h) => {
    window.location.hash = h;
  }, hash);
  if (ready) await page.locator(ready).first().waitFor({ timeout: 30_000 });
}

/** A name of `n` characters (at most) with a right-to-left override and a long unbreakable run: it must break no view. */
export function hostile(tag: string, n: number): string {
  const s = `${tag} \u202Edetalosi ton ${'w'.repeat(n)}`;
  return s.slice(0, n);
}

/** What a view must hold whatever the theme and width: no page wider than the screen, and (once) bidi isolation. */
export interface ViewProblems {
  where: string;
  problems: string[];
}

/**
 * The layout problems of the page now: a page wider than the screen (its widest elements named), and
 * every right-to-left override (U+202E) whose text is not isolated: its element neither a `<bdi>` nor of
 * `unicode-bidi` isolate (or plaintext), and not wrapped in U+2068 … U+2069 in the text itself.
 */
export async function layoutProblems(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const out: string[] = [];
    const doc = document.documentElement;
    if (doc.scrollWidth > doc.clientWidth + 1) {
      // The outermost elements past the edge: their parent is not (the ones that widen the page). (No named
      // function in here: the test's transpiler would wrap it in a helper the page does not have.)
      const edge = doc.clientWidth + 1;
      const wide = Array.from(document.querySelectorAll('body *'))
        .filter(
          (e) =>
            e.getBoundingClientRect().right > edge &&
            !(e.parentElement && e.parentElement.getBoundingClientRect().right > edge) &&
            getComputedStyle(e).position !== 'absolute',
        )
        .slice(0, 3)
        .map(
          (e) =>
            `${e.tagName.toLowerCase()}${e.id ? `#${e.id}` : ''}.${Array.from(e.classList).join('.')} (${Math.round(e.getBoundingClientRect().right)} px)`,
        );
      out.push(`page ${doc.scrollWidth} px wide on a ${doc.clientWidth} px screen: ${wide.join(', ')}`);
    }
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const text = n.nodeValue ?? '';
      if (!text.includes('\u202E')) continue;
      const el = n.parentElement!;
      const bidi = getComputedStyle(el).unicodeBidi;
      const wrapped = /\u2068[^\u2069]*\u202E[^\u2069]*\u2069/.test(text);
      if (!wrapped && !['isolate', 'isolate-override', 'plaintext'].includes(bidi)) {
        out.push(
          `not isolated: <${el.tagName.toLowerCase()} class="${el.className}"> ${JSON.stringify(text.slice(0, 40))} (unicode-bidi ${bidi})`,
        );
      }
    }
    return out;
  });
}

/** The four looks every view is judged in. */
export const LOOKS = [
  { width: 1280, height: 800, scheme: 'light' },
  { width: 1280, height: 800, scheme: 'dark' },
  { width: 390, height: 844, scheme: 'light' },
  { width: 390, height: 844, scheme: 'dark' },
] as const;

/** axe (no violation) and the layout (no problem) of the page as it is now, in each look; back to 1366 px light after. */
export async function judgeLooks(page: Page, where: string, ready?: () => Promise<void>): Promise<string[]> {
  const out: string[] = [];
  for (const l of LOOKS) {
    await page.setViewportSize({ width: l.width, height: l.height });
    await page.emulateMedia({ colorScheme: l.scheme });
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    await ready?.();
    const at = `${where} @${l.width} ${l.scheme}`;
    try {
      await axe(page, at);
    } catch (e) {
      out.push(
        String((e as Error).message)
          .split('\n')
          .slice(0, 12)
          .join(' '),
      );
    }
    for (const p of await layoutProblems(page)) out.push(`${at}: ${p}`);
    if (process.env['CONSOLE_SHOTS'] === '1')
      await page.screenshot({ path: join(ARTIFACTS, `${where.replace(/\W+/g, '-')}-${l.width}-${l.scheme}.png`), fullPage: true });
  }
  await page.setViewportSize({ width: 1366, height: 900 });
  await page.emulateMedia({ colorScheme: 'light' });
  return out;
}
