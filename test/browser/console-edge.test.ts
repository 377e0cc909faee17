// An edge run carried back shows at the cell like any run (issue 39 §4), in a real browser (Debian's chromium
// driven by playwright-core) against the real cell process: a device registered, a crew with a tool grant
// carried to it in a crew bundle, a run of it on the device's side (core's engine, the device's tool catalog
// edge/tools.ts, a scripted model, an approval step decided on the device by an approver its key bundle
// carries, the journal signed by the device key), the export imported; then the console's Edge devices view
// lists the device, its page the budget it holds (a release refused while its bundle lives; another device's,
// expired, released from its page) and the run, and the run's page its journal verified with the device's key,
// its tool calls (their arguments and results checked against the signed hashes) and the approval decided there.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { openCrewBundle } from '../../bundles/crew-bundle.ts';
import { generateEd25519, signerFromJwk } from '../../bundles/codec.ts';
import type { Graph, ModelPort } from '../../core/engine/types.ts';
import { deviceToolsPort } from '../../edge/tools.ts';
import { startCellProcess, type CellProcess } from '../helpers/cell-process.ts';
import { approvedRun, exportRun } from '../edge/_device-run.ts';
import { testDevice } from '../edge/_edge-fixtures.ts';
import { A, ARGS, CHROMIUM, T, apiOf, axe, goTo, newContext, ok, pasteKey, type Watch } from './helpers.ts';

/** Calls kv.put on its first round when offered it, then answers. */
const recorder: ModelPort = {
  async complete(req) {
    if (!req.messages.some((m) => m.role === 'tool') && req.tools.some((t) => t.name === 'kv.put'))
      return {
        content: '',
        tool_calls: [{ id: 'call_0', name: 'kv.put', arguments: { key: 'pump-7', value: 'seal leaking' } }],
        usage: { input_tokens: 3, output_tokens: 4 },
      };
    return { content: 'recorded', usage: { input_tokens: 3, output_tokens: 4 } };
  },
};

