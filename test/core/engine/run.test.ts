// The run loop: budget ledger fail-closed, ceilings, step limits, cancellation,
// invalid graphs, deterministic journals, and recovery that never repeats a step.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runGraph } from '../../../core/engine/run.ts';
import { memoryJournal } from '../../../core/journal/memory.ts';
import { signEd25519 } from '../../../core/crypto/ed25519.ts';
import type { Graph } from '../../../core/engine/types.ts';
import { answer, budget, chain, graph, manualClock, OPTS, ports, scriptedModel, seat, signedJournal, tools } from './_harness.ts';

const three = () =>
  graph(
    [
      { id: 'a', kind: 'agent', seat: 'a', config: {} },
      { id: 'b', kind: 'agent', seat: 'b', config: {} },
      { id: 'c', kind: 'agent', seat: 'c', config: {} },
    ],
    chain('a', 'b', 'c'),
    [seat('a'), seat('b'), seat('c')],
  );

test('a run refuses immediately when any bound agent has no budget ledger (fail-closed)', async () => {
  const m = scriptedModel(() => answer('x'));
  const { p, j } = await ports({ model: m.port }, ['agt_a', 'agt_c']);
  const r = await runGraph(three(), 'go', p, OPTS);
  assert.equal(r.outcome, 'refused');
  assert.equal(r.reason, 'no_budget_ledger');
  assert.deepEqual(r.details, { agent_id: 'agt_b', seat: 'b' });
  assert.equal(m.calls.length, 0);
  assert.deepEqual(
    j.records.map((x) => x.kind),
    ['run_started', 'refusal', 'run_finished'],
  );
  assert.deepEqual(await j.verify(), { ok: true });
  // no budget port at all: same refusal
  const { p: p2 } = await ports({ model: m.port });
  delete p2.budget;
  assert.equal((await runGraph(three(), 'go', p2, OPTS)).reason, 'no_budget_ledger');
});

test('exceeding the ledger or the billet budget_ceiling stops the agent with a refusal', async () => {
  const m = scriptedModel(() => answer('x'));
  const b = budget(['agt_a', 'agt_b', 'agt_c'], 110);
  const { p } = await ports({ model: m.port, budget: b.port });
  const r = await runGraph(three(), 'go', p, OPTS);
  assert.equal(r.reason, 'budget_exceeded');
  assert.equal(r.details?.agent_id, 'agt_b');
  assert.equal(m.calls.length, 1);

  const loopy = scriptedModel(() => answer('', [{ id: 'c', name: 'calc', arguments: {} }]));
  const t = tools({ calc: { fn: () => 1 } });
  const g = graph(
    [{ id: 'a', kind: 'agent', seat: 'a', config: {} }],
    [],
    [seat('a', {}, { allowed_tools: ['calc'], budget_ceiling: 120 })],
  );
  const { p: p2 } = await ports({ model: loopy.port, tools: t.port }, ['agt_a']);
  const r2 = await runGraph(g, 'go', p2, OPTS);
  assert.equal(r2.reason, 'budget_ceiling_exceeded');
  // Each call uses 15; a call reserves min(100, what is left) and is refused below the floor (64).
  assert.deepEqual(r2.details, { seat: 'a', agent_id: 'agt_a', ceiling: 120, spent: 60, requested: 100, left: 60, minimum: 64 });
  assert.deepEqual(
    loopy.calls.map((c) => c.max_tokens),
    [100, 100, 90, 75],
  );
});

