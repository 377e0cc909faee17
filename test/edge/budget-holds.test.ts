// Budgets a device holds (docs/edge.md "Budgets a device holds"): a crew bundle's `budgets` are held on
// the agents' ledgers for the device, so the cell cannot spend what a device may spend offline (nor can a
// second device); the device's journals are charged to the ledger once; an operator releases what is
// left once every bundle of the device has expired. One in-process cell, real HTTP routes, both engines.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { InProcess } from '../helpers/inproc.ts';
import type { FakeOpenAI } from '../fixtures/openai-server.ts';
import { A, T, crewFixture, ok, team, type Api } from '../helpers/teams.ts';
import { actor } from '../helpers/actors.ts';
import { generateEd25519, signerFromJwk } from '../../bundles/codec.ts';
import { openCrewBundle } from '../../bundles/crew-bundle.ts';
import type { Graph, ModelPort } from '../../core/engine/types.ts';
import { withConsumed } from '../../core/engine/budget.ts';
import { openJournalExport } from '../../bundles/journal-export.ts';
import { deviceRun, exportRun } from './_device-run.ts';

const SIGNED = { 'content-type': 'application/vnd.agent-cell.signed' };

let t: InProcess;
let ai: FakeOpenAI;
let api: Api;
before(async () => {
  ({ t, ai, api } = await crewFixture());
  ai.setResponder(() => ({ content: 'done', usage: { prompt_tokens: 10, completion_tokens: 5 } }));
});
after(async () => {
  await t.close();
  await ai.close();
});

/** A device the admin registered: its id, signer and the trust anchor it pins. */
async function device() {
  const k = await generateEd25519();
  const r = await ok(api, 'POST', `${A}/edge/devices`, { name: `dev-${k.kid.slice(0, 6)}`, public_jwk: k.publicJwk });
  return {
    id: k.kid,
    jwk: k.publicJwk,
    signer: signerFromJwk(k.kid, k.privateJwk),
    trust: r.trust.keys as { kid: string; jwk: JsonWebKey }[],
  };
}

/** A one-seat crew whose agent has a ledger of `limit` tokens. */
async function crew(limit: number) {
  const tm = await team(api, 'sequential', [{ role: 'field', ledger: limit }]);
  return { crewId: tm.crew, agentId: tm.agents['field']! };
}

const issue = (deviceId: string, crewId: string, extra: Record<string, unknown> = {}) =>
  t.request('POST', `${A}/edge/crew-bundles`, { token: t.adminKey, body: { device_id: deviceId, crew_id: crewId, ...extra } });

async function budgetsOf(text: string, trust: { kid: string; jwk: JsonWebKey }[]) {
  const opened = await openCrewBundle(text, trust);
  return opened.payload.crew;
}

const ledger = (agentId: string) => ok(api, 'GET', `${T}/agents/${agentId}/budget-ledger`);

async function runAtCell(crewId: string) {
  const run = await ok(api, 'POST', `${T}/crews/${crewId}/runs`, { input: 'inspect' });
  await t.modules.teams.teams.settled(run.run_id);
  return ok(api, 'GET', `${T}/crews/${crewId}/runs/${run.run_id}`);
}

test('issuing a crew bundle holds the budget it carries: the cell cannot spend it too', async () => {
  const c = await crew(1000);
  const d = await device();
  const r = await issue(d.id, c.crewId);
  assert.equal(r.status, 201, r.text);
  assert.deepEqual((await budgetsOf(r.text, d.trust)).budgets, { [c.agentId]: 1000 });
  const l = await ledger(c.agentId);
  assert.equal(l.held, 1000);
  assert.equal(l.available, 0);
  assert.equal(l.reserved, 0);
  const run = await runAtCell(c.crewId);
  assert.equal(run.state, 'refused', JSON.stringify(run));
  assert.equal(run.error.reason, 'budget_exceeded');
  const audit = await t.row("SELECT details FROM audit WHERE action = 'edge.crew_bundle.issue' AND target = ? AND outcome = 'ok'", [d.id]);
  assert.deepEqual(JSON.parse(String(audit!['details'])).held, { [c.agentId]: { granted: 1000, ceiling: 1000 } });
});

