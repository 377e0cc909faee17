// The new things of round 3 in the console (issue 43 §5), in Debian's chromium against the real cell process
// and the reference SDK's MCP server as a catalog source:
//
// - the Catalog view lists the source, how the cell presents itself to it and its pinned tools; a server
//   that changes a definition is reviewed with the diff at its JSON Pointer, a run calling it meanwhile is
//   refused and "Why it failed" names the tool and both hashes; the operator pins the live definition;
// - a run's tool calls: the tool, its seat, the identity its server saw, its arguments and result, each
//   checked against the hash its signed record names;
// - both views pass axe at 1280 and 390 px in both themes, with a right-to-left override in the source's
//   description, and no page is wider than the screen.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { startMcpServer, type McpFixture } from '../fixtures/mcp-server.ts';
import { startOpenAIServer, type FakeOpenAI } from '../fixtures/openai-server.ts';
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

test('the catalog: sources, pins, a drifted definition reviewed and re-pinned; a run’s tool calls with their identity', {
  timeout: 600_000,
  skip: existsSync(CHROMIUM) ? false : `${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)`,
}, async () => {
  const mcp: McpFixture = await startMcpServer();
  const ai: FakeOpenAI = await startOpenAIServer({
    apiKey: 'sk-fake',
    respond: (req) =>
      req.messages.at(-1)?.role === 'tool' ? { content: 'found' } : { tool_calls: [{ name: 'mcp__crm__lookup', arguments: { id: '42' } }] },
  });
  const db = await testStore();
  const cell: CellProcess = await startCellProcess({
    args: ['--cell-id', 'cell-catalog', '--egress-allow-private', '127.0.0.1/32', ...(db.url ? ['--store', db.url] : [])],
  });
  let browser: Browser | null = null;
  const watch: Watch = { requested: [], problems: [] };
  try {
    const api = apiOf(cell);
    await fakeProvider(api, ai.url, { max_retries: 0 });
    const source = await ok(api, 'POST', `${A}/catalog/sources`, {
      name: 'crm',
      url: mcp.url,
      description: hostile('customers', 200),
      definition_max_age_ms: 0,
    });
    const pinned = source.tools.find((t: { tool: string }) => t.tool === 'lookup').pin as string;
    const cap = { allowed_tools: ['mcp.crm.lookup'], permission_mode: 'auto', clearance_level: 0, egress_allowlist: [mcp.origin] };
    const f = await ok(api, 'POST', `${T}/formations`, { name: 'lookups', coordination_policy: 'sequential' });
    const b = await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
      role_label: 'clerk',
      required_skills: [],
      authority_cap: cap,
    });
    const a = await ok(api, 'POST', `${T}/agents`, { source: 'scratch', role_label: 'clerk', authority_template: cap });
    await ok(api, 'POST', `${T}/agents/${a.agent_id}/budget-ledger`, { budget_limit: 100_000 });
    const crew = (await ok(api, 'POST', `${T}/crews`, { formation_id: f.formation_id, assignments: { [b.billet_id]: a.agent_id } }))
      .crew_id;
    const ended = (id: string) =>
      until(`run ${id} to end`, async () => {
        const r = (await api('GET', `${A}/jobs/runs/${id}`)).body;
        return ['completed', 'failed', 'refused'].includes(r.state) ? r : null;
      });
    const done = (await ok(api, 'POST', `${T}/crews/${crew}/runs`, { input: 'find 42' })).run_id as string;
    assert.equal((await ended(done)).state, 'completed');
    assert.equal(mcp.calls.length, 1);
    // The server changes what it says the tool does: a run is refused before its call leaves.
    mcp.setDescription('lookup', 'Look up a customer by id, and email them.');
    const refused = (await ok(api, 'POST', `${T}/crews/${crew}/runs`, { input: 'find 42 again' }).catch(() => null))?.run_id as string;
    const r2 = await ended(refused);
    assert.equal(r2.error.reason, 'tool_definition_changed');
    assert.equal(mcp.calls.length, 1, 'the refused call never left');

    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS, timeout: 30_000 });
    const ctx = await newContext(browser, new URL(cell.url).origin, watch);
    const page = await ctx.newPage();
    await pasteKey(page, cell.url, cell.adminKey);

    // ------------------------------------------------------------ a run's tool calls: tool, seat, identity, arguments, result
    await goTo(page, `#/runs/${done}`, '#tool-calls .tool-call');
    const call = page.locator('#tool-calls .tool-call').first();
    assert.equal(await call.locator('.tool-name').first().textContent(), 'mcp.crm.lookup');
    // Its seat, by role, once the crew's graph is drawn.
    await call.filter({ hasText: 'seat clerk' }).waitFor();
    assert.equal(await call.locator('.tool-identity').getAttribute('data-kind'), 'none');
    assert.match((await call.locator('.tool-identity').textContent()) ?? '', /no credential/);
    await call.locator('button', { hasText: 'Show arguments' }).click();
    await call.locator('.value .ok-text', { hasText: 'arguments (matches the hash in the signed record)' }).waitFor();
    assert.deepEqual(JSON.parse((await call.locator('.value pre.json').first().textContent()) ?? 'null'), {
      tool: 'mcp.crm.lookup',
      args: { id: '42' },
    });
    await call.locator('button', { hasText: 'Show result' }).click();
    await call.locator('.value .ok-text', { hasText: 'result (matches the hash in the signed record)' }).waitFor();
    assert.equal(await call.locator('.value').count(), 2);
    await page.locator('#journal-verdict[data-verdict="ok"]').waitFor({ timeout: 30_000 });
    const problems = await judgeLooks(page, 'run with tool calls');

    // ------------------------------------------------------------ the refused run: why, with the tool and both hashes
    await goTo(page, `#/runs/${refused}`, '#failure[data-kind="policy"]');
    assert.equal(await page.locator('#failure-reason').textContent(), 'tool_definition_changed');
    assert.equal(await page.locator('.failure-fact[data-fact="Tool"]').textContent(), 'mcp.crm.lookup');
    assert.equal(await page.locator('.failure-fact[data-fact="Pinned definition"]').textContent(), pinned);
    assert.match((await page.locator('.failure-fact[data-fact="Live definition"]').textContent()) ?? '', /^sha256:[0-9a-f]{64}$/);

    // ------------------------------------------------------------ the catalog: the source, its pins, the review with the diff, a re-pin
    await goTo(page, '#/catalog', 'article.source[data-source="crm"]');
    const card = page.locator('article.source[data-source="crm"]');
    assert.match((await card.locator('.source-auth').textContent()) ?? '', /no credential/);
    assert.equal(await card.locator('table.pins tr[data-tool="mcp.crm.lookup"] code.hash').getAttribute('title'), pinned);
    problems.push(...(await judgeLooks(page, 'catalog')));
    await card.locator('button.review-button').click();
    const lookup = card.locator('.reviewed li[data-tool="lookup"]');
    await lookup.waitFor();
    assert.equal(await lookup.getAttribute('data-status'), 'changed');
    assert.equal(await lookup.locator('table.diff th code').textContent(), '/description');
    assert.equal(await lookup.locator('td.diff-pinned code').textContent(), JSON.stringify('Look up a customer by id.'));
    assert.equal(await lookup.locator('td.diff-live code').textContent(), JSON.stringify('Look up a customer by id, and email them.'));
    assert.equal(await card.locator('.reviewed li[data-tool="note"]').getAttribute('data-status'), 'pinned');
    problems.push(...(await judgeLooks(page, 'catalog review')));
    await lookup.locator('button.repin').click();
    await card.locator('.reviewed li[data-tool="lookup"][data-status="pinned"]').waitFor();
    const repinned = (await ok(api, 'GET', `${A}/catalog/sources/${source.source_id}`)).tools.find(
      (t: { tool: string }) => t.tool === 'lookup',
    );
    assert.notEqual(repinned.pin, pinned, 'pinned to the live definition');
    assert.deepEqual(problems, [], 'axe and the layout in every look');

    // A key that may read the catalog but not change it sees the review, no re-pin.
    const ro = (await ok(api, 'POST', `${A}/api-keys`, { name: 'catalog-reader', scopes: ['catalog.read'] })).secret as string;
    const roPage = await ctx.newPage();
    await pasteKey(roPage, cell.url, ro);
    mcp.setDescription('lookup', 'Look up a customer by id, then forget it.');
    await goTo(roPage, '#/catalog', 'article.source[data-source="crm"]');
    await roPage.locator('article.source[data-source="crm"] button.review-button').click();
    await roPage.locator('.reviewed li[data-tool="lookup"][data-status="changed"]').waitFor();
    assert.equal(await roPage.locator('button.repin').count(), 0, 'no re-pin without catalog.sources.write');
    assert.deepEqual(watch.problems, [], 'no page error');
  } finally {
    await browser?.close();
    await cell.stop();
    cell.cleanup();
    await db.drop();
    await ai.close();
    await mcp.close();
  }
});
