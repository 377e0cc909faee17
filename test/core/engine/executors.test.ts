// One test (at least) per executor of the fourteen, over in-memory ports.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runGraph } from '../../../core/engine/run.ts';
import { EngineRefusal } from '../../../core/engine/refusal.ts';
import { EXECUTOR_KINDS } from '../../../core/engine/types.ts';
import { EXECUTORS } from '../../../core/engine/executors/registry.ts';
import { answer, approvals, chain, graph, OPTS, ports, scriptedModel, seat, tools } from './_harness.ts';

test('fourteen executors are registered', () => {
  assert.equal(EXECUTOR_KINDS.length, 14);
  assert.deepEqual(Object.keys(EXECUTORS).sort(), [...EXECUTOR_KINDS].sort());
});

test('agent: model call with budget reserve/commit, bounded tool loop, journaled sub-steps', async () => {
  const m = scriptedModel({ a: [answer('', [{ id: 'c1', name: 'calc', arguments: { expr: '1+1' } }]), answer('it is 2')] });
  const t = tools({ calc: { fn: () => ({ value: 2 }) } });
  const { p, j, b } = await ports({ model: m.port, tools: t.port }, ['agt_a']);
  const g = graph([{ id: 'a', kind: 'agent', seat: 'a', config: { prompt: 'Compute' } }], [], [seat('a', {}, { allowed_tools: ['calc'] })]);
  const r = await runGraph(g, '1+1?', p, OPTS);
  assert.equal(r.outcome, 'completed');
  assert.equal(r.output, 'it is 2');
  assert.equal(m.calls.length, 2);
  assert.deepEqual(
    m.calls[0]!.tools.map((x) => x.name),
    ['calc'],
  );
  assert.equal(m.calls[0]!.messages[1]!.content, 'Compute\n\n1+1?');
  assert.equal(m.calls[1]!.messages.at(-1)!.content, '{"value":2}');
  assert.deepEqual(t.calls, [{ name: 'calc', args: { expr: '1+1' } }]);
  assert.deepEqual(b.log, ['reserve agt_a 100', 'commit r0 15', 'reserve agt_a 100', 'commit r1 15']);
  assert.deepEqual(
    j.records.map((x) => `${x.kind}:${x.step_id}`),
    ['run_started:run', 'step:a/model/0', 'step:a/tool/0.0', 'step:a/model/1', 'step:a', 'run_finished:run/end'],
  );
  assert.deepEqual(await j.verify(), { ok: true });
});

test('agent: a tool outside allowed_tools is refused naming tool_not_granted', async () => {
  const m = scriptedModel({ a: [answer('', [{ id: 'c1', name: 'kv.put', arguments: { k: 'x' } }])] });
  const t = tools({ 'kv.put': { side_effects: true, fn: () => 'ok' } });
  const { p, j } = await ports({ model: m.port, tools: t.port }, ['agt_a']);
  const g = graph([{ id: 'a', kind: 'agent', seat: 'a', config: {} }], [], [seat('a', {}, { allowed_tools: ['calc'] })]);
  const r = await runGraph(g, 'x', p, OPTS);
  assert.equal(r.outcome, 'refused');
  assert.equal(r.reason, 'tool_not_granted');
  assert.equal(r.details?.tool, 'kv.put');
  assert.equal(t.calls.length, 0);
  const refusal = j.records.find((x) => x.kind === 'refusal')!;
  assert.equal(refusal.data?.reason, 'tool_not_granted');
  assert.deepEqual(await j.verify(), { ok: true });
});

