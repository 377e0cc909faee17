/**
 * Exactly-once effects of MCP tool calls across a crash, with real processes: the real cell
 * (dist/cell.mjs) calls the tools of a real MCP server, the reference SDK's over Streamable HTTP in this
 * process (test/fixtures/mcp-server.ts, `effects`), whose tools apply one effect per effect key
 * (`_meta["dev.agent-cell/effect-key"]`) and hold their answers, so the cell is SIGKILLed between the
 * dispatch of each call and its result. After the restart (same cell, same data; or, on PostgreSQL, a
 * peer of the group taking the run over):
 * - `set_limit`, declared `idempotentHint: true`, is issued again with the same key: the server sees the
 *   key twice in `_meta` and counts one effect, and the run completes;
 * - `refund`, not declared idempotent, is not issued again: the run waits `outcome_unknown` showing the
 *   key the server saw; an operator's `retry` sends the same key (one effect), `record` completes the run
 *   with the given result (nothing sent), `fail` fails it. A crew's call (through the crew port, resolved
 *   on the crew's route) takes the same path as a `single` job's.
 * The journal proves the crash path (test/e2e/_runs.ts `assertLostInTheCrash`), as for http.request
 * (test/e2e/effects-crash.test.ts). Needs `node scripts/build.mjs` first.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startCellProcess, type CellProcess } from '../helpers/cell-process.ts';
import { startGroup, type Group } from '../helpers/group.ts';
import { pgUnavailable } from '../helpers/postgres.ts';
import { TEST_ENGINE } from '../helpers/inproc.ts';
import { SOURCES } from '../helpers/mcp.ts';
import { A, T, ok, provider, team, type Api } from '../helpers/teams.ts';
import { startMcpServer, type McpFixture } from '../fixtures/mcp-server.ts';
import { startOpenAIServer, type ChatRequestBody, type FakeOpenAI } from '../fixtures/openai-server.ts';
import {
  assertLostInTheCrash,
  crewRunEnded,
  httpApi,
  jobRunEnded,
  resolveOutcome,
  runView,
  until,
  verifiedJournal,
  waitingOnOutcome,
} from './_runs.ts';

const RUNS = `${A}/jobs/runs`;
const ARGS = ['--egress-allow-private', '127.0.0.1/32'];

/** Registers the server as the source `pay`; its calls may wait for as long as the test holds them. */
const register = (api: Api, mcp: McpFixture) => ok(api, 'POST', SOURCES, { name: 'pay', url: mcp.url, timeout_ms: 600_000 }, [201]);

/** A `single` job calling `mcp.pay.<tool>`, with egress that lets a side-effecting call act. */
const call = (api: Api, mcp: McpFixture, tool: string, args: Record<string, unknown>) =>
  ok(api, 'POST', RUNS, {
    job_type: 'single',
    workspace_id: 'w1',
    spec: { tool: `mcp.pay.${tool}`, args, authority: { egress_allowlist: [`POST:${mcp.origin}`] } },
  }).then((r) => r.run_id as string);

/** Waits until the server holds one call of each `[tool, id]` (dispatched, not answered). */
const dispatched = (mcp: McpFixture, calls: [string, string][]) =>
  until(
    'every call to reach the server',
    async () => (calls.every(([t, id]) => mcp.keysOf(t, id).length === 1) ? true : undefined),
    30_000,
  );

const effectsOf = (mcp: McpFixture, tool: string, id: string) =>
  [...mcp.effects.values()].filter((e) => e.tool === tool && e.args['id'] === id).length;

/** A model that asks for one refund, then answers with what the tool said. */
function refundingModel(ai: FakeOpenAI, id: string): void {
  ai.setResponder((req: ChatRequestBody) =>
    req.messages.at(-1)!.role === 'tool'
      ? { content: `done: ${req.messages.at(-1)!.content}` }
      : { tool_calls: [{ name: 'mcp__pay__refund', arguments: { id, amount: 7 } }] },
  );
}

/** A crew whose one seat may call the refund tool without asking, with egress that lets it act. */
const refundCrew = (api: Api, mcp: McpFixture) =>
  team(api, 'sequential', [
    { role: 'clerk', cap: { allowed_tools: ['mcp.pay.refund'], permission_mode: 'auto', egress_allowlist: [`POST:${mcp.origin}`] } },
  ]);

