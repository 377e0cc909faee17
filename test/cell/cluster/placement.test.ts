/**
 * Placement across the cells of a group (two or three in-process cells on one
 * PostgreSQL store): a run needing clearance 3 posted to a clearance-0 cell is
 * executed by the clearance-3 peer; with that peer gone it shows
 * `flags.unplaceable` (and new launches are 409 placement_unmet); when a
 * qualifying cell comes back it claims the run and finishes it. Skipped on
 * the embedded engine.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startOpenAIServer } from '../../fixtures/openai-server.ts';
import { inProcessCell, TEST_ENGINE, type InProcess } from '../../helpers/inproc.ts';
import { until } from './_two-cells.ts';
import { A, ok, provider, roleOf, team, T, type Api } from '../../helpers/teams.ts';

test('clearance 3 on a clearance-0 cell runs on the qualifying peer; unplaceable while no qualifying cell lives; resumes when one comes back', {
  skip: TEST_ENGINE !== 'postgres',
}, async () => {
  let release!: () => void;
  const held = new Promise<void>((r) => {
    release = r;
  });
  let asked!: () => void;
  const u1Asked = new Promise<void>((r) => {
    asked = r;
  });
  let u1 = 0;
  const ai = await startOpenAIServer({
    apiKey: 'sk-fake',
    respond: async (req) => {
      if (roleOf(req) === 'u1' && u1++ === 0) {
        asked();
        await held;
      }
      return { content: `done by ${roleOf(req)}` };
    },
  });
  const group = { posture: 'multi-cell' as const, heartbeatMs: 100, leaseMs: 1000 };
  const a = await inProcessCell({ config: { cellId: 'cell-a', clearance: 0, ...group } });
  const cells: InProcess[] = [];
  const peer = (id: string) =>
    inProcessCell({ clock: a.clock, config: { cellId: id, clearance: 3, storeUrl: a.core.config.storeUrl!, dataDir: a.dir, ...group } });
  try {
    const b = await peer('cell-b');
    cells.push(b);
    const api: Api = { request: a.request, token: a.adminKey };
    await provider(api, ai);
    const cap = {
      allowed_tools: ['calc'],
      permission_mode: 'auto',
      clearance_level: 3,
      egress_allowlist: [],
      data_grant_ids: [],
    };
    const placed = await team(api, 'sequential', [{ role: 'p1', cap }]);
    const r1 = await ok(api, 'POST', `${T}/crews/${placed.crew}/runs`, { input: 'x' });
    const done = await until('the peer to run it', async () => {
      const s = await ok(api, 'GET', `${T}/crews/${placed.crew}/runs/${r1.run_id}`);
      return s.state === 'completed' ? s : null;
    });
    assert.equal(done.coordinator, 'cell-b', 'executed by the qualifying peer');
    const j1 = await ok(api, 'GET', `${A}/jobs/runs/${r1.run_id}/journal`);
    assert.ok(j1.records.some((r: { kind: string }) => r.kind === 'placed'));

    // The only qualifying cell goes away while it runs a run.
    const later = await team(api, 'sequential', [{ role: 'u1', cap }]);
    const r2 = await ok(api, 'POST', `${T}/crews/${later.crew}/runs`, { input: 'y' });
    await u1Asked;
    await b.running.stop();
    const stuck = await until('the run to be marked unplaceable', async () => {
      const s = await ok(api, 'GET', `${T}/crews/${later.crew}/runs/${r2.run_id}`);
      return s.flags.unplaceable ? s : null;
    });
    assert.equal(stuck.flags.unplaceable.needs.clearance, 3);
    assert.notEqual(stuck.state, 'completed');
    const refused = await a.request('POST', `${T}/crews/${later.crew}/runs`, { token: a.adminKey, body: { input: 'z' } });
    assert.equal(refused.status, 409, refused.text);
    assert.equal(refused.body.details.reason, 'placement_unmet');

    // A qualifying cell comes back: it claims the run and finishes it.
    release();
    const c = await peer('cell-c');
    cells.push(c);
    const finished = await until('a qualifying cell to finish it', async () => {
      const s = await ok(api, 'GET', `${T}/crews/${later.crew}/runs/${r2.run_id}`);
      return s.state === 'completed' ? s : null;
    });
    assert.equal(finished.coordinator, 'cell-c');
    assert.equal(finished.flags.unplaceable, undefined, 'no longer unplaceable');
  } finally {
    release();
    for (const c of cells.reverse()) await c.close();
    await a.close();
    await ai.close();
  }
});