test('agent: the governing contract value gate declines with a decision record', async () => {
  const m = scriptedModel({ a: [answer('', [{ id: 'c1', name: 'http.get', arguments: { url: 'https://evil.example' } }])] });
  const t = tools({ 'http.get': { fn: () => 'page' } });
  const contracts = {
    async get(id: string) {
      return id === 'ctr_1'
        ? { id, rules: [{ name: 'only_internal', expr: "tool != 'http.get' || args.url.startsWith('https://intra.')" }] }
        : undefined;
    },
  };
  const { p, j } = await ports({ model: m.port, tools: t.port, contracts }, ['agt_a']);
  const g = graph(
    [{ id: 'a', kind: 'agent', seat: 'a', config: {} }],
    [],
    [seat('a', {}, { allowed_tools: ['http.get'], governing_contract_ids: ['ctr_1'] })],
  );
  const r = await runGraph(g, 'x', p, OPTS);
  assert.equal(r.reason, 'gate_declined');
  assert.equal(r.details?.rule, 'only_internal');
  assert.equal(r.details?.contract, 'ctr_1');
  const d = j.records.find((x) => x.kind === 'decision')!;
  assert.equal(d.step_id, 'a/tool/0.0/gate');
  assert.equal(d.data?.decision, 'refuse');
  assert.equal(t.calls.length, 0);
  // a missing contract fails closed
  const { p: p2 } = await ports(
    { model: scriptedModel({ a: [answer('', [{ id: 'c', name: 'http.get', arguments: {} }])] }).port, tools: t.port },
    ['agt_a'],
  );
  assert.equal((await runGraph(g, 'x', p2, OPTS)).reason, 'contract_unavailable');
});

test('agent: ask waits for approval of a tool call; auto-read only for side effects; plan refuses; auto runs', async () => {
  const script = () => ({ a: [answer('', [{ id: 'c1', name: 'kv.put', arguments: { key: 'k', value: 'v' } }]), answer('stored')] });
  const g = (mode: 'plan' | 'ask' | 'auto-read' | 'auto') =>
    graph([{ id: 'a', kind: 'agent', seat: 'a', config: {} }], [], [seat('a', {}, { allowed_tools: ['kv.put'], permission_mode: mode })]);
  const t = tools({ 'kv.put': { side_effects: true, fn: () => 'ok' } });
  const ap = approvals();
  const m = scriptedModel(script());
  const { p } = await ports({ model: m.port, tools: t.port, approvals: ap.port }, ['agt_a']);
  const r1 = await runGraph(g('ask'), 'x', p, OPTS);
  assert.equal(r1.outcome, 'waiting');
  assert.deepEqual(r1.waiting, { step_id: 'a/tool/0.0', for: 'approval', wake_at: null });
  assert.deepEqual(ap.requested, ['a/tool/0.0']);
  assert.equal(t.calls.length, 0);
  ap.add('a/tool/0.0', 'usr_bob');
  const r2 = await runGraph(g('ask'), 'x', p, OPTS);
  assert.equal(r2.outcome, 'completed');
  assert.equal(m.calls.length, 2, 'the first model call was reused, not repeated');
  assert.equal(t.calls.length, 1);

  const { p: p3 } = await ports({ model: scriptedModel(script()).port, tools: t.port }, ['agt_a']);
  assert.equal((await runGraph(g('plan'), 'x', p3, OPTS)).reason, 'tool_forbidden_by_mode');
  const { p: p6 } = await ports({ model: scriptedModel(script()).port, tools: t.port, approvals: approvals().port }, ['agt_a']);
  assert.equal((await runGraph(g('auto-read'), 'x', p6, OPTS)).outcome, 'waiting', 'auto-read still asks for side effects');
  const ro = tools({ 'kv.put': { side_effects: false, fn: () => 'ok' } });
  const { p: p7 } = await ports({ model: scriptedModel(script()).port, tools: ro.port, approvals: approvals().port }, ['agt_a']);
  assert.equal((await runGraph(g('auto-read'), 'x', p7, OPTS)).outcome, 'completed', 'auto-read runs read-only tools');
  const { p: p8 } = await ports({ model: scriptedModel(script()).port, tools: ro.port, approvals: approvals().port }, ['agt_a']);
  assert.equal((await runGraph(g('ask'), 'x', p8, OPTS)).outcome, 'waiting', 'ask asks even for read-only tools');
  const { p: p4 } = await ports({ model: scriptedModel(script()).port, tools: t.port }, ['agt_a']);
  assert.equal((await runGraph(g('auto'), 'x', p4, OPTS)).outcome, 'completed');
  const { p: p5 } = await ports({ model: scriptedModel(script()).port, tools: t.port, approvals: ap.port }, ['agt_a']);
  ap.add('a/tool/0.0', 'usr_carol', 'reject');
  assert.equal((await runGraph(g('ask'), 'x', p5, OPTS)).reason, 'approval_rejected');
});