test('a seat whose ceiling is below max_tokens still calls its model, asking for what is left (floor: MIN_MODEL_TOKENS)', async () => {
  const m = scriptedModel(() => answer('short'));
  const g = graph([{ id: 'a', kind: 'agent', seat: 'a', config: {} }], [], [seat('a', {}, { budget_ceiling: 500 })]);
  const b = budget(['agt_a']);
  const { p } = await ports({ model: m.port, budget: b.port }, ['agt_a']);
  const r = await runGraph(g, 'go', p, OPTS);
  assert.equal(r.outcome, 'completed', JSON.stringify(r));
  assert.equal(m.calls[0]!.max_tokens, 100, 'max_tokens below the ceiling: asked as is');
  const small = graph([{ id: 'a', kind: 'agent', seat: 'a', config: { max_tokens: 1024 } }], [], [seat('a', {}, { budget_ceiling: 300 })]);
  const m2 = scriptedModel(() => answer('short'));
  const b2 = budget(['agt_a']);
  const { p: p2 } = await ports({ model: m2.port, budget: b2.port }, ['agt_a']);
  assert.equal((await runGraph(small, 'go', p2, OPTS)).outcome, 'completed');
  assert.equal(m2.calls[0]!.max_tokens, 300, 'a ceiling of 300 under max_tokens 1024: the call asks for 300');
  assert.deepEqual(b2.log, ['reserve agt_a 300', 'commit r0 15']);
  const tiny = graph([{ id: 'a', kind: 'agent', seat: 'a', config: { max_tokens: 1024 } }], [], [seat('a', {}, { budget_ceiling: 63 })]);
  const m3 = scriptedModel(() => answer('never'));
  const { p: p3 } = await ports({ model: m3.port, budget: budget(['agt_a']).port }, ['agt_a']);
  const r3 = await runGraph(tiny, 'go', p3, OPTS);
  assert.equal(r3.reason, 'budget_ceiling_exceeded');
  assert.equal(r3.details?.minimum, 64);
  assert.equal(m3.calls.length, 0, 'below the floor the model is not called');
});

test('step limits per run and per seat', async () => {
  const loopy = scriptedModel(() => answer('', [{ id: 'c', name: 'calc', arguments: {} }]));
  const t = tools({ calc: { fn: () => 1 } });
  const g = (limits: Partial<Graph['limits']>) =>
    graph([{ id: 'a', kind: 'agent', seat: 'a', config: {} }], [], [seat('a', {}, { allowed_tools: ['calc'] })], {
      max_tool_rounds: 50,
      ...limits,
    });
  const { p } = await ports({ model: loopy.port, tools: t.port }, ['agt_a']);
  const r = await runGraph(g({ max_steps_per_seat: 7 }), 'go', p, OPTS);
  assert.equal(r.reason, 'step_limit_exceeded');
  assert.equal(r.details?.scope, 'seat');
  const { p: p2 } = await ports({ model: loopy.port, tools: t.port }, ['agt_a']);
  const r2 = await runGraph(g({ max_steps: 5 }), 'go', p2, OPTS);
  assert.equal(r2.reason, 'step_limit_exceeded');
  assert.equal(r2.details?.scope, 'run');
});

test('cancellation stops before the next step', async () => {
  let cancelled = false;
  const m = scriptedModel(() => {
    cancelled = true;
    return answer('x');
  });
  const { p, j } = await ports({ model: m.port, isCancelled: () => cancelled }, ['agt_a', 'agt_b', 'agt_c']);
  const r = await runGraph(three(), 'go', p, OPTS);
  assert.equal(r.outcome, 'cancelled');
  assert.equal(m.calls.length, 1);
  assert.equal(j.records.at(-1)!.data?.outcome, 'cancelled');
});

test('an invalid graph is refused before anything runs', async () => {
  const { p } = await ports();
  const bad = graph([{ id: 'x', kind: 'transform', config: { expr: 'oops(' } }]);
  const r = await runGraph(bad, null, p, OPTS);
  assert.equal(r.reason, 'invalid_graph');
  const cyc = graph(
    [
      { id: 'x', kind: 'parallel', config: {} },
      { id: 'y', kind: 'parallel', config: {} },
    ],
    [{ from: 'y', to: 'x' }],
  );
  assert.equal((await runGraph(cyc, null, p, OPTS)).reason, 'invalid_graph');
  const unknown = graph([{ id: 'x', kind: 'teleport' as never, config: {} as never }]);
  assert.equal((await runGraph(unknown, null, p, OPTS)).reason, 'invalid_graph');
});