test('a share: the bundle carries it and the cell keeps the rest; a share beyond what is left holds nothing', async () => {
  const c = await crew(1000);
  const d = await device();
  const versions = async () => (await t.row("SELECT version FROM edge_bundle_versions WHERE type = 'crew'"))?.['version'];
  const v0 = await versions();
  const big = await issue(d.id, c.crewId, { budgets: { [c.agentId]: 2000 } });
  assert.equal(big.status, 409, big.text);
  assert.equal(big.body.details.reason, 'share_exceeds_budget');
  assert.deepEqual(
    { agent_id: big.body.details.agent_id, requested: big.body.details.requested, left: big.body.details.left },
    { agent_id: c.agentId, requested: 2000, left: 1000 },
  );
  assert.equal((await ledger(c.agentId)).held, 0, 'nothing held');
  assert.equal(await versions(), v0, 'no bundle version taken');
  assert.deepEqual(await t.rows('SELECT agent_id FROM team_ledger_holds WHERE device_id = ?', [d.id]), []);

  // An agent not of the crew, or one without a ledger: 400.
  const other = await crew(10);
  const stranger = await issue(d.id, c.crewId, { budgets: { [other.agentId]: 1 } });
  assert.equal(stranger.status, 400, stranger.text);
  assert.equal(stranger.body.details.reason, 'share_agent_unbudgeted');
  const noLedger = await team(api, 'sequential', [{ role: 'unfunded', ledger: null }]);
  const unfunded = await issue(d.id, noLedger.crew, { budgets: { [noLedger.agents['unfunded']!]: 1 } });
  assert.equal(unfunded.status, 400, unfunded.text);
  assert.equal(unfunded.body.details.reason, 'share_agent_unbudgeted');
  // Without a share, an agent without a ledger gets no entry, as before.
  const plain = await issue(d.id, noLedger.crew);
  assert.equal(plain.status, 201, plain.text);
  assert.deepEqual((await budgetsOf(plain.text, d.trust)).budgets, {});

  const r = await issue(d.id, c.crewId, { budgets: { [c.agentId]: 300 } });
  assert.equal(r.status, 201, r.text);
  assert.deepEqual((await budgetsOf(r.text, d.trust)).budgets, { [c.agentId]: 300 });
  const l = await ledger(c.agentId);
  assert.equal(l.held, 300);
  assert.equal(l.available, 700);
  const run = await runAtCell(c.crewId);
  assert.equal(run.state, 'completed', JSON.stringify(run));
  const spent = (await ledger(c.agentId)).spent as number;
  assert.ok(spent > 0 && spent <= 700, `the cell spent ${spent} of what it kept`);

  // A second device gets only what is left; the first, re-issued with nothing left, keeps its ceiling (never twice).
  const d2 = await device();
  const second = await issue(d2.id, c.crewId);
  assert.equal(second.status, 201, second.text);
  assert.deepEqual((await budgetsOf(second.text, d2.trust)).budgets, { [c.agentId]: 700 - spent });
  const again = await issue(d.id, c.crewId);
  assert.equal(again.status, 201, again.text);
  assert.deepEqual((await budgetsOf(again.text, d.trust)).budgets, { [c.agentId]: 300 });
  const after = await ledger(c.agentId);
  assert.equal(after.held, 1000 - spent);
  assert.equal(after.available, 0);
});