test('agent: a tool port refusal (egress) and a bounded tool loop', async () => {
  const loopy = scriptedModel(() => answer('', [{ id: 'c', name: 'calc', arguments: {} }]));
  const t = tools({
    calc: { fn: () => 1 },
    'http.get': {
      fn: () => {
        throw new EngineRefusal('egress_denied', 'not in allowlist', { host: 'x' });
      },
    },
  });
  const { p } = await ports({ model: loopy.port, tools: t.port }, ['agt_a']);
  const g = graph(
    [{ id: 'a', kind: 'agent', seat: 'a', config: { max_tool_rounds: 2 } }],
    [],
    [seat('a', {}, { allowed_tools: ['calc', 'http.get'] })],
  );
  const r = await runGraph(g, 'x', p, OPTS);
  assert.equal(r.reason, 'tool_rounds_exceeded');
  assert.equal(loopy.calls.length, 3);
  const m = scriptedModel({ a: [answer('', [{ id: 'c', name: 'http.get', arguments: { url: 'http://x' } }])] });
  const { p: p2 } = await ports({ model: m.port, tools: t.port }, ['agt_a']);
  const r2 = await runGraph(g, 'x', p2, OPTS);
  assert.equal(r2.outcome, 'refused');
  assert.equal(r2.reason, 'egress_denied');
});

test('tool: args from args_expr; skill: tool, transformer, classifier, chain', async () => {
  const t = tools({ 'kv.get': { fn: (a) => ({ got: a.key }) } });
  const m = scriptedModel({ s: [answer(' Positive ')] });
  const { p } = await ports({ tools: t.port, model: m.port }, ['agt_s']);
  const g = graph(
    [
      { id: 't', kind: 'tool', seat: 's', config: { tool: 'kv.get', args_expr: '{"key": input.k}' } },
      { id: 'x', kind: 'skill', config: { skill: { name: 'up', skill_kind: 'transformer', definition: { expr: 'input.got + "!"' } } } },
      {
        id: 'c',
        kind: 'skill',
        seat: 's',
        config: { skill: { name: 'sent', skill_kind: 'classifier', definition: { labels: ['positive', 'negative'] } } },
      },
      {
        id: 'h',
        kind: 'skill',
        config: {
          skill: {
            name: 'ch',
            skill_kind: 'chain',
            definition: {
              steps: [
                { name: 'a', skill_kind: 'transformer', definition: { expr: '[input]' } },
                { name: 'b', skill_kind: 'transformer', definition: { expr: 'size(input)' } },
              ],
            },
          },
        },
      },
    ],
    chain('t', 'x', 'c', 'h'),
    [seat('s', {}, { allowed_tools: ['kv.get'] })],
  );
  const r = await runGraph(g, { k: 'alpha' }, p, OPTS);
  assert.equal(r.outcome, 'completed', JSON.stringify(r));
  assert.equal(r.output, 1);
  assert.deepEqual(t.calls, [{ name: 'kv.get', args: { key: 'alpha' } }]);
  assert.match(m.calls[0]!.messages[1]!.content, /one of: positive, negative/);
  assert.match(m.calls[0]!.messages[1]!.content, /alpha!/);
  // a skill tool outside the grant is refused
  const g2 = graph(
    [{ id: 'k', kind: 'skill', seat: 's', config: { skill: { name: 'w', skill_kind: 'tool', definition: { tool: 'kv.put' } } } }],
    [],
    [seat('s', {}, { allowed_tools: ['kv.get'] })],
  );
  const { p: p2 } = await ports({ tools: t.port }, ['agt_s']);
  assert.equal((await runGraph(g2, {}, p2, OPTS)).reason, 'tool_not_granted');
});