test('the same run on the same key and clock writes a byte-identical journal', async () => {
  const first = await signedJournal();
  const signer = { kid: first.kp.kid, sign: (b: Uint8Array) => signEd25519(first.kp.privateJwk, b) };
  const drive = async () => {
    const j = memoryJournal('run_test', signer);
    const m = scriptedModel((req) => answer(`${req.agent.seat} done`));
    await runGraph(
      three(),
      'go',
      { model: m.port, clock: manualClock(), budget: budget(['agt_a', 'agt_b', 'agt_c']).port, journal: j.port, recorded: j.recorded },
      OPTS,
    );
    return j.records;
  };
  const a = await drive();
  const b = await drive();
  assert.equal(a.length, 8);
  assert.deepEqual(a, b);
});

test('recovery: a crashed run resumes from its journal without repeating completed steps', async () => {
  const j0 = await signedJournal();
  const signer = { kid: j0.kp.kid, sign: (b: Uint8Array) => signEd25519(j0.kp.privateJwk, b) };
  const j1 = memoryJournal('run_test', signer);
  // The coordinator "dies" while seat b's model call is in flight: that call never returns.
  const calls: string[] = [];
  const dying = {
    async complete(req: { agent: { seat: string } }) {
      calls.push(req.agent.seat);
      if (req.agent.seat === 'b') throw Object.assign(new Error('SIGKILL'), { crash: true });
      return answer(`${req.agent.seat} done`);
    },
  };
  const clock = manualClock();
  const b = budget(['agt_a', 'agt_b', 'agt_c']);
  const crashing = {
    ...j1.port,
    append: async (f: Parameters<typeof j1.port.append>[0], pl: Parameters<typeof j1.port.append>[1]) =>
      f.kind === 'run_finished' ? Promise.reject(new Error('dead')) : j1.port.append(f, pl),
  };
  const r1 = await runGraph(
    three(),
    'go',
    { model: dying as never, clock, budget: b.port, journal: crashing, recorded: j1.recorded },
    OPTS,
  );
  assert.equal(r1.outcome, 'failed'); // what the dying process saw; its journal has no run_finished
  assert.deepEqual(
    j1.records.map((x) => x.step_id),
    ['run', 'a/model/0', 'a'],
  );

  // A peer picks the journal up (same records and stored outputs) and drives the run again.
  const j2 = memoryJournal('run_test', signer, { records: j1.records.map((x) => structuredClone(x)), blobs: new Map(j1.blobs) });
  const m2 = scriptedModel((req) => answer(`${req.agent.seat} done (peer)`));
  const r2 = await runGraph(three(), 'go', { model: m2.port, clock, budget: b.port, journal: j2.port, recorded: j2.recorded }, OPTS);
  assert.equal(r2.outcome, 'completed');
  assert.equal(r2.output, 'c done (peer)');
  assert.deepEqual(
    m2.calls.map((c) => c.agent.seat),
    ['b', 'c'],
    'seat a is not asked again',
  );
  assert.equal(m2.calls[0]!.messages[1]!.content, 'a done', 'the recorded output of a feeds b');
  assert.deepEqual(
    j2.records.map((x) => x.step_id),
    ['run', 'a/model/0', 'a', 'b/model/0', 'b', 'c/model/0', 'c', 'run/end'],
  );
  const v = await (await import('../../../core/journal/verify.ts')).verifyJournal(j2.records, (kid) =>
    kid === j0.kp.kid ? j0.kp.publicJwk : undefined,
  );
  assert.deepEqual(v, { ok: true });
  assert.deepEqual(calls, ['a', 'b']);
});

