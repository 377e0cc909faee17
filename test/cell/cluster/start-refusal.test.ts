/**
 * A crew run refused at its start is never driven, even when the cell that
 * refused it stops before the refusal reaches the journal (issue 21). The
 * refusal (an archived agent: `agent_inactive`; no budget ledger:
 * `no_budget_ledger`; a placement no live cell meets: `placement_unmet`) is
 * decided before the run is recorded and recorded with it (`flags.refusal`,
 * in the creating transaction); its `refusal` and `run_finished` records
 * follow the commit. Here every journal write of the refusing cell fails as
 * if the store were unreachable (a test-only wrapper of its store), so the
 * request is answered 409 with the run queued and no record; the cell then
 * stops (its opening retry with it). Whoever picks the run up ends it
 * `refused` with the same reason and writes its two records, and never
 * claims it: lease epoch 0, no `run_started` or `taken_over`, no model call.
 * - the same cell restarted (both engines);
 * - a peer's takeover sweep (PostgreSQL), the placement refusal included
 *   though the peer does not meet that placement either;
 * - and, the store back while the refusing cell lives, its own opening retry
 *   (both engines): `run_requested`, `refusal`, `run_finished`, each once.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { JournalRecord } from '../../../core/journal/record.ts';
import { verifyJournal } from '../../../core/journal/verify.ts';
import { ServiceError } from '../../../core/errors.ts';
import type { CellConfig } from '../../../cell/config.ts';
import type { Clock } from '../../../cell/context.ts';
import { startCell, type RunningCell } from '../../../cell/server.ts';
import type { Store, Tx } from '../../../cell/store/types.ts';
import { startOpenAIServer, type FakeOpenAI } from '../../fixtures/openai-server.ts';
import { inProcessCell, TEST_ENGINE, type InProcess } from '../../helpers/inproc.ts';
import { A, ok, provider, team, T, type Api } from '../../helpers/teams.ts';
import { GROUP, until } from './_two-cells.ts';

const quietLog = { info() {}, warn() {}, error() {} };

/**
 * Makes every write of `store` that touches the journal table fail as a lost connection would (the
 * runs module then retries it in the background), while `on`. Writes that do not touch it commit.
 */
function failJournalWrites(store: Store): { on: boolean } {
  const fault = { on: true };
  const write = store.write.bind(store);
  const outage = () =>
    new ServiceError('service_unavailable', 'the store is unreachable (test)', { details: { reason: 'connection_lost' } });
  const guard = (sql: string) => {
    if (fault.on && /\bjournal\b/.test(sql)) throw outage();
  };
  store.write = <T>(fn: (tx: Tx) => Promise<T>, opts?: Parameters<Store['write']>[1]) =>
    write(
      (tx) =>
        fn({
          run: async (sql, params) => {
            guard(sql);
            return tx.run(sql, params);
          },
          get: async (sql, params) => {
            guard(sql);
            return tx.get(sql, params);
          },
          all: async (sql, params) => {
            guard(sql);
            return tx.all(sql, params);
          },
          afterCommit: (effect) => tx.afterCommit(effect),
        }),
      opts,
    );
  return fault;
}

/** A crew run start answered 409 `reason`, with the run it recorded: queued, its refusal in its flags, no journal yet. */
async function refusedStart(t: InProcess, crewId: string, reason: string): Promise<string> {
  const r = await t.request('POST', `${T}/crews/${crewId}/runs`, { token: t.adminKey, body: { input: 'x' } });
  assert.equal(r.status, 409, r.text);
  assert.equal(r.body.details.reason, reason);
  const runId = r.body.details.run_id as string;
  const row = await t.row('SELECT state, flags FROM runs WHERE run_id = ?', [runId]);
  assert.equal(row?.['state'], 'queued', 'recorded, its opening not written');
  assert.equal(JSON.parse(String(row?.['flags'])).refusal.reason, reason, 'the refusal is recorded with the run');
  assert.equal((await t.row('SELECT COUNT(*) AS n FROM journal WHERE run_id = ?', [runId]))?.['n'], 0);
  return runId;
}

/** Asserts the run ended refused with `reason` and was never driven: two records that verify, lease never claimed. */
async function endedUndriven(api: Api, t: { row: InProcess['row'] }, runId: string, reason: string): Promise<void> {
  const s = await until(`run ${runId} to end`, async () => {
    const r = await ok(api, 'GET', `${A}/jobs/runs/${runId}`);
    return r.state === 'queued' ? null : r;
  });
  assert.equal(s.state, 'refused', JSON.stringify(s));
  assert.equal(s.error.code, 'refused');
  assert.equal(s.error.reason, reason);
  const j = await ok(api, 'GET', `${A}/jobs/runs/${runId}/journal?limit=1000`);
  const records = j.records as JournalRecord[];
  assert.deepEqual(
    records.map((r) => r.kind),
    ['refusal', 'run_finished'],
    'ended as its start decided, nothing driven',
  );
  assert.equal(records[0]!.data?.['reason'], reason);
  assert.equal(records[1]!.data?.['outcome'], 'refused');
  const pub = await api.request('GET', '/.well-known/cell-keys.json');
  const keys = new Map((pub.body.keys as { kid: string; jwk: JsonWebKey }[]).map((k) => [k.kid, k.jwk]));
  assert.deepEqual(await verifyJournal(records, (kid) => keys.get(kid)), { ok: true });
  const row = await t.row('SELECT lease_epoch FROM runs WHERE run_id = ?', [runId]);
  assert.equal(Number(row?.['lease_epoch']), 0, 'never claimed by a driver');
}