test('conditional: routes then/else, skipped branches do not run', async () => {
  const g = graph(
    [
      { id: 'c', kind: 'conditional', config: { expr: 'input.n > 10.0' } },
      { id: 'big', kind: 'transform', config: { expr: '"big"' } },
      { id: 'small', kind: 'transform', config: { expr: '"small"' } },
      { id: 'j', kind: 'join', config: {} },
    ],
    [
      { from: 'c', to: 'big', when: 'then' },
      { from: 'c', to: 'small', when: 'else' },
      { from: 'big', to: 'j' },
      { from: 'small', to: 'j' },
    ],
  );
  const { p, j } = await ports();
  assert.deepEqual((await runGraph(g, { n: 11 }, p, OPTS)).output, { big: 'big' });
  assert.ok(!j.records.some((r) => r.step_id === 'small'));
  const { p: p2 } = await ports();
  assert.deepEqual((await runGraph(g, { n: 1 }, p2, OPTS)).output, { small: 'small' });
  const { p: p3 } = await ports();
  assert.equal((await runGraph(g, { m: 1 }, p3, OPTS)).reason, 'expression_failed');
});

test('parallel + join: fan-out and collect in node order (object and list modes)', async () => {
  const g = (mode: 'object' | 'list') =>
    graph(
      [
        { id: 'p', kind: 'parallel', config: {} },
        { id: 'x', kind: 'transform', config: { expr: 'input * 2.0' } },
        { id: 'y', kind: 'transform', config: { expr: 'input + 1.0' } },
        { id: 'j', kind: 'join', config: { mode } },
      ],
      [
        { from: 'p', to: 'x' },
        { from: 'p', to: 'y' },
        { from: 'x', to: 'j' },
        { from: 'y', to: 'j' },
      ],
    );
  const { p } = await ports();
  assert.deepEqual((await runGraph(g('object'), 5, p, OPTS)).output, { x: 10, y: 6 });
  const { p: p2 } = await ports();
  assert.deepEqual((await runGraph(g('list'), 5, p2, OPTS)).output, [10, 6]);
});

function consensusGraph(mode: 'majority' | 'unanimity', n: number) {
  const ids = Array.from({ length: n }, (_, i) => `s${i}`);
  return graph(
    [
      { id: 'fan', kind: 'parallel', config: {} },
      ...ids.map((id) => ({ id, kind: 'agent' as const, seat: id, config: {} })),
      { id: 'cons', kind: 'consensus', config: { mode } },
    ],
    [...ids.map((id) => ({ from: 'fan', to: id })), ...ids.map((id) => ({ from: id, to: 'cons' }))],
    ids.map((id) => seat(id)),
  );
}

test('consensus: majority, unanimity; a tie is a refusal with a decision record', async () => {
  const run = async (mode: 'majority' | 'unanimity', answers: string[]) => {
    const m = scriptedModel(Object.fromEntries(answers.map((a, i) => [`s${i}`, [answer(a)]])));
    const { p, j } = await ports(
      { model: m.port },
      answers.map((_, i) => `agt_s${i}`),
    );
    return { r: await runGraph(consensusGraph(mode, answers.length), 'q', p, OPTS), j };
  };
  const a = await run('majority', ['Paris', 'paris ', 'Lyon']);
  assert.equal(a.r.output, 'Paris');
  assert.equal(a.j.records.find((x) => x.step_id === 'cons')!.kind, 'decision');
  const tie = await run('majority', ['A', 'B', 'A', 'B']);
  assert.equal(tie.r.outcome, 'refused');
  assert.equal(tie.r.reason, 'consensus_tie');
  assert.equal(tie.j.records.find((x) => x.step_id === 'cons')!.data?.decision, 'refuse');
  assert.equal((await run('majority', ['A', 'B', 'C'])).r.reason, 'consensus_tie');
  assert.equal((await run('majority', ['A', 'A', 'B', 'C'])).r.reason, 'no_majority');
  assert.equal((await run('unanimity', ['yes', 'Yes'])).r.output, 'yes');
  assert.equal((await run('unanimity', ['yes', 'yes', 'no'])).r.reason, 'no_unanimity');
});

