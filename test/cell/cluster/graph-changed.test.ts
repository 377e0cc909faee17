/**
 * Takeover of a crew run whose formation changed meanwhile, with two
 * in-process cells on one PostgreSQL store: the peer refuses it
 * (`graph_changed`, on the run, its journal and the audit trail) instead of
 * stranding or adapting it. Skipped on the embedded engine (one cell per store).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startOpenAIServer } from '../../fixtures/openai-server.ts';
import { TEST_ENGINE } from '../../helpers/inproc.ts';
import { twoCells } from './_two-cells.ts';
import { A, ok, provider, roleOf, team, T, type Api } from '../../helpers/teams.ts';

test('a peer refuses to take over a run whose formation changed: graph_changed, on the run and the audit trail', {
  skip: TEST_ENGINE !== 'postgres',
}, async () => {
  let release!: () => void;
  const held = new Promise<void>((r) => {
    release = r;
  });
  let inFlight!: () => void;
  const asked = new Promise<void>((r) => {
    inFlight = r;
  });
  const ai = await startOpenAIServer({
    apiKey: 'sk-fake',
    respond: async (req) => {
      if (roleOf(req) === 'c2') {
        inFlight();
        await held;
      }
      return { content: 'ok' };
    },
  });
  const { a, b, close } = await twoCells();
  try {
    const api: Api = { request: a.request, token: a.adminKey };
    await provider(api, ai);
    const tm = await team(api, 'sequential', [{ role: 'c1' }, { role: 'c2' }]);
    const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' });
    await asked;
    const apiB: Api = { request: b.request, token: a.adminKey };
    // A new formation version would not touch the run (it pinned its own); a change of an agent it binds does.
    // Changed before the coordinator stops: a peer sweeps the moment a lease lapses (docs/multi-cell.md).
    await ok(apiB, 'PATCH', `${T}/agents/${tm.agents['c1']}`, { system_prompt: 'ROLE:c1, now different' });
    // The coordinator stops (its drive is left for recovery); its lease lapses at once.
    await a.running.stop();
    release();
    await b.modules.cluster.cluster.tick();
    const deadline = Date.now() + 10_000;
    let s: any;
    do {
      s = await ok(apiB, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
      if (s.state === 'refused') break;
      await new Promise((r) => setTimeout(r, 50));
    } while (Date.now() < deadline);
    assert.equal(s.state, 'refused', JSON.stringify(s));
    assert.equal(s.error.reason, 'graph_changed');
    const journal = await ok(apiB, 'GET', `${A}/jobs/runs/${run.run_id}/journal`);
    const refusal = journal.records.find((r: { kind: string }) => r.kind === 'refusal');
    assert.equal(refusal.data.reason, 'graph_changed');
    assert.equal(refusal.data.why, 'takeover');
    assert.equal(refusal.cell_id, 'cell-b');
    const audit = await ok(apiB, 'GET', `${A}/audit?limit=50`);
    const entry = audit.entries.find((e: { action: string; target: string }) => e.action === 'crew.run.resume' && e.target === run.run_id);
    assert.ok(entry, 'the refusal is on the audit trail');
    assert.equal(entry.outcome, 'refused');
    assert.equal(entry.details.reason, 'graph_changed');
    assert.equal(entry.details.expected_graph_hash, journal.records[0].graph_hash);
    assert.equal(ai.requests.filter((r) => roleOf(r.body) === 'c1').length, 1, 'nothing ran again');
  } finally {
    release();
    await close();
    await ai.close();
  }
});