test("a device's journal is charged to the ledger once, out of what it holds; a fork's own calls only", async () => {
  const tm = await team(api, 'sequential', [
    { role: 'first', ledger: 1000 },
    { role: 'second', ledger: 1000 },
  ]);
  const [a1, a2] = [tm.agents['first']!, tm.agents['second']!];
  const d = await device();
  const r = await issue(d.id, tm.crew, { budgets: { [a1]: 400 } });
  assert.equal(r.status, 201, r.text);
  const carried = await budgetsOf(r.text, d.trust);
  assert.deepEqual(carried.budgets, { [a1]: 400, [a2]: 1000 });
  const run = await deviceRun(d.signer, carried.graph as Graph, carried.graph_hash);
  assert.equal(run.result.outcome, 'completed');
  const calls = (agent: string, records = run.records) =>
    records.filter((x) => x.kind === 'step' && x.step_id.includes('/model/') && x.data?.['agent_id'] === agent && !x.data['reused']).length;
  assert.equal(calls(a1), 1);
  assert.equal(calls(a2), 1);
  // The scripted model answers with 3 + 4 tokens a call.
  const text = await exportRun(d.signer, run, { crewId: tm.crew });
  const post = (body: string) => t.request('POST', `${A}/edge/journals`, { token: t.adminKey, rawBody: body, headers: SIGNED });
  const imported = await post(text);
  assert.equal(imported.status, 201, imported.text);
  const figures = async (agent: string) => {
    const l = await ledger(agent);
    return [l.spent, l.held, l.available];
  };
  assert.deepEqual(await figures(a1), [7, 393, 600]);
  assert.deepEqual(await figures(a2), [7, 993, 0]);
  const holds = await ok(api, 'GET', `${A}/edge/devices/${d.id}/budget-holds`);
  assert.deepEqual(
    holds.holds.map((h: any) => [h.agent_id, h.allotted, h.charged, h.released, h.outstanding]),
    [
      [a1, 400, 7, 0, 393],
      [a2, 1000, 7, 0, 993],
    ].sort((x, y) => (String(x[0]) < String(y[0]) ? -1 : 1)),
  );
  const audit = await t.row("SELECT details FROM audit WHERE action = 'edge.journal.import' AND outcome = 'ok' AND target = ?", [d.id]);
  assert.deepEqual(JSON.parse(String(audit!['details'])).charged, { [a1]: 7, [a2]: 7 });
  // The same export again charges nothing.
  assert.equal((await post(text)).status, 201);
  assert.deepEqual(await figures(a1), [7, 393, 600]);
  assert.deepEqual(await figures(a2), [7, 993, 0]);

  // A fork at the second seat's call reuses the first seat's (the parent's, charged already) and calls the second again.
  const at = run.records.find((x) => x.kind === 'step' && x.data?.['agent_id'] === a2)!.seq;
  const fork = await deviceRun(d.signer, carried.graph as Graph, carried.graph_hash, { fork: { parent: run, at } });
  assert.equal(fork.result.outcome, 'completed');
  assert.equal(calls(a1, fork.records), 0);
  assert.equal(calls(a2, fork.records), 1);
  assert.ok(
    fork.records.some((x) => x.data?.['agent_id'] === a1 && x.data['reused']),
    'the fork reuses the first seat',
  );
  const f = await post(await exportRun(d.signer, fork, { crewId: tm.crew }));
  assert.equal(f.status, 201, f.text);
  assert.deepEqual(await figures(a1), [7, 393, 600]);
  assert.deepEqual(await figures(a2), [14, 986, 0]);
});

test('a longer journal that extends a stored one is charged what the stored one was not', async () => {
  const tm = await team(api, 'sequential', [
    { role: 'first', ledger: 1000 },
    { role: 'second', ledger: 1000 },
  ]);
  const d = await device();
  const r = await issue(d.id, tm.crew);
  assert.equal(r.status, 201, r.text);
  const carried = await budgetsOf(r.text, d.trust);
  const spent = async () => [(await ledger(tm.agents['first']!)).spent, (await ledger(tm.agents['second']!)).spent];
  // Stored prefixes (an older edge exported the runs while they waited): the first seat's call is in them.
  const prefixOf = async (charged: number | null) => {
    const run = await deviceRun(d.signer, carried.graph as Graph, carried.graph_hash);
    const keep = run.records.findIndex((x) => x.data?.['agent_id'] === tm.agents['second']);
    const text = await exportRun(d.signer, run, { records: run.records.slice(0, keep), outcome: 'waiting', crewId: tm.crew });
    const opened = await openJournalExport(text, { kid: d.id, jwk: d.jwk }, 'cell-test');
    await t.core.store.write((tx) =>
      tx.run(
        'INSERT INTO edge_journals (run_id, device_id, crew_id, graph_hash, outcome, record_count, hash, export, imported_at, imported_by, charged_records) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
        [run.run.run_id, d.id, tm.crew, carried.graph_hash, 'waiting', keep, opened.hash, text, 1, 'prn_old', charged],
      ),
    );
    return run;
  };
  const post = async (run: Awaited<ReturnType<typeof prefixOf>>) => {
    const body = await exportRun(d.signer, run, { crewId: tm.crew });
    const res = await t.request('POST', `${A}/edge/journals`, { token: t.adminKey, rawBody: body, headers: SIGNED });
    assert.equal(res.status, 201, res.text);
  };
  // Stored by a release that charged its records: the longer journal is charged the second seat's call only.
  const charged = await prefixOf(null);
  await t.core.store.write((tx) =>
    tx.run('UPDATE edge_journals SET charged_records = record_count WHERE run_id = ?', [charged.run.run_id]),
  );
  await post(charged);
  assert.deepEqual(await spent(), [0, 7]);
  // Stored before imports charged (charged_records null): the longer journal is charged all of it.
  await post(await prefixOf(null));
  assert.deepEqual(await spent(), [7, 14]);
});