test('human_approval: quorum k of n named approvers; holds, then continues', async () => {
  const ap = approvals();
  const { p, clock } = await ports({ approvals: ap.port });
  const g = graph(
    [
      { id: 'h', kind: 'human_approval', config: { rule: 'quorum', approvers: ['u1', 'u2', 'u3'], quorum: 2, timeout_ms: 60_000 } },
      { id: 'done', kind: 'transform', config: { expr: '"shipped"' } },
    ],
    chain('h', 'done'),
  );
  const r1 = await runGraph(g, 'x', p, OPTS);
  assert.equal(r1.outcome, 'waiting');
  assert.equal(r1.waiting?.wake_at, clock.now() + 60_000);
  ap.add('h', 'u1');
  ap.add('h', 'u1');
  ap.add('h', 'intruder');
  clock.advance(1000);
  assert.equal((await runGraph(g, 'x', p, OPTS)).outcome, 'waiting', 'duplicates and outsiders do not count');
  ap.add('h', 'u3');
  const r3 = await runGraph(g, 'x', p, OPTS);
  assert.equal(r3.outcome, 'completed');
  assert.equal(r3.output, 'shipped');
});

test('human_approval: two-person rule excludes the requester; rejection and timeout fail closed', async () => {
  const g = graph([{ id: 'h', kind: 'human_approval', config: { rule: 'two_person', timeout_ms: 1000 } }]);
  const ap = approvals();
  const { p } = await ports({ approvals: ap.port });
  assert.equal((await runGraph(g, 'x', p, OPTS)).outcome, 'waiting');
  ap.add('h', 'usr_alice'); // the requester
  ap.add('h', 'usr_bob');
  assert.equal((await runGraph(g, 'x', p, OPTS)).outcome, 'waiting');
  ap.add('h', 'usr_carol');
  assert.equal((await runGraph(g, 'x', p, OPTS)).outcome, 'completed');

  const ap2 = approvals();
  const { p: p2 } = await ports({ approvals: ap2.port });
  assert.equal((await runGraph(g, 'x', p2, OPTS)).outcome, 'waiting');
  ap2.add('h', 'usr_bob', 'reject', { comment: 'not this quarter' });
  const rj = await runGraph(g, 'x', p2, OPTS);
  assert.equal(rj.outcome, 'refused');
  assert.equal(rj.reason, 'approval_rejected');
  assert.deepEqual(rj.details, { step_id: 'h', by: 'usr_bob', chain: ['usr_bob'], comment: 'not this quarter' });

  const ap3 = approvals();
  const { p: p3, clock } = await ports({ approvals: ap3.port });
  assert.equal((await runGraph(g, 'x', p3, OPTS)).outcome, 'waiting');
  clock.advance(1000);
  assert.equal((await runGraph(g, 'x', p3, OPTS)).reason, 'approval_timeout');
  const { p: p4 } = await ports();
  assert.equal((await runGraph(g, 'x', p4, OPTS)).reason, 'approval_unavailable');
});

test('human_approval: a decision counts as its whole chain and for the one input it approved', async () => {
  const g = graph([{ id: 'h', kind: 'human_approval', config: { rule: 'two_person', timeout_ms: 60_000 } }]);
  // The requester (usr_alice) requested through a token exchanged by usr_mallory: both are its chain.
  const opts = { ...OPTS, requester_actors: ['usr_mallory'] };
  const ap = approvals();
  const { p, j: journal } = await ports({ approvals: ap.port });
  assert.equal((await runGraph(g, 'x', p, opts)).outcome, 'waiting');
  ap.add('h', 'usr_bob', 'approve', { chain: ['usr_bob', 'usr_alice'] }); // the requester acting through bob's token
  ap.add('h', 'usr_mallory');
  ap.add('h', 'usr_carol', 'approve', { input_hash: `sha256:${'0'.repeat(64)}` }); // consent to another input
  assert.equal((await runGraph(g, 'x', p, opts)).outcome, 'waiting', 'none of these counts');
  ap.add('h', 'usr_carol', 'approve', { comment: 'ok' });
  ap.add('h', 'usr_dave', 'approve', { chain: ['usr_dave', 'usr_carol'] }); // carol again, through dave's token
  assert.equal((await runGraph(g, 'x', p, opts)).outcome, 'waiting', 'one person, one voice');
  ap.add('h', 'usr_erin');
  const done = await runGraph(g, 'x', p, opts);
  assert.equal(done.outcome, 'completed');
  const rec = journal.records.find((r) => r.kind === 'decision' && r.step_id === 'h')!;
  assert.deepEqual(rec.data?.['approved_by'], ['usr_carol', 'usr_erin']);
  assert.equal(rec.data?.['requester'], 'usr_alice');
  assert.deepEqual(rec.data?.['requester_actors'], ['usr_mallory']);
  const decided = rec.data!['decisions'] as { principal: string; chain: string[]; comment: string | null }[];
  assert.deepEqual(
    decided.map((d) => [d.principal, d.chain, d.comment]),
    [
      ['usr_carol', ['usr_carol'], 'ok'],
      ['usr_erin', ['usr_erin'], null],
    ],
  );
  assert.equal(rec.input_hash, ap.digests.get('h'), "the record's input hash is the digest the decisions approved");
});