test('with the intents port, a call in flight at a crash is re-issued once, flagged, and never a third time', async () => {
  const j0 = await signedJournal();
  const signer = { kid: j0.kp.kid, sign: (b: Uint8Array) => signEd25519(j0.kp.privateJwk, b) };
  const keys = (kid: string) => (kid === j0.kp.kid ? j0.kp.publicJwk : undefined);
  const { verifyJournal } = await import('../../../core/journal/verify.ts');
  const clock = manualClock();
  const b = budget(['agt_a', 'agt_b', 'agt_c']);
  // Drive 1 by cell-a (epoch 1) completes seat a, then "dies" with seat b's call in flight:
  // its journal ends with the intent of b/model/0.
  const j1 = memoryJournal('run_test', signer, undefined, { cell_id: 'cell-a', epoch: 1 });
  const m1 = scriptedModel((req) => answer(`${req.agent.seat} done`));
  const r1 = await runGraph(
    three(),
    'go',
    { model: m1.port, clock, budget: b.port, journal: j1.port, recorded: j1.recorded, intents: j1.intents },
    OPTS,
  );
  assert.equal(r1.outcome, 'completed');
  const cut = j1.records.findIndex((x) => x.kind === 'intent' && x.step_id === 'b/model/0');
  assert.ok(cut > 0);
  assert.deepEqual(
    j1.records.slice(0, cut + 1).map((x) => `${x.kind}:${x.step_id}`),
    ['run_started:run', 'intent:a/model/0', 'step:a/model/0', 'step:a', 'intent:b/model/0'],
  );
  assert.deepEqual(j1.records[cut]!.data, { attempt: 1, call: 'model' });
  const crashed = j1.records.slice(0, cut + 1).map((x) => structuredClone(x));

  // Drive 2 by cell-b (epoch 2): a is reused, b's call is re-issued once and flagged.
  const j2 = memoryJournal(
    'run_test',
    signer,
    { records: crashed.map((x) => structuredClone(x)), blobs: new Map(j1.blobs) },
    { cell_id: 'cell-b', epoch: 2 },
  );
  const m2 = scriptedModel((req) => answer(`${req.agent.seat} done (peer)`));
  const r2 = await runGraph(
    three(),
    'go',
    { model: m2.port, clock, budget: b.port, journal: j2.port, recorded: j2.recorded, intents: j2.intents },
    OPTS,
  );
  assert.equal(r2.outcome, 'completed');
  assert.deepEqual(
    m2.calls.map((c) => c.agent.seat),
    ['b', 'c'],
  );
  const reissue = j2.records.find((x) => x.kind === 'intent' && x.step_id === 'b/model/0' && x.data?.['attempt'] === 2);
  assert.deepEqual(reissue?.data, { attempt: 2, call: 'model', reissue: true });
  const step = j2.records.find((x) => x.kind === 'step' && x.step_id === 'b/model/0');
  assert.equal(step?.data?.['reissued'], true);
  assert.equal(step?.data?.['attempt'], 2);
  assert.equal(j2.records.find((x) => x.kind === 'step' && x.step_id === 'c/model/0')?.data?.['reissued'], undefined);
  // The journal, written by two cells under two epochs, verifies; each record names its writer.
  assert.deepEqual(await verifyJournal(j2.records, keys), { ok: true });
  assert.deepEqual([...new Set(j2.records.map((x) => (x.v === 2 ? `${x.cell_id}@${x.epoch}` : 'v1')))], ['cell-a@1', 'cell-b@2']);

  // Drive 3: the re-issued call was in flight too (crash after its intent): it is not issued again.
  const cut2 = j2.records.indexOf(reissue!);
  const j3 = memoryJournal(
    'run_test',
    signer,
    { records: j2.records.slice(0, cut2 + 1).map((x) => structuredClone(x)), blobs: new Map(j2.blobs) },
    { cell_id: 'cell-c', epoch: 3 },
  );
  const m3 = scriptedModel((req) => answer(`${req.agent.seat} done (third)`));
  const r3 = await runGraph(
    three(),
    'go',
    { model: m3.port, clock, budget: b.port, journal: j3.port, recorded: j3.recorded, intents: j3.intents },
    OPTS,
  );
  assert.equal(r3.outcome, 'failed');
  assert.equal(r3.reason, 'call_interrupted');
  assert.deepEqual(r3.details, { step_id: 'b/model/0', call: 'model', attempts: 2 });
  assert.equal(m3.calls.length, 0);
  assert.deepEqual(await verifyJournal(j3.records, keys), { ok: true });
});