test('the console shows an imported edge run and its tool calls, reached from the device page', {
  timeout: 120_000,
  skip: existsSync(CHROMIUM) ? false : `${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)`,
}, async () => {
  const cell: CellProcess = await startCellProcess({ args: ['--cell-id', 'cell-edge-console'] });
  const dir = mkdtempSync(join(tmpdir(), 'console-edge-'));
  let browser: Browser | null = null;
  const watch: Watch = { requested: [], problems: [] };
  try {
    const api = apiOf(cell);
    const key = await generateEd25519();
    const dev = await ok(api, 'POST', `${A}/edge/devices`, { name: 'pump house', public_jwk: key.publicJwk });
    const cap = { allowed_tools: ['kv.put'], egress_allowlist: ['kv:*'], permission_mode: 'auto', clearance_level: 0 };
    // An approver the device's key bundle carries, and the bundle (its version names it in each decision).
    await ok(api, 'POST', `${A}/roles`, { name: 'field-approver', permissions: ['agent_teams.approve', 'agent_teams.read'] });
    const lead = await ok(api, 'POST', `${A}/principals`, { kind: 'service', name: 'team-lead', roles: ['field-approver'] });
    const kb = await fetch(`${cell.url}${A}/edge/key-bundles`, {
      method: 'POST',
      headers: { authorization: `Bearer ${cell.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ device_id: dev.device_id }),
    });
    assert.equal(kb.status, 201);
    const bundleVersion = Number(kb.headers.get('x-bundle-version'));
    const f = await ok(api, 'POST', `${T}/formations`, {
      name: 'field-recorder',
      pre: [{ kind: 'human_approval', config: { rule: 'quorum', quorum: 1, approvers: [lead.id], timeout_ms: 3_600_000 } }],
    });
    const b = await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
      role_label: 'recorder',
      required_skills: [],
      authority_cap: cap,
    });
    const a = await ok(api, 'POST', `${T}/agents`, { source: 'scratch', role_label: 'recorder', authority_template: cap });
    const crew = await ok(api, 'POST', `${T}/crews`, { formation_id: f.formation_id, assignments: { [b.billet_id]: a.agent_id } });
    // The agent's ledger: a second device is handed 100 of it in a bundle that lives 1 s (released on its page
    // below, once expired); the first device holds the rest while its bundle lives (its release is refused).
    await ok(api, 'POST', `${T}/agents/${a.agent_id}/budget-ledger`, { budget_limit: 1000 });
    const key2 = await generateEd25519();
    const dev2 = await ok(api, 'POST', `${A}/edge/devices`, { name: 'pump shed', public_jwk: key2.publicJwk });
    const short = await fetch(`${cell.url}${A}/edge/crew-bundles`, {
      method: 'POST',
      headers: { authorization: `Bearer ${cell.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ device_id: dev2.device_id, crew_id: crew.crew_id, ttl_seconds: 1, budgets: { [a.agent_id]: 100 } }),
    });
    assert.equal(short.status, 201, await short.text());
    const bundle = await fetch(`${cell.url}${A}/edge/crew-bundles`, {
      method: 'POST',
      headers: { authorization: `Bearer ${cell.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ device_id: dev.device_id, crew_id: crew.crew_id }),
    });
    assert.equal(bundle.status, 201);
    const c = (await openCrewBundle(await bundle.text(), dev.trust.keys)).payload.crew;
    const signer = signerFromJwk(key.kid, key.privateJwk);
    // Held by its approval, decided on the device by the lead, then the seat records its finding.
    const run = await approvedRun(signer, c.graph as Graph, c.graph_hash, 'prn_device_user', [lead.id], bundleVersion, {
      model: recorder,
      tools: deviceToolsPort(dir, await testDevice(), { now: () => 1_767_225_600_000 }, c.workspace_id ?? null),
    });
    assert.equal(run.result.outcome, 'completed', JSON.stringify(run.result));
    const imported = await fetch(`${cell.url}${A}/edge/journals`, {
      method: 'POST',
      headers: { authorization: `Bearer ${cell.adminKey}`, 'content-type': 'application/vnd.agent-cell.signed' },
      body: await exportRun(signer, run, { crewId: crew.crew_id, audience: 'cell-edge-console' }),
    });
    assert.equal(imported.status, 201, await imported.text());
    const runId = run.run.run_id;
    const listed = await ok(api, 'GET', `${A}/edge/journals?device_id=${encodeURIComponent(dev.device_id)}`);
    assert.deepEqual(
      listed.journals.map((j: { run_id: string }) => j.run_id),
      [runId],
    );

    browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
    const ctx = await newContext(browser, new URL(cell.url).origin, watch);
    const page = await ctx.newPage();
    await pasteKey(page, cell.url, cell.adminKey);
    await page.locator('#nav-devices').click();
    const row = page.locator(`#devices-list li[data-device="${dev.device_id}"]`);
    await row.waitFor();
    assert.match((await row.textContent()) ?? '', /pump house/);
    await axe(page, 'edge devices');
    await row.locator('a').click();
    const journalRow = page.locator(`#device-journals tr[data-run="${runId}"]`);
    await journalRow.waitFor();
    assert.match((await journalRow.textContent()) ?? '', /completed/);
    // What the device holds: the 900 tokens its bundle handed, less its run's two calls (7 tokens each) charged on import.
    const hold = page.locator(`#device-holds tr[data-agent="${a.agent_id}"]`);
    await hold.waitFor();
    assert.deepEqual((await hold.locator('td').allTextContents()).slice(0, 4), ['900', '14', '0', '886']);
    // Its bundle lives: the release is refused, and says why.
    await page.locator('#holds-release').click();
    await page.locator('#holds-release-confirm').click();
    await page.locator('#holds-release-error').waitFor();
    assert.match((await page.locator('#holds-release-error').textContent()) ?? '', /bundle_live/);
    await axe(page, 'edge device');
    await journalRow.locator('a').click();
    await page.locator('#edge-run-verdict .ok-text').waitFor();
    assert.match((await page.locator('#edge-run-verdict').textContent()) ?? '', /records verify with the device's registered key/);
    const call = page.locator('#tool-calls li.tool-call[data-tool="kv.put"]');
    await call.waitFor();
    assert.equal(await call.count(), 1);
    const text = (await call.textContent()) ?? '';
    assert.match(text, /seat recorder/, 'the seat of the call, from the graph the bundle carried');
    const rec = run.records.find((r) => r.kind === 'step' && r.data?.['tool'] === 'kv.put')!;
    assert.match(text, new RegExp(`record #${rec.seq}`));
    assert.match(text, /Effect key/);
    await call.getByRole('button', { name: 'Show arguments' }).click();
    await call.locator('.value .ok-text').first().waitFor();
    assert.match((await call.locator('.value').first().textContent()) ?? '', /pump-7[\s\S]*seal leaking/);
    // The approval the lead gave on the device, with the run.
    const decisions = page.locator('ul.decisions[aria-label="Decisions taken on the device"] li');
    assert.equal(await decisions.count(), 1);
    assert.match((await decisions.textContent()) ?? '', /team-lead[\s\S]*approved[\s\S]*pre:0/);
    await axe(page, 'edge run');
    // The second device's bundle has expired (waited for, should the machine be that fast): its release gives
    // the 100 tokens back, and the page says so.
    const until = Date.parse((await ok(api, 'GET', `${A}/edge/devices/${encodeURIComponent(dev2.device_id)}/budget-holds`)).holds[0].until);
    await new Promise((r) => setTimeout(r, Math.max(0, until - Date.now() + 200)));
    await goTo(page, `#/devices/${encodeURIComponent(dev2.device_id)}`);
    const hold2 = page.locator(`#device-holds tr[data-agent="${a.agent_id}"]`);
    await hold2.waitFor();
    assert.equal(await hold2.locator('td.outstanding').textContent(), '100');
    await page.locator('#holds-release').click();
    await page.locator('#holds-release-confirm').click();
    await page.locator(`#device-holds tr[data-agent="${a.agent_id}"] td.outstanding:text-is("0")`).waitFor();
    assert.deepEqual((await hold2.locator('td').allTextContents()).slice(0, 4), ['100', '0', '100', '0']);
    assert.equal(await page.locator('#holds-release').count(), 0, 'nothing left to release');
    const ledger = await ok(api, 'GET', `${T}/agents/${a.agent_id}/budget-ledger`);
    assert.deepEqual([ledger.held, ledger.spent], [886, 14]);
    // A run id the cell never imported is a 404, said as such.
    await goTo(page, '#/edge-runs/run_00000000000000000000');
    await page.locator('[role="alert"]').first().waitFor();
    assert.deepEqual(watch.problems, []);
  } finally {
    await browser?.close();
    rmSync(dir, { recursive: true, force: true });
    await cell.stop();
  }
});