test('gate: allow and refuse are both decision records naming rule and contract', async () => {
  const contracts = {
    async get(id: string) {
      return { id, rules: [{ name: 'small', expr: 'input.amount < 100.0' }] };
    },
  };
  const g = graph([
    { id: 'g', kind: 'gate', config: { rules: [{ name: 'has_amount', expr: 'has(input.amount)' }], contract_id: 'ctr_pay' } },
  ]);
  const { p, j } = await ports({ contracts });
  const ok = await runGraph(g, { amount: 5 }, p, OPTS);
  assert.deepEqual(ok.output, { amount: 5 });
  const d = j.records.find((r) => r.step_id === 'g')!;
  assert.equal(d.kind, 'decision');
  assert.deepEqual(d.data, {
    decision: 'allow',
    contract: 'ctr_pay',
    rules: ['has_amount', 'small'],
    reason: 'all rules hold',
    executor: 'gate',
  });
  const { p: p2, j: j2 } = await ports({ contracts });
  const no = await runGraph(g, { amount: 500 }, p2, OPTS);
  assert.equal(no.outcome, 'refused');
  assert.equal(no.reason, 'gate_declined');
  assert.equal(no.details?.rule, 'small');
  const d2 = j2.records.find((r) => r.step_id === 'g' && r.kind === 'decision')!;
  assert.equal(d2.data?.decision, 'refuse');
  assert.equal(d2.data?.contract, 'ctr_pay');
  const { p: p3 } = await ports({ contracts });
  assert.equal((await runGraph(g, { other: 1 }, p3, OPTS)).reason, 'gate_declined', 'an evaluation error refuses');
});

test('delegate: the manager picks one report, the choice is recorded and routes', async () => {
  const m = scriptedModel({ mgr: [answer('writer')], writer: [answer('a poem')] });
  const { p, j } = await ports({ model: m.port }, ['agt_mgr', 'agt_writer', 'agt_coder']);
  const g = graph(
    [
      { id: 'd', kind: 'delegate', seat: 'mgr', config: { seat: 'mgr', reports: ['coder', 'writer'] } },
      { id: 'coder', kind: 'agent', seat: 'coder', config: {} },
      { id: 'writer', kind: 'agent', seat: 'writer', config: {} },
      { id: 'collect', kind: 'join', config: {} },
    ],
    [
      { from: 'd', to: 'coder', when: 'coder' },
      { from: 'd', to: 'writer', when: 'writer' },
      { from: 'coder', to: 'collect' },
      { from: 'writer', to: 'collect' },
    ],
    [seat('mgr'), seat('coder'), seat('writer')],
  );
  const r = await runGraph(g, 'write something', p, OPTS);
  assert.deepEqual(r.output, { writer: 'a poem' });
  const d = j.records.find((x) => x.step_id === 'd')!;
  assert.equal(d.kind, 'decision');
  assert.equal(d.data?.choice, 'writer');
  const m2 = scriptedModel({ mgr: [answer('nobody')] });
  const { p: p2 } = await ports({ model: m2.port }, ['agt_mgr', 'agt_writer', 'agt_coder']);
  assert.equal((await runGraph(g, 'x', p2, OPTS)).reason, 'delegation_unresolved');
});