test("a reservation that is its call's intent: no intent record; a call in flight is re-issued once, flagged, never a third time", async () => {
  const j0 = await signedJournal();
  const signer = { kid: j0.kp.kid, sign: (b: Uint8Array) => signEd25519(j0.kp.privateJwk, b) };
  const keys = (kid: string) => (kid === j0.kp.kid ? j0.kp.publicJwk : undefined);
  const { verifyJournal } = await import('../../../core/journal/verify.ts');
  const { replaysToCompletion } = await import('../../../core/engine/replay.ts');
  const clock = manualClock();
  // The port's reservations outlive a drive, as the cell's table does: the durable intent of each call.
  const b = budget(['agt_a', 'agt_b', 'agt_c'], Infinity, { counted: true });
  const port = (m: ReturnType<typeof scriptedModel>, j: ReturnType<typeof memoryJournal>) => ({
    model: m.port,
    clock,
    budget: b.port,
    journal: j.port,
    recorded: j.recorded,
    intents: j.intents,
  });
  // Drive 1 completes seat a; seat b's call is cut off (the drive stops while it is out: its reservation is made).
  const j1 = memoryJournal('run_test', signer, undefined, { cell_id: 'cell-a', epoch: 1 });
  const m1 = scriptedModel((req) => {
    if (req.agent.seat === 'b') throw new Error('the drive stopped');
    return answer(`${req.agent.seat} done`);
  });
  const r1 = await runGraph(three(), 'go', port(m1, j1), OPTS);
  assert.equal(r1.outcome, 'failed');
  assert.deepEqual(
    j1.records.slice(0, 3).map((x) => `${x.kind}:${x.step_id}`),
    ['run_started:run', 'step:a/model/0', 'step:a'],
    'one record a model call, after it: no intent before it',
  );
  // What a crash during b's call leaves: the records up to seat a.
  const cut = j1.records.findIndex((x) => x.step_id === 'a');
  const from = (cell: string, epoch: number) =>
    memoryJournal(
      'run_test',
      signer,
      { records: j1.records.slice(0, cut + 1).map((x) => structuredClone(x)), blobs: new Map(j1.blobs) },
      { cell_id: cell, epoch },
    );

  // Drive 2 (a peer): a is reused, b's call is re-issued once and flagged, c asked once.
  const j2 = from('cell-b', 2);
  const m2 = scriptedModel((req) => answer(`${req.agent.seat} done (peer)`));
  const r2 = await runGraph(three(), 'go', port(m2, j2), OPTS);
  assert.equal(r2.outcome, 'completed');
  assert.deepEqual(
    m2.calls.map((c) => c.agent.seat),
    ['b', 'c'],
  );
  const stepB = j2.records.find((x) => x.kind === 'step' && x.step_id === 'b/model/0');
  assert.equal(stepB?.data?.['reissued'], true, 'the re-issue is on its step record');
  assert.equal(stepB?.data?.['attempt'], 2);
  assert.ok(!j2.records.some((x) => x.kind === 'intent'));
  assert.equal(j2.records.find((x) => x.kind === 'step' && x.step_id === 'c/model/0')?.data?.['reissued'], undefined);
  // Without an intent, the journal verifies and replays as any journal does.
  assert.deepEqual(await verifyJournal(j2.records, keys), { ok: true });
  assert.deepEqual(await replaysToCompletion(three(), j2.records, (h) => j2.blobs.get(h)), { ok: true });

  // Drive 3 from the same cut (drive 2's records lost too): b was issued twice without a result: never a third time.
  const j3 = from('cell-c', 3);
  const m3 = scriptedModel((req) => answer(`${req.agent.seat} done (third)`));
  const r3 = await runGraph(three(), 'go', port(m3, j3), OPTS);
  assert.equal(r3.outcome, 'failed');
  assert.equal(r3.reason, 'call_interrupted');
  assert.deepEqual(r3.details, { step_id: 'b/model/0', call: 'model', attempts: 2 });
  assert.equal(m3.calls.length, 0);
  assert.ok(b.log.at(-1)!.endsWith(' 0'), 'the reservation of the call not made is released');
});

