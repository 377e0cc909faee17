// Effects of imported tools (cell/tools/mcp/call.ts, core/catalog/pin.ts): `idempotentHint` (on a tool not
// read-only) makes an imported tool idempotent in the catalog, as pinned; a side-effecting call carries its
// effect key in `_meta["dev.agent-cell/effect-key"]`; and a call that was sent and got no answer (the
// server held it past the source's timeout) has an unknown outcome: a tool not declared idempotent waits
// `outcome_unknown` with the key the server saw, and an operator's `retry` sends that key again (the server
// applies it once); a declared-idempotent one fails retryable (`tool_unreachable`), as any unanswered call.
// The server is the reference SDK's, over Streamable HTTP (test/fixtures/mcp-server.ts, `effects`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jobEnded, mcpCell, SOURCES as S } from '../../helpers/mcp.ts';
import { until } from '../../helpers/until.ts';
import { A, ok } from '../../helpers/teams.ts';
import { EFFECT_KEY_META } from '../../fixtures/mcp-server.ts';

const RUNS = `${A}/jobs/runs`;

test('idempotentHint makes a side-effecting imported tool idempotent, in its pinned definition and in the catalog', {
  timeout: 120_000,
}, async () => {
  const { t, mcp, api, close } = await mcpCell({ server: { effects: true } });
  try {
    const src = await ok(api, 'POST', S, { name: 'pay', url: mcp.url }, [201]);
    const flags = Object.fromEntries(
      src.tools.map((x: { name: string; side_effects: boolean; idempotent: boolean; definition: { annotations?: unknown } }) => [
        x.name,
        [x.side_effects, x.idempotent],
      ]),
    );
    assert.deepEqual(flags, {
      'mcp.pay.lookup': [false, false],
      'mcp.pay.note': [true, false],
      'mcp.pay.refund': [true, false],
      'mcp.pay.set_limit': [true, true],
    });
    const setLimit = src.tools.find((x: { name: string }) => x.name === 'mcp.pay.set_limit');
    assert.deepEqual(
      setLimit.definition.annotations,
      { readOnlyHint: false, idempotentHint: true },
      'the hint is in the pinned definition',
    );
    const registry = await ok(api, 'GET', `${A}/ai/tool-registry?limit=1000`);
    const entry = (name: string) => registry.tools.find((x: { name: string }) => x.name === name);
    assert.equal(entry('mcp.pay.set_limit').idempotent, true);
    assert.equal(entry('mcp.pay.refund').idempotent, false);
    // The engine's descriptor: what the crash rule reads.
    assert.equal(t.modules.tools.tools.describe('mcp.pay.set_limit')?.idempotent, true);
    assert.equal(t.modules.tools.tools.describe('mcp.pay.refund')?.idempotent, undefined);
  } finally {
    await close();
  }
});

test('a call sent and not answered: not idempotent, it waits outcome_unknown and a retry sends the same key; idempotent, it fails retryable', {
  timeout: 120_000,
}, async () => {
  const { mcp, api, close } = await mcpCell({ server: { effects: true } });
  try {
    await ok(api, 'POST', S, { name: 'pay', url: mcp.url, timeout_ms: 1000 }, [201]);
    const call = (tool: string, args: Record<string, unknown>) =>
      ok(api, 'POST', RUNS, {
        job_type: 'single',
        workspace_id: 'w',
        spec: { tool: `mcp.pay.${tool}`, args, authority: { egress_allowlist: [`POST:${mcp.origin}`] } },
      });
    mcp.hold();
    const refund = (await call('refund', { id: 'o-1', amount: 5 })).run_id as string;
    const limit = (await call('set_limit', { id: 'c-1', limit: 100 })).run_id as string;
    // The server got the refund and kept its answer past the source's timeout: whether it acted is unknown.
    const v = await until(`run ${refund} to wait outcome_unknown`, async () => {
      const x = await ok(api, 'GET', `${RUNS}/${refund}`);
      return x.state === 'outcome_unknown' ? x : undefined;
    });
    const seen = mcp.keysOf('refund', 'o-1');
    assert.equal(seen.length, 1, 'not sent again');
    assert.equal(v.unknown_outcome.effect_key, seen[0], 'the view shows the key the server saw in _meta');
    assert.equal(v.unknown_outcome.tool, 'mcp.pay.refund');
    const j = await ok(api, 'GET', `${RUNS}/${refund}/journal`);
    assert.equal(j.records.find((r: { kind: string }) => r.kind === 'intent').data.effect_key, seen[0], 'the key of the intent');
    // The idempotent tool's unanswered call is a plain failure (a retry policy may send it again, with its key).
    const l = await jobEnded(api, limit);
    assert.equal(l.state, 'failed');
    assert.equal(l.error.reason, 'tool_unreachable');
    assert.equal(mcp.keysOf('set_limit', 'c-1').length, 1);

    mcp.release();
    await ok(api, 'POST', `${RUNS}/${refund}/outcomes/${encodeURIComponent(v.unknown_outcome.step_id)}`, { resolution: 'retry' });
    const done = await jobEnded(api, refund);
    assert.equal(done.state, 'completed', JSON.stringify(done.error));
    assert.deepEqual(done.output.content, [{ type: 'text', text: 'refund applied for o-1' }]);
    const keys = mcp.keysOf('refund', 'o-1');
    assert.deepEqual(keys, [seen[0], seen[0]], 'the same key again');
    assert.equal([...mcp.effects.values()].filter((e) => e.tool === 'refund').length, 1, 'one effect');
  } finally {
    await close();
  }
});

test("the effect key in _meta is the cell's: a caller's _meta adds to it and cannot replace it", { timeout: 120_000 }, async () => {
  const { t, mcp, api, close } = await mcpCell({ server: { effects: true } });
  try {
    await ok(api, 'POST', S, { name: 'pay', url: mcp.url }, [201]);
    const caller = (effectKey?: string) => ({
      workspaceId: 'w',
      agentId: 'agt_test',
      authority: { egress_allowlist: [`POST:${mcp.origin}`], data_grant_ids: [], clearance_level: 0, compartments: [] },
      ...(effectKey !== undefined ? { effectKey } : {}),
    });
    const meta = { [EFFECT_KEY_META]: 'forged', 'com.example/trace': 't-1' };
    const tools = t.modules.tools.tools;
    await tools.run('mcp.pay.refund', caller('k-real'), { id: 'm-1', amount: 1 }, undefined, { meta });
    assert.deepEqual(mcp.calls.at(-1)!.meta, { [EFFECT_KEY_META]: 'k-real', 'com.example/trace': 't-1' });
    // A call without a key (none given by the engine) sends none: the caller's is dropped, not passed on.
    await tools.run('mcp.pay.refund', caller(), { id: 'm-2', amount: 1 }, undefined, { meta });
    assert.deepEqual(mcp.calls.at(-1)!.meta, { 'com.example/trace': 't-1' });
    assert.equal(mcp.effects.has('forged'), false);
  } finally {
    await close();
  }
});