test('a restarted cell ends a run it refused at its start but never journaled: refused, never driven', async () => {
  const ai: FakeOpenAI = await startOpenAIServer({ apiKey: 'sk-fake' });
  const t = await inProcessCell({ config: { cellId: 'cell-r' } });
  let again: RunningCell | undefined;
  try {
    const api: Api = { request: t.request, token: t.adminKey };
    await provider(api, ai);
    const retired = await team(api, 'sequential', [{ role: 'retired' }]);
    const arch = await t.request('POST', `${A}/principals/${retired.agents['retired']}/archive`, { token: t.adminKey });
    assert.ok(arch.status < 300, arch.text);
    const broke = await team(api, 'sequential', [{ role: 'broke', ledger: null }]);

    const fault = failJournalWrites(t.core.store);
    const inactive = await refusedStart(t, retired.crew, 'agent_inactive');
    const noLedger = await refusedStart(t, broke.crew, 'no_budget_ledger');
    // The cell goes away before the store takes the refusals (its opening retries stop with it).
    await t.running.stop();
    fault.on = false;

    const config: Partial<CellConfig> = { ...t.core.config };
    again = await startCell({ config, clock: t.clock as Clock, listen: false, log: quietLog });
    const restarted = again;
    const req: InProcess['request'] = async (method, path, o = {}) => {
      const headers: Record<string, string> = { authorization: `Bearer ${o.token ?? t.adminKey}` };
      const body = o.body !== undefined ? JSON.stringify(o.body) : undefined;
      if (body) headers['content-type'] = 'application/json';
      const res = await restarted.app.request(path, { method, headers, ...(body ? { body } : {}) }, {
        incoming: { socket: { remoteAddress: '127.0.0.1' } },
      } as never);
      const text = await res.text();
      return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined, text };
    };
    const api2: Api = { request: req, token: t.adminKey };
    const rows = { row: (sql: string, p?: readonly (string | number)[]) => restarted.core.store.get(sql, p) };
    await endedUndriven(api2, rows, inactive, 'agent_inactive');
    await endedUndriven(api2, rows, noLedger, 'no_budget_ledger');
    assert.equal(ai.requests.length, 0, 'no model was asked');
  } finally {
    await again?.stop();
    await t.close();
    await ai.close();
  }
});

test("a peer's takeover sweep ends the runs a stopped cell refused at their start: refused, never driven", {
  skip: TEST_ENGINE !== 'postgres' ? 'needs PostgreSQL (CELL_TEST_STORE=postgres)' : false,
}, async () => {
  const ai: FakeOpenAI = await startOpenAIServer({ apiKey: 'sk-fake' });
  // Neither cell meets clearance 3: the placement refusal stays one when the peer picks the run up.
  const a = await inProcessCell({ config: { cellId: 'cell-a', clearance: 0, ...GROUP } });
  let b: InProcess | undefined;
  try {
    b = await inProcessCell({
      clock: a.clock,
      config: { cellId: 'cell-b', clearance: 0, storeUrl: a.core.config.storeUrl!, dataDir: a.dir, ...GROUP },
    });
    const api: Api = { request: a.request, token: a.adminKey };
    await provider(api, ai);
    const retired = await team(api, 'sequential', [{ role: 'retired2' }]);
    const arch = await a.request('POST', `${A}/principals/${retired.agents['retired2']}/archive`, { token: a.adminKey });
    assert.ok(arch.status < 300, arch.text);
    const cap = { allowed_tools: ['calc'], permission_mode: 'auto', clearance_level: 3, egress_allowlist: [], data_grant_ids: [] };
    const placed = await team(api, 'sequential', [{ role: 'cleared', cap }]);

    const fault = failJournalWrites(a.core.store);
    const inactive = await refusedStart(a, retired.crew, 'agent_inactive');
    const unmet = await refusedStart(a, placed.crew, 'placement_unmet');
    await a.running.stop();
    fault.on = false;

    const apiB: Api = { request: b.request, token: a.adminKey };
    await endedUndriven(apiB, b, inactive, 'agent_inactive');
    await endedUndriven(apiB, b, unmet, 'placement_unmet');
    assert.equal(ai.requests.length, 0, 'no model was asked');
  } finally {
    await b?.close();
    await a.close();
    await ai.close();
  }
});

test('the refusing cell writes the refusal itself once the store is back: its opening, then refusal and end, once', async () => {
  const ai: FakeOpenAI = await startOpenAIServer({ apiKey: 'sk-fake' });
  const t = await inProcessCell();
  try {
    const api: Api = { request: t.request, token: t.adminKey };
    await provider(api, ai);
    const broke = await team(api, 'sequential', [{ role: 'broke2', ledger: null }]);
    const fault = failJournalWrites(t.core.store);
    const runId = await refusedStart(t, broke.crew, 'no_budget_ledger');
    fault.on = false;
    const s = await until('the refusal to be written', async () => {
      const r = await ok(api, 'GET', `${A}/jobs/runs/${runId}`);
      return r.state === 'queued' ? null : r;
    });
    assert.equal(s.state, 'refused');
    assert.equal(s.error.reason, 'no_budget_ledger');
    const j = await ok(api, 'GET', `${A}/jobs/runs/${runId}/journal?limit=1000`);
    assert.deepEqual(
      (j.records as JournalRecord[]).map((r) => r.kind),
      ['run_requested', 'refusal', 'run_finished'],
    );
    assert.equal(Number((await t.row('SELECT lease_epoch FROM runs WHERE run_id = ?', [runId]))?.['lease_epoch']), 0);
    assert.equal(ai.requests.length, 0);
  } finally {
    await t.close();
    await ai.close();
  }
});