describe('SIGKILL between dispatch and result of an MCP tool call; the same cell restarted', { timeout: 300_000 }, () => {
  let mcp: McpFixture;
  let ai: FakeOpenAI;
  const procs: CellProcess[] = [];
  before(async () => {
    mcp = await startMcpServer({ effects: true });
    ai = await startOpenAIServer({ apiKey: 'sk-fake' });
  });
  after(async () => {
    for (const p of procs) await p.kill().catch(() => undefined);
    procs[0]?.cleanup();
    await mcp.close();
    await ai.close();
  });

  test('idempotent: re-issued with its key (one effect); not idempotent: waits outcome_unknown, then retried, recorded or failed', async () => {
    const args = ['--cell-id', 'cell-mcp-fx', ...ARGS];
    const a = await startCellProcess({ args, timeoutMs: 60_000 });
    procs.push(a);
    const apiA = httpApi(a.url, a.adminKey);
    await register(apiA, mcp);
    await provider(apiA, ai);
    refundingModel(ai, 'crew-1');
    const tm = await refundCrew(apiA, mcp);

    mcp.hold();
    const ids = {
      limit: await call(apiA, mcp, 'set_limit', { id: 'limit', limit: 500 }),
      retry: await call(apiA, mcp, 'refund', { id: 'retry', amount: 10 }),
      record: await call(apiA, mcp, 'refund', { id: 'record', amount: 20 }),
      fail: await call(apiA, mcp, 'refund', { id: 'fail', amount: 30 }),
    };
    const crewRun = (await ok(apiA, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'refund order crew-1' })).run_id as string;
    await dispatched(mcp, [
      ['set_limit', 'limit'],
      ['refund', 'retry'],
      ['refund', 'record'],
      ['refund', 'fail'],
      ['refund', 'crew-1'],
    ]);
    await a.kill('SIGKILL');
    mcp.release();

    const b = await startCellProcess({ dataDir: a.dataDir, args, timeoutMs: 60_000 });
    procs.push(b);
    const api = httpApi(b.url, a.adminKey);

    // (a) Declared idempotent: issued again with the same key in _meta; the server counts one effect.
    const limit = await jobRunEnded(api, ids.limit);
    assert.equal(limit.state, 'completed', JSON.stringify(limit.error));
    const limitKeys = mcp.keysOf('set_limit', 'limit');
    assert.equal(limitKeys.length, 2, 'sent twice');
    assert.equal(limitKeys[0], limitKeys[1], 'with the same effect key');
    assert.match(limitKeys[0]!, /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(effectsOf(mcp, 'set_limit', 'limit'), 1, 'one effect');
    assert.equal(limit.flags.reissued.length, 1);
    assert.deepEqual(limit.output.content, [{ type: 'text', text: 'set_limit applied for limit' }]);

    // (b) Not idempotent: not sent again; each run waits with the key the server saw.
    const waits: Record<string, any> = {};
    for (const [id, runId] of [
      ['retry', ids.retry],
      ['record', ids.record],
      ['fail', ids.fail],
      ['crew-1', crewRun],
    ] as const) {
      const v = await waitingOnOutcome(api, runId);
      const seen = mcp.keysOf('refund', id);
      assert.equal(seen.length, 1, `${id}: not issued blindly again`);
      assert.equal(v.unknown_outcome.effect_key, seen[0], `${id}: the view shows the key the server saw in _meta`);
      assert.equal(v.unknown_outcome.tool, 'mcp.pay.refund');
      assert.equal(v.unknown_outcome.attempt, 1);
      await assertLostInTheCrash(api, b.url, runId, v.unknown_outcome.effect_key);
      waits[id] = v.unknown_outcome;
    }
    assert.equal(waits['crew-1'].seat, tm.billets['clerk'], "the crew's call names its seat");

    // retry: the same key again; the server applies it once.
    await resolveOutcome(api, ids.retry, waits['retry'].step_id, { resolution: 'retry' });
    const r1 = await jobRunEnded(api, ids.retry);
    assert.equal(r1.state, 'completed', JSON.stringify(r1.error));
    assert.deepEqual(r1.output.content, [{ type: 'text', text: 'refund applied for retry' }]);
    assert.deepEqual(mcp.keysOf('refund', 'retry'), [waits['retry'].effect_key, waits['retry'].effect_key]);
    assert.equal(effectsOf(mcp, 'refund', 'retry'), 1, 'one effect');

    // record: completes with the operator's result; nothing is sent.
    const found = { content: [{ type: 'text', text: 'found in the ledger' }] };
    await resolveOutcome(api, ids.record, waits['record'].step_id, { resolution: 'record', result: found });
    const r2 = await jobRunEnded(api, ids.record);
    assert.equal(r2.state, 'completed');
    assert.deepEqual(r2.output, found);
    assert.equal(mcp.keysOf('refund', 'record').length, 1);

    // fail: the run fails; nothing is sent.
    await resolveOutcome(api, ids.fail, waits['fail'].step_id, { resolution: 'fail' });
    const r3 = await jobRunEnded(api, ids.fail);
    assert.equal(r3.state, 'failed');
    assert.equal(r3.error.reason, 'outcome_unknown');
    assert.equal(mcp.keysOf('refund', 'fail').length, 1);

    // The crew's call, retried on the crew's route: the same key through the crew port; the model finishes.
    await ok(api, 'POST', `${T}/crews/${tm.crew}/runs/${crewRun}/outcomes/${encodeURIComponent(waits['crew-1'].step_id)}`, {
      resolution: 'retry',
    });
    const c1 = await crewRunEnded(api, tm.crew, crewRun);
    assert.equal(c1.state, 'completed', JSON.stringify(c1.error));
    assert.match(c1.output, /refund applied for crew-1/);
    assert.deepEqual(mcp.keysOf('refund', 'crew-1'), [waits['crew-1'].effect_key, waits['crew-1'].effect_key]);
    assert.equal(effectsOf(mcp, 'refund', 'crew-1'), 1, 'one effect');

    for (const id of [...Object.values(ids), crewRun]) assert.deepEqual((await verifiedJournal(api, b.url, id)).verdict, { ok: true });
    await b.stop();
  });
});

