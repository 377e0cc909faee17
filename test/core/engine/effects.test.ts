// Effect keys and the crash rule (core/engine/effect-key.ts, internal/effects.ts): every side-effecting
// call carries one key on every issue; a call found in flight is re-issued with it when the tool declares
// it idempotent, and otherwise waits `outcome_unknown` until an operator retries it, records its result
// or fails the run. The journal is cut right after the call's intent, as a crash there leaves it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { runGraph } from '../../../core/engine/run.ts';
import { EFFECT_KEY_META, effectKey } from '../../../core/engine/effect-key.ts';
import { memoryJournal, type MemoryJournal } from '../../../core/journal/memory.ts';
import { signEd25519 } from '../../../core/crypto/ed25519.ts';
import { verifyJournal } from '../../../core/journal/verify.ts';
import type { EnginePorts, OutcomeResolution, ToolCallContext, ToolDescriptor } from '../../../core/engine/types.ts';
import type { JsonObject } from '../../../core/journal/record.ts';
import { graph, manualClock, OPTS, signedJournal } from './_harness.ts';

test('effect key: a UUID version 8 made by name from SHA-256 (RFC 9562 §5.8, Appendix B.2), the same for the same run and step', () => {
  const k = effectKey('run_0123456789abcdef0123', 'agent:a/tool/0.0');
  assert.match(k, /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  // Computed independently: node:crypto's SHA-256 of the name, its first 128 bits, version and variant set.
  const h = createHash('sha256').update('agent-cell effect key v1\nrun_0123456789abcdef0123\nagent:a/tool/0.0').digest();
  h[6] = (h[6]! & 0x0f) | 0x80;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  assert.equal(k, `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`);
  assert.equal(effectKey('run_0123456789abcdef0123', 'agent:a/tool/0.0'), k);
  assert.notEqual(effectKey('run_0123456789abcdef0124', 'agent:a/tool/0.0'), k);
  assert.notEqual(effectKey('run_0123456789abcdef0123', 'agent:a/tool/0.1'), k);
});

/**
 * Whether `key` is a valid `_meta` key an implementation may use, by the MCP specification's naming rules
 * for `_meta` ("General fields", `_meta`): an optional prefix of dot-separated labels, each starting with a
 * letter, ending with a letter or digit, with letters, digits or hyphens between, followed by a slash; then
 * a name that, unless empty, begins and ends with an alphanumeric character, with hyphens, underscores, dots
 * and alphanumerics between. Prefixes are reserved for MCP when a label `mcp` or `modelcontextprotocol` is
 * followed by another label (revision 2025-06-18: `mcp.dev/`, `tools.mcp.com/`) or when the second label is
 * one of them (the reverse-DNS wording of later revisions: `io.modelcontextprotocol/`, `dev.mcp/`).
 */
function validOwnMetaKey(key: string): boolean {
  const m = /^(?:([^/]*)\/)?([^/]*)$/.exec(key);
  if (m === null) return false;
  const [, prefix, name] = m;
  if (!/^(?:[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)?$/.test(name!)) return false;
  if (prefix === undefined) return true;
  const labels = prefix.split('.');
  if (!labels.every((l) => /^[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?$/.test(l))) return false;
  const mcp = (l: string | undefined) => l === 'mcp' || l === 'modelcontextprotocol';
  if (labels.some((l, i) => mcp(l) && i < labels.length - 1)) return false;
  return !mcp(labels[1]);
}

test('the effect key of an MCP call goes under a valid, unreserved _meta key (MCP specification, _meta naming)', () => {
  assert.equal(EFFECT_KEY_META, 'dev.agent-cell/effect-key');
  assert.equal(validOwnMetaKey(EFFECT_KEY_META), true);
  // The check refuses what the rules refuse: reserved prefixes, bad labels, bad names.
  for (const bad of [
    'io.modelcontextprotocol/x',
    'dev.mcp/x',
    'mcp.dev/x',
    'tools.mcp.com/x',
    '1dev.agent-cell/x',
    'dev.agent-/x',
    'dev..x/y',
    'dev.agent-cell/-x',
    'dev.agent-cell/x-',
    'a/b/c',
  ])
    assert.equal(validOwnMetaKey(bad), false, bad);
  for (const good of ['com.example/x', 'com.example.mcp/x', 'progressToken', 'dev.agent-cell/a.b_c-d'])
    assert.equal(validOwnMetaKey(good), true, good);
});

/** A tools port whose one tool `t` has the given descriptor fields, recording every call and its context. */
function effectTool(desc: Partial<ToolDescriptor>, fn: (args: JsonObject) => unknown = () => ({ ok: true })) {
  const calls: { args: JsonObject; ctx: ToolCallContext }[] = [];
  return {
    calls,
    port: {
      describe: (name: string): ToolDescriptor | undefined =>
        name === 't' ? { name, description: 't', side_effects: true, parameters: { type: 'object' }, ...desc } : undefined,
      async call(_name: string, args: JsonObject, ctx: ToolCallContext) {
        calls.push({ args, ctx });
        return fn(args);
      },
    },
  };
}

const oneCall = (args: JsonObject = { x: 1 }, policy: JsonObject = {}) =>
  graph([{ id: 't', kind: 'tool', config: { tool: 't', args, ...policy } }]);

async function journals() {
  const j = await signedJournal();
  const signer = { kid: j.kp.kid, sign: (b: Uint8Array) => signEd25519(j.kp.privateJwk, b) };
  const keys = (kid: string) => (kid === j.kp.kid ? j.kp.publicJwk : undefined);
  /** A journal continuing `from`'s records up to and including the first intent of the call (a crash there). */
  const cutAtIntent = (from: MemoryJournal, nth = 1) => {
    let seen = 0;
    const cut = from.records.findIndex((x) => x.kind === 'intent' && ++seen === nth);
    assert.ok(cut >= 0, 'the call was journaled as an intent');
    return memoryJournal('run_test', signer, { records: from.records.slice(0, cut + 1), blobs: new Map(from.blobs) });
  };
  return { first: memoryJournal('run_test', signer), cutAtIntent, keys };
}

function drive(
  g: ReturnType<typeof oneCall>,
  tools: NonNullable<EnginePorts['tools']>,
  j: MemoryJournal,
  outcomes?: EnginePorts['outcomes'],
) {
  return runGraph(
    g,
    null,
    {
      tools,
      clock: manualClock(),
      journal: j.port,
      recorded: j.recorded,
      intents: j.intents,
      attempts: j.attempts,
      ...(outcomes ? { outcomes } : {}),
    },
    OPTS,
  );
}

test('a side-effecting call carries its effect key in its context, its intent and its step record; a read-only call none', async () => {
  const { first } = await journals();
  const t = effectTool({});
  const r = await drive(oneCall(), t.port, first);
  assert.equal(r.outcome, 'completed');
  const key = effectKey('run_test', 't/call');
  assert.equal(t.calls[0]!.ctx.effect_key, key);
  assert.equal(first.records.find((x) => x.kind === 'intent')!.data!['effect_key'], key);
  assert.equal(first.records.find((x) => x.kind === 'step' && x.step_id === 't/call')!.data!['effect_key'], key);

  const { first: j2 } = await journals();
  const ro = effectTool({ side_effects: false });
  await drive(oneCall(), ro.port, j2);
  assert.equal(ro.calls[0]!.ctx.effect_key, undefined);
  assert.deepEqual(j2.records.find((x) => x.kind === 'intent')!.data, { attempt: 1, call: 'tool' });
});

test('a non-idempotent call found in flight is not issued again: the run waits outcome_unknown, naming the call', async () => {
  const { first, cutAtIntent, keys } = await journals();
  await drive(oneCall(), effectTool({}).port, first);
  const j = cutAtIntent(first);
  const t = effectTool({});
  const r = await drive(oneCall(), t.port, j);
  assert.equal(r.outcome, 'waiting');
  assert.equal(r.reason, 'outcome_unknown');
  assert.deepEqual(r.waiting, { step_id: 't/call', for: 'outcome', wake_at: null });
  const key = effectKey('run_test', 't/call');
  assert.deepEqual(r.details, { step_id: 't/call', tool: 't', seat: null, effect_key: key, attempt: 1 });
  assert.equal(t.calls.length, 0, 'not issued blindly again');
  const wait = j.records.at(-1)!;
  assert.equal(wait.kind, 'waiting');
  assert.deepEqual(wait.data, {
    reason: 'outcome_unknown',
    for: 'outcome',
    wake_at: null,
    effect: { step_id: 't/call', tool: 't', seat: null, effect_key: key, attempt: 1 },
  });
  // Driven again without a resolution (a restart, a takeover): it waits again, still without calling.
  const again = await drive(oneCall(), t.port, j, async () => undefined);
  assert.equal(again.reason, 'outcome_unknown');
  assert.equal(t.calls.length, 0);
  assert.deepEqual(await verifyJournal(j.records, keys), { ok: true });
});

const resolution =
  (r: Partial<OutcomeResolution>): EnginePorts['outcomes'] =>
  async () => ({ resolution: 'retry', attempt: 1, by: 'usr_op', at: 1, ...r });

test("an operator's retry issues the call again with the same effect key, flagged; a lost retry waits again", async () => {
  const { first, cutAtIntent, keys } = await journals();
  await drive(oneCall(), effectTool({}).port, first);
  const key = effectKey('run_test', 't/call');
  const t = effectTool({});
  const j = cutAtIntent(first);
  const r = await drive(oneCall(), t.port, j, resolution({ resolution: 'retry' }));
  assert.equal(r.outcome, 'completed');
  assert.equal(t.calls.length, 1);
  assert.equal(t.calls[0]!.ctx.effect_key, key, 'the same key on the retry');
  const intents = j.records.filter((x) => x.kind === 'intent');
  assert.deepEqual(intents[1]!.data, { call: 'tool', attempt: 2, reissue: true, effect_key: key });
  const step = j.records.find((x) => x.kind === 'step' && x.step_id === 't/call')!;
  assert.equal(step.data!['reissued'], true);
  assert.deepEqual(step.data!['resolution'], { resolution: 'retry', by: 'usr_op', attempt: 1 });
  assert.deepEqual(await verifyJournal(j.records, keys), { ok: true });

  // The retry itself lost in a crash: the resolution of attempt 1 does not resolve attempt 2.
  const j2 = cutAtIntent(j, 2);
  const t2 = effectTool({});
  const r2 = await drive(oneCall(), t2.port, j2, resolution({ resolution: 'retry', attempt: 1 }));
  assert.equal(r2.reason, 'outcome_unknown');
  assert.equal(r2.details!['attempt'], 2);
  assert.equal(t2.calls.length, 0);
  // A retry of attempt 2 is the operator's decision again: issued a third time (no call_interrupted).
  const r3 = await drive(oneCall(), t2.port, j2, resolution({ resolution: 'retry', attempt: 2 }));
  assert.equal(r3.outcome, 'completed', JSON.stringify(r3));
  assert.equal(t2.calls.length, 1);
  assert.equal(t2.calls[0]!.ctx.effect_key, key);
});

test("an operator's recorded result is the call's result (the call is not issued); fail fails the run", async () => {
  const { first, cutAtIntent } = await journals();
  await drive(oneCall(), effectTool({}).port, first);
  const t = effectTool({});
  const j = cutAtIntent(first);
  const r = await drive(oneCall(), t.port, j, resolution({ resolution: 'record', result: { status: 201, id: 'ord_1' } }));
  assert.equal(r.outcome, 'completed');
  assert.deepEqual(r.output, { status: 201, id: 'ord_1' });
  assert.equal(t.calls.length, 0);
  const step = j.records.find((x) => x.kind === 'step' && x.step_id === 't/call')!;
  assert.deepEqual(step.data!['resolution'], { resolution: 'record', by: 'usr_op', attempt: 1 });
  assert.equal(j.records.filter((x) => x.kind === 'intent').length, 1, 'no second intent: nothing was issued');

  const jf = cutAtIntent(first);
  const f = await drive(oneCall(), t.port, jf, resolution({ resolution: 'fail' }));
  assert.equal(f.outcome, 'failed');
  assert.equal(f.reason, 'outcome_unknown');
  assert.equal(f.details!['resolved_by'], 'usr_op');
  assert.equal(f.details!['effect_key'], effectKey('run_test', 't/call'));
  assert.equal(t.calls.length, 0);
});

test('a call declared idempotent is re-issued with the same key (once, as a model call); by argument: PUT yes, POST no', async () => {
  const { first, cutAtIntent } = await journals();
  await drive(oneCall(), effectTool({ idempotent: true }).port, first);
  const t = effectTool({ idempotent: true });
  const r = await drive(oneCall(), t.port, cutAtIntent(first));
  assert.equal(r.outcome, 'completed');
  assert.equal(t.calls.length, 1);
  assert.equal(t.calls[0]!.ctx.effect_key, effectKey('run_test', 't/call'));

  const byMethod = { idempotent: { argument: 'method', values: ['GET', 'HEAD', 'PUT', 'DELETE'] } };
  for (const [method, expected] of [
    ['PUT', 'completed'],
    ['DELETE', 'completed'],
    ['POST', 'waiting'],
    ['PATCH', 'waiting'],
  ] as const) {
    const js = await journals();
    await drive(oneCall({ method }), effectTool(byMethod).port, js.first);
    const tm = effectTool(byMethod);
    const rm = await drive(oneCall({ method }), tm.port, js.cutAtIntent(js.first));
    assert.equal(rm.outcome, expected, method);
    assert.equal(tm.calls.length, expected === 'completed' ? 1 : 0, method);
  }
});

test('a tool that says its outcome is unknown (no answer after sending) waits too, and no retry policy sends it again', async () => {
  const { first, keys } = await journals();
  const lost = () => {
    throw Object.assign(new Error('no answer'), { details: { reason: 'outcome_unknown' } });
  };
  const retry = { retry: { max_attempts: 3, backoff_ms: 0, max_backoff_ms: 0, on: ['tool_error', 'tool_unreachable'] } };
  const t = effectTool({}, lost);
  const r = await drive(oneCall({ x: 1 }, retry), t.port, first);
  assert.equal(r.outcome, 'waiting');
  assert.equal(r.reason, 'outcome_unknown');
  assert.equal(r.details!['attempt'], 1);
  assert.equal(t.calls.length, 1, 'not retried');
  assert.ok(!first.records.some((x) => x.kind === 'attempt'), 'its intent stays open');
  // Driven again: still waiting, still not issued.
  const r2 = await drive(oneCall({ x: 1 }, retry), t.port, first);
  assert.equal(r2.reason, 'outcome_unknown');
  assert.equal(t.calls.length, 1);
  assert.deepEqual(await verifyJournal(first.records, keys), { ok: true });
  // Without intents to count, nothing could tell a later drive: the run fails outcome_unknown.
  const { first: j2 } = await journals();
  const bare = await runGraph(oneCall(), null, { tools: effectTool({}, lost).port, clock: manualClock(), journal: j2.port }, OPTS);
  assert.equal(bare.outcome, 'failed');
  assert.equal(bare.reason, 'outcome_unknown');
});

test('every attempt under a retry policy carries the same effect key', async () => {
  const { first } = await journals();
  let n = 0;
  const t = effectTool({}, () => {
    if (++n < 3) throw Object.assign(new Error('down'), { details: { reason: 'tool_unreachable' } });
    return { ok: true };
  });
  const retry = { retry: { max_attempts: 3, backoff_ms: 0, max_backoff_ms: 0, on: ['tool_unreachable'] } };
  const r = await drive(oneCall({ x: 1 }, retry), t.port, first);
  assert.equal(r.outcome, 'completed', JSON.stringify(r));
  assert.equal(t.calls.length, 3);
  assert.deepEqual(new Set(t.calls.map((c) => c.ctx.effect_key)), new Set([effectKey('run_test', 't/call')]));
});