test("an older journal's intent before a model call still counts where reservations stand for intents", async () => {
  const j0 = await signedJournal();
  const signer = { kid: j0.kp.kid, sign: (b: Uint8Array) => signEd25519(j0.kp.privateJwk, b) };
  const clock = manualClock();
  // Written the old way (the port does not count): the journal ends with b's intent, a call in flight.
  const old = budget(['agt_a', 'agt_b', 'agt_c']);
  const j1 = memoryJournal('run_test', signer, undefined, { cell_id: 'cell-a', epoch: 1 });
  const m1 = scriptedModel((req) => answer(`${req.agent.seat} done`));
  await runGraph(
    three(),
    'go',
    { model: m1.port, clock, budget: old.port, journal: j1.port, recorded: j1.recorded, intents: j1.intents },
    OPTS,
  );
  const cut = j1.records.findIndex((x) => x.kind === 'intent' && x.step_id === 'b/model/0');
  assert.ok(cut > 0);
  // Resumed by a counting port that never saw b's reservation: the journal's intent says it was in flight.
  const b = budget(['agt_a', 'agt_b', 'agt_c'], Infinity, { counted: true });
  const j2 = memoryJournal(
    'run_test',
    signer,
    { records: j1.records.slice(0, cut + 1).map((x) => structuredClone(x)), blobs: new Map(j1.blobs) },
    { cell_id: 'cell-b', epoch: 2 },
  );
  const m2 = scriptedModel((req) => answer(`${req.agent.seat} done (peer)`));
  const r2 = await runGraph(
    three(),
    'go',
    { model: m2.port, clock, budget: b.port, journal: j2.port, recorded: j2.recorded, intents: j2.intents },
    OPTS,
  );
  assert.equal(r2.outcome, 'completed');
  assert.equal(j2.records.find((x) => x.kind === 'step' && x.step_id === 'b/model/0')?.data?.['reissued'], true);
  assert.equal(j2.records.find((x) => x.kind === 'step' && x.step_id === 'c/model/0')?.data?.['reissued'], undefined);
  assert.deepEqual(
    j2.records.slice(cut + 1).map((x) => `${x.kind}:${x.step_id}`),
    ['step:b/model/0', 'step:b', 'step:c/model/0', 'step:c', 'run_finished:run/end'],
    'the old intent stays; the new drive adds none',
  );
});

test('with the intents port, a tool call in flight is re-issued once and flagged', async () => {
  const j = await signedJournal();
  const signer = { kid: j.kp.kid, sign: (b: Uint8Array) => signEd25519(j.kp.privateJwk, b) };
  const g = graph([{ id: 't', kind: 'tool', config: { tool: 'calc', args: { x: 1 } } }]);
  const t1 = tools({ calc: { fn: () => 1 } });
  const j1 = memoryJournal('run_test', signer, undefined, { cell_id: 'a', epoch: 1 });
  await runGraph(g, null, { tools: t1.port, clock: manualClock(), journal: j1.port, recorded: j1.recorded, intents: j1.intents }, OPTS);
  const cut = j1.records.findIndex((x) => x.kind === 'intent');
  assert.deepEqual(j1.records[cut]!.data, { attempt: 1, call: 'tool' });
  const j2 = memoryJournal(
    'run_test',
    signer,
    { records: j1.records.slice(0, cut + 1), blobs: new Map(j1.blobs) },
    { cell_id: 'b', epoch: 2 },
  );
  const t2 = tools({ calc: { fn: () => 2 } });
  const r = await runGraph(
    g,
    null,
    { tools: t2.port, clock: manualClock(), journal: j2.port, recorded: j2.recorded, intents: j2.intents },
    OPTS,
  );
  assert.equal(r.outcome, 'completed');
  assert.equal(t2.calls.length, 1);
  assert.equal(j2.records.find((x) => x.kind === 'step' && x.step_id === 't/call')?.data?.['reissued'], true);
});

test('without the intents port no intent record is written (journals as before)', async () => {
  const m = scriptedModel(() => answer('x'));
  const { p, j } = await ports({ model: m.port }, ['agt_a', 'agt_b', 'agt_c']);
  const r = await runGraph(three(), 'go', p, OPTS);
  assert.equal(r.outcome, 'completed');
  assert.ok(j.records.every((x) => x.kind !== 'intent'));
});