test('map: bounded fan-out, per-item steps; too many items is refused', async () => {
  const g = graph([
    { id: 'm', kind: 'map', config: { over: 'input.items', max_items: 3, body: { kind: 'transform', config: { expr: 'input * input' } } } },
  ]);
  const { p, j } = await ports();
  assert.deepEqual((await runGraph(g, { items: [1, 2, 3] }, p, OPTS)).output, [1, 4, 9]);
  assert.deepEqual(
    j.records.filter((r) => r.step_id.startsWith('m[')).map((r) => r.step_id),
    ['m[0]', 'm[1]', 'm[2]'],
  );
  const { p: p2 } = await ports();
  const r = await runGraph(g, { items: [1, 2, 3, 4] }, p2, OPTS);
  assert.equal(r.reason, 'map_too_large');
});

test('loop: bounded iteration until a condition; the limit refuses or completes', async () => {
  const body = { kind: 'transform' as const, config: { expr: 'input * 2.0' } };
  const { p } = await ports();
  const g = graph([{ id: 'l', kind: 'loop', config: { body, until: 'output >= 50.0', max_iterations: 10 } }]);
  assert.equal((await runGraph(g, 1, p, OPTS)).output, 64);
  const { p: p2 } = await ports();
  const g2 = graph([{ id: 'l', kind: 'loop', config: { body, until: 'false', max_iterations: 3 } }]);
  assert.equal((await runGraph(g2, 1, p2, OPTS)).reason, 'loop_limit_exceeded');
  const { p: p3 } = await ports();
  const g3 = graph([{ id: 'l', kind: 'loop', config: { body, until: 'false', max_iterations: 3, on_limit: 'complete' } }]);
  assert.equal((await runGraph(g3, 1, p3, OPTS)).output, 8);
});

test('transform: CEL reshape with context', async () => {
  const { p } = await ports();
  const g = graph([{ id: 't', kind: 'transform', config: { expr: '{"who": context.requester, "n": size(input)}' } }]);
  assert.deepEqual((await runGraph(g, [1, 2], p, OPTS)).output, { who: 'usr_alice', n: 2 });
});

test('timer: durable wait until due, then continues', async () => {
  const g = graph(
    [
      { id: 'w', kind: 'timer', config: { delay_ms: 5000 } },
      { id: 'after', kind: 'transform', config: { expr: '"woke"' } },
    ],
    chain('w', 'after'),
  );
  const { p, clock } = await ports();
  const r1 = await runGraph(g, null, p, OPTS);
  assert.equal(r1.outcome, 'waiting');
  assert.deepEqual(r1.waiting, { step_id: 'w', for: 'timer', wake_at: clock.now() + 5000 });
  clock.advance(4999);
  assert.equal((await runGraph(g, null, p, OPTS)).outcome, 'waiting');
  clock.advance(1);
  assert.equal((await runGraph(g, null, p, OPTS)).output, 'woke');
});

test('gate: a contract rule that does not compile fails closed (gate_declined)', async () => {
  const contracts = {
    async get(id: string) {
      return { id, rules: [{ name: 'broken', expr: 'nope(' }] };
    },
  };
  const g = graph([{ id: 'g', kind: 'gate', config: { rules: [], contract_id: 'ctr_bad' } }]);
  const { p, j } = await ports({ contracts });
  const r = await runGraph(g, {}, p, OPTS);
  assert.equal(r.reason, 'gate_declined');
  assert.match(String(j.records.find((x) => x.kind === 'decision')!.data?.reason), /broken failed \(invalid_expression\)/);
});

test('a port refusal with non-JSON details is still journaled as a refusal', async () => {
  const m = scriptedModel({ a: [answer('', [{ id: 'c', name: 'http.get', arguments: {} }])] });
  const t = tools({
    'http.get': {
      fn: () => {
        throw new EngineRefusal('egress_denied', 'no', { when: new Date(0) as never, n: 1 });
      },
    },
  });
  const { p, j } = await ports({ model: m.port, tools: t.port }, ['agt_a']);
  const g = graph(
    [{ id: 'a', kind: 'agent', seat: 'a', config: {} }],
    [],
    [seat('a', {}, { allowed_tools: ['http.get'], permission_mode: 'auto' })],
  );
  const r = await runGraph(g, 'x', p, OPTS);
  assert.equal(r.reason, 'egress_denied');
  assert.equal(j.records.find((x) => x.kind === 'refusal')!.data?.n, 1);
  assert.deepEqual(await j.verify(), { ok: true });
});