test('release: refused while a bundle of the device lives, then the ledger has it back; only for who may act on the device', async () => {
  const c = await crew(1000);
  const d = await device();
  const r = await issue(d.id, c.crewId, { ttl_seconds: 60, budgets: { [c.agentId]: 250 } });
  assert.equal(r.status, 201, r.text);
  const release = (token = t.adminKey) => t.request('POST', `${A}/edge/devices/${d.id}/budget-release`, { token });

  const early = await release();
  assert.equal(early.status, 409, early.text);
  assert.equal(early.body.details.reason, 'bundle_live');
  assert.equal(early.body.details.until, new Date(t.clock.now() + 60_000).toISOString());
  assert.equal((await ledger(c.agentId)).held, 250);

  // A caller with edge.write that does not manage the device's registrant (the admin).
  const ops = await actor(t, { name: 'hold-ops', permissions: ['edge.write', 'edge.read'] });
  t.clock.advance(60_000);
  const other = await release(ops.key);
  assert.equal(other.status, 403, other.text);
  assert.equal(other.body.details.reason, 'wider_than_caller');
  assert.equal((await ledger(c.agentId)).held, 250, 'a refused release gives nothing back');

  const done = await release();
  assert.equal(done.status, 200, done.text);
  assert.deepEqual(
    done.body.holds.map((h: any) => [h.agent_id, h.allotted, h.charged, h.released, h.outstanding]),
    [[c.agentId, 250, 0, 250, 0]],
  );
  const l = await ledger(c.agentId);
  assert.equal(l.held, 0);
  assert.equal(l.available, 1000);
  const audit = await t.row("SELECT actor, details FROM audit WHERE action = 'edge.budget.release' AND outcome = 'ok' AND target = ?", [
    d.id,
  ]);
  assert.deepEqual(JSON.parse(String(audit!['details'])), { released: { [c.agentId]: 250 } });
  // Released already: a second release gives nothing more.
  assert.equal((await release()).status, 200);
  assert.equal((await ledger(c.agentId)).held, 0);

  // The device's journal carried back after the release is charged all the same (beyond what is held: spent).
  const carried = await budgetsOf(r.text, d.trust);
  const run = await deviceRun(d.signer, carried.graph as Graph, carried.graph_hash);
  const imported = await t.request('POST', `${A}/edge/journals`, {
    token: t.adminKey,
    rawBody: await exportRun(d.signer, run, { crewId: c.crewId }),
    headers: SIGNED,
  });
  assert.equal(imported.status, 201, imported.text);
  assert.deepEqual([(await ledger(c.agentId)).spent, (await ledger(c.agentId)).held], [7, 0]);
  // Handed 50 more, the device may spend 250 + 50 - 250 released - 7 spent = 43: the ledger holds that, not 50.
  const more = await issue(d.id, c.crewId, { ttl_seconds: 1, budgets: { [c.agentId]: 50 } });
  assert.equal(more.status, 201, more.text);
  assert.deepEqual((await budgetsOf(more.text, d.trust)).budgets, { [c.agentId]: 50 });
  assert.deepEqual([(await ledger(c.agentId)).held, (await ledger(c.agentId)).available], [43, 950]);
  t.clock.advance(1000);
  assert.equal((await release()).status, 200);
  assert.deepEqual([(await ledger(c.agentId)).held, (await ledger(c.agentId)).available], [0, 993]);
  // A deleted device's holds are released all the same; an unknown device is 404.
  await ok(api, 'DELETE', `${A}/edge/devices/${d.id}`);
  assert.equal((await release()).status, 200);
  const unknown = await t.request('POST', `${A}/edge/devices/${'A'.repeat(43)}/budget-release`, { token: t.adminKey });
  assert.equal(unknown.status, 404, unknown.text);
});