describe('SIGKILL mid-call in a group: a peer takes the run over, waits with the same key, and retries it', {
  skip: TEST_ENGINE !== 'postgres' ? 'PostgreSQL only (CELL_TEST_STORE=postgres)' : (pgUnavailable() ?? false),
  timeout: 240_000,
}, () => {
  let mcp: McpFixture;
  let g: Group;
  before(async () => {
    mcp = await startMcpServer({ effects: true });
    g = await startGroup(2, { args: () => [...ARGS, '--heartbeat-ms', '200', '--lease-ms', '1500'] });
  });
  after(async () => {
    await g?.stop();
    await mcp?.close();
  });

  test('the peer re-issues the idempotent call with its key and shows the key of the other; its retry sends it again; one effect each', async () => {
    const [a, b] = g.cells as [CellProcess, CellProcess];
    const apiA = httpApi(a.url, g.adminKey);
    await register(apiA, mcp);
    mcp.hold();
    const limit = await call(apiA, mcp, 'set_limit', { id: 'g-limit', limit: 1 });
    const refund = await call(apiA, mcp, 'refund', { id: 'g-refund', amount: 1 });
    await dispatched(mcp, [
      ['set_limit', 'g-limit'],
      ['refund', 'g-refund'],
    ]);
    await a.kill('SIGKILL');
    mcp.release();
    const api = httpApi(b.url, g.adminKey);

    const l = await jobRunEnded(api, limit);
    assert.equal(l.state, 'completed', JSON.stringify(l.error));
    const lk = mcp.keysOf('set_limit', 'g-limit');
    assert.equal(lk.length, 2);
    assert.equal(lk[0], lk[1], 'the same key from the other cell');
    assert.equal(effectsOf(mcp, 'set_limit', 'g-limit'), 1);

    const v = await waitingOnOutcome(api, refund);
    const first = mcp.keysOf('refund', 'g-refund');
    assert.equal(first.length, 1, 'the peer did not send it again');
    assert.equal(v.unknown_outcome.effect_key, first[0]);
    await assertLostInTheCrash(api, b.url, refund, v.unknown_outcome.effect_key);
    const { records } = await verifiedJournal(api, b.url, refund);
    assert.ok(
      records.some((r) => r.kind === 'taken_over' && r.data?.['previous_owner'] !== r.data?.['cell_id']),
      'taken over by the peer',
    );
    await resolveOutcome(api, refund, v.unknown_outcome.step_id, { resolution: 'retry' });
    const done = await jobRunEnded(api, refund);
    assert.equal(done.state, 'completed', JSON.stringify(done.error));
    assert.deepEqual(mcp.keysOf('refund', 'g-refund'), [first[0], first[0]], 'the same key from the other cell');
    assert.equal(effectsOf(mcp, 'refund', 'g-refund'), 1);
    assert.equal((await runView(api, refund)).unknown_outcome, null);
  });
});