test("a device's journal is charged only out of what it was handed: another device's graph charges nothing, more than handed is refused", async () => {
  const c = await crew(1000);
  const [d1, d2, d3] = [await device(), await device(), await device()];
  const r = await issue(d1.id, c.crewId, { budgets: { [c.agentId]: 100 } });
  assert.equal(r.status, 201, r.text);
  const carried = await budgetsOf(r.text, d1.trust);
  const post = async (d: Awaited<ReturnType<typeof device>>) => {
    const run = await deviceRun(d.signer, carried.graph as Graph, carried.graph_hash);
    const body = await exportRun(d.signer, run, { crewId: c.crewId });
    return { run, res: await t.request('POST', `${A}/edge/journals`, { token: t.adminKey, rawBody: body, headers: SIGNED }) };
  };
  const figures = async () => {
    const l = await ledger(c.agentId);
    return [l.spent, l.held];
  };
  // d2 was never issued the graph: its journal is stored (as before), and charges nobody (d1's hold is d1's).
  const other = await post(d2);
  assert.equal(other.res.status, 201, other.res.text);
  assert.deepEqual(await figures(), [0, 100]);
  assert.deepEqual((await ok(api, 'GET', `${A}/edge/devices/${d2.id}/budget-holds`)).holds, []);
  // d1's own journal is charged out of its hold.
  assert.equal((await post(d1)).res.status, 201);
  assert.deepEqual(await figures(), [7, 93]);

  // d3 was handed 5 tokens: a journal that says it spent 7 is not believed; nothing of it is stored or charged.
  const five = await issue(d3.id, c.crewId, { budgets: { [c.agentId]: 5 } });
  assert.equal(five.status, 201, five.text);
  const over = await post(d3);
  assert.equal(over.res.status, 403, over.res.text);
  assert.deepEqual(over.res.body.details, {
    reason: 'usage_beyond_allotment',
    run_id: over.run.run.run_id,
    agent_id: c.agentId,
    usage: 7,
    allotted: 5,
    charged: 0,
  });
  assert.deepEqual(await figures(), [7, 98]);
  const stored = await t.request('GET', `${A}/edge/journals?device_id=${d3.id}`, { token: t.adminKey });
  assert.equal(stored.body.total, 0, stored.text);
  const audit = await t.row("SELECT details FROM audit WHERE action = 'edge.journal.import' AND outcome = 'refused' AND target = ?", [
    d3.id,
  ]);
  assert.equal(JSON.parse(String(audit!['details'])).reason, 'usage_beyond_allotment');
});

test('a model call that failed on the device having consumed tokens is charged too (no retry policy)', async () => {
  const c = await crew(1000);
  const d = await device();
  const r = await issue(d.id, c.crewId, { budgets: { [c.agentId]: 100 } });
  assert.equal(r.status, 201, r.text);
  const carried = await budgetsOf(r.text, d.trust);
  // The device's model failed after it consumed 20 + 6 tokens (the device counted them against its ceiling).
  const failing: ModelPort = {
    async complete() {
      throw withConsumed(Object.assign(new Error('the local model stopped'), { reason: 'provider_error' }), {
        input_tokens: 20,
        output_tokens: 6,
      });
    },
  };
  const run = await deviceRun(d.signer, carried.graph as Graph, carried.graph_hash, { model: failing });
  assert.equal(run.result.outcome, 'failed');
  const body = await exportRun(d.signer, run, { crewId: c.crewId });
  const res = await t.request('POST', `${A}/edge/journals`, { token: t.adminKey, rawBody: body, headers: SIGNED });
  assert.equal(res.status, 201, res.text);
  const l = await ledger(c.agentId);
  assert.deepEqual([l.spent, l.held], [26, 74], 'the failed call is charged out of the hold, not given back on release');
});
