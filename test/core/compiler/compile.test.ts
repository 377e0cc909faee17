// The formation compiler: shapes per coordination policy, checks with codes,
// determinism (key order, insertion order, 1,000 random formations with fast-check),
// and an executable check that each compiled shape runs on the engine.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { compileFormation } from '../../../core/compiler/compile.ts';
import type { BilletInput, FormationInput } from '../../../core/compiler/types.ts';
import { runGraph } from '../../../core/engine/run.ts';
import { answer, OPTS, ports, scriptedModel } from '../engine/_harness.ts';

const b = (id: string, extra: Partial<BilletInput> = {}): BilletInput => ({
  id,
  role_label: `role-${id}`,
  authority_cap: { allowed_tools: ['calc'], clearance_level: 1 },
  ...extra,
});

function ok(f: FormationInput, billets: BilletInput[], agents?: Parameters<typeof compileFormation>[2]) {
  const r = compileFormation(f, billets, agents);
  assert.ok(r.ok, JSON.stringify(r));
  return r;
}

test('sequential: a pipeline of data edges in (position, id) order', () => {
  const r = ok({ name: 'f', coordination_policy: 'sequential' }, [b('z', { position: 0 }), b('a', { position: 1 }), b('m')]);
  assert.deepEqual(
    r.graph.nodes.map((n) => n.id),
    ['agent:z', 'agent:a', 'agent:m'],
  );
  assert.deepEqual(r.graph.edges, [
    { from: 'agent:z', to: 'agent:a' },
    { from: 'agent:a', to: 'agent:m' },
  ]);
  assert.equal(r.graph.entry, 'agent:z');
  assert.equal(r.graph.exit, 'agent:m');
  assert.match(r.graphHash, /^sha256:[0-9a-f]{64}$/);
  assert.equal(r.graph.formation_hash, r.formationHash);
  assert.equal(r.graph.seats.z!.agent_id, null);
  assert.equal(r.graph.seats.z!.authority.permission_mode, 'ask');
});

test('parallel: fan-out with a join; consensus: fan-out with a consensus gate', () => {
  const p = ok({ name: 'f', coordination_policy: 'parallel' }, [b('x'), b('y')]);
  assert.deepEqual(
    p.graph.nodes.map((n) => `${n.kind}:${n.id}`),
    ['parallel:fanout', 'agent:agent:x', 'agent:agent:y', 'join:join'],
  );
  assert.equal(p.graph.edges.length, 4);
  const c = ok({ name: 'f', coordination_policy: 'consensus', consensus_mode: 'unanimity' }, [b('x'), b('y'), b('z')]);
  const last = c.graph.nodes.at(-1)!;
  assert.equal(last.kind, 'consensus');
  assert.deepEqual(last.config, { mode: 'unanimity' });
});

test('manager-delegates: a management DAG from reports_to', () => {
  const r = ok({ name: 'f', coordination_policy: 'manager-delegates' }, [
    b('boss', { authority_cap: { allowed_tools: ['calc', 'kv.get'], clearance_level: 2 } }),
    b('lead', { reports_to: 'boss' }),
    b('dev1', { reports_to: 'lead' }),
    b('dev2', { reports_to: 'lead' }),
    b('ops', { reports_to: 'boss' }),
  ]);
  assert.deepEqual(
    r.graph.nodes.map((n) => n.id),
    ['delegate:boss', 'delegate:lead', 'agent:dev1', 'agent:dev2', 'review:lead', 'agent:ops', 'review:boss'],
  );
  assert.deepEqual(
    r.graph.edges.filter((e) => e.from === 'delegate:boss'),
    [
      { from: 'delegate:boss', to: 'delegate:lead', when: 'lead' },
      { from: 'delegate:boss', to: 'agent:ops', when: 'ops' },
    ],
  );
  assert.equal(r.graph.entry, 'delegate:boss');
  assert.equal(r.graph.exit, 'review:boss');
});

test('refusals are values with codes', () => {
  const code = (f: FormationInput, bs: BilletInput[]) => {
    const r = compileFormation(f, bs);
    return r.ok ? 'ok' : r.code;
  };
  const md: FormationInput = { name: 'f', coordination_policy: 'manager-delegates' };
  assert.equal(code(md, []), 'empty_formation');
  assert.equal(code(md, [b('a'), b('a')]), 'duplicate_billet');
  assert.equal(code(md, [b('a/model/0')]), 'invalid_formation'); // would collide with derived step ids
  assert.equal(code(md, [b('a'), b('b', { reports_to: 'ghost' })]), 'unknown_reports_to');
  assert.equal(code(md, [b('a', { reports_to: 'b' }), b('b', { reports_to: 'a' })]), 'reports_to_cycle');
  assert.equal(code(md, [b('a', { reports_to: 'a' })]), 'reports_to_cycle');
  assert.equal(code(md, [b('a'), b('b')]), 'root_count');
  assert.equal(code({ name: 'f', coordination_policy: 'bogus' as never }, [b('a')]), 'invalid_formation');
  assert.equal(
    code({ name: 'f', pre: [{ kind: 'gate', config: { rules: [{ name: 'r', expr: 'nope(' }] } }] }, [b('a')]),
    'invalid_formation',
  );
  const over = compileFormation(md, [
    b('boss', { authority_cap: { allowed_tools: ['calc'], clearance_level: 1, budget_ceiling: 100 } }),
    b('w', { reports_to: 'boss', authority_cap: { allowed_tools: ['calc', 'http.get'], clearance_level: 3, budget_ceiling: 50 } }),
  ]);
  assert.equal(over.ok, false);
  assert.ok(!over.ok);
  assert.equal(over.code, 'over_authority');
  assert.deepEqual(over.details, { billet: 'w', parent: 'boss', fields: ['allowed_tools', 'clearance_level'] });
  // over_authority applies to reporting lines under any policy
  assert.equal(code({ name: 'f' }, [b('boss', { authority_cap: {} }), b('w', { reports_to: 'boss' })]), 'over_authority');
  // with a crew, every seat must be bound
  const unbound = compileFormation({ name: 'f' }, [b('a'), b('b')], { a: { agent_id: 'agt_1' } });
  assert.ok(!unbound.ok && unbound.code === 'unbound_seat');
});

test('a crew binding narrows the seat to agent authority ∩ billet cap', () => {
  const r = ok(
    { name: 'f' },
    [b('a', { authority_cap: { allowed_tools: ['calc', 'kv.get'], clearance_level: 3, permission_mode: 'auto' } })],
    {
      a: {
        agent_id: 'agt_1',
        authority: {
          allowed_tools: ['kv.get', 'http.get'],
          clearance_level: 5,
          permission_mode: 'auto-read',
          governing_contract_id: 'ctr_1',
        },
        model: 'm1',
        system_prompt: 'be brief',
      },
    },
  );
  const s = r.graph.seats.a!;
  assert.equal(s.agent_id, 'agt_1');
  assert.deepEqual(s.authority.allowed_tools, ['kv.get']);
  assert.equal(s.authority.clearance_level, 3);
  assert.equal(s.authority.permission_mode, 'auto-read');
  assert.deepEqual(s.authority.governing_contract_ids, ['ctr_1']);
  assert.equal(r.graph.placement.clearance, 3);
});

test('stages: pre/post nodes around the team, conditional edges labelled then', () => {
  const r = ok(
    {
      name: 'f',
      topology: { site: 'hq' },
      pre: [{ kind: 'conditional', config: { expr: 'input != ""' } }],
      post: [
        { kind: 'gate', config: { rules: [{ name: 'short', expr: 'size(input) < 1000' }] } },
        { kind: 'transform', config: { expr: '{"answer": input}' } },
      ],
    },
    [b('a')],
  );
  assert.deepEqual(
    r.graph.nodes.map((n) => n.id),
    ['pre:0', 'agent:a', 'post:0', 'post:1'],
  );
  assert.deepEqual(r.graph.edges[0], { from: 'pre:0', to: 'agent:a', when: 'then' });
  assert.deepEqual(r.graph.placement.topology, { site: 'hq' });
});

function shuffleKeys(v: unknown, rnd: () => number): unknown {
  if (Array.isArray(v)) return v.map((x) => shuffleKeys(x, rnd));
  if (typeof v === 'object' && v !== null) {
    const entries = Object.entries(v);
    for (let i = entries.length - 1; i > 0; i--) {
      const j = Math.floor(rnd() * (i + 1));
      [entries[i], entries[j]] = [entries[j]!, entries[i]!];
    }
    return Object.fromEntries(entries.map(([k, x]) => [k, shuffleKeys(x, rnd)]));
  }
  return v;
}

const tools = ['calc', 'kv.get', 'kv.put', 'http.get', 'clock.now'];
const arbFormation = fc
  .record({
    policy: fc.constantFrom('sequential', 'parallel', 'consensus', 'manager-delegates' as const),
    n: fc.integer({ min: 1, max: 12 }),
    parents: fc.array(fc.nat(), { minLength: 12, maxLength: 12 }),
    caps: fc.array(fc.subarray(tools), { minLength: 12, maxLength: 12 }),
    seed: fc.integer(),
  })
  .map(({ policy, n, parents, caps, seed }) => {
    const billets: BilletInput[] = [];
    for (let i = 0; i < n; i++) {
      // a tree: billet i reports to an earlier billet (root 0); caps shrink down the tree
      const parent = i === 0 ? null : `b${parents[i]! % i}`;
      const parentCap = parent === null ? tools : (billets[Number(parent.slice(1))]!.authority_cap.allowed_tools ?? []);
      billets.push({
        id: `b${i}`,
        role_label: `r${i}`,
        required_skills: ['skill:x', 'skill:a'],
        reports_to: policy === 'manager-delegates' ? parent : null,
        position: i,
        authority_cap: { allowed_tools: caps[i]!.filter((t) => parentCap.includes(t)), clearance_level: 1 },
      });
    }
    return { formation: { name: `f${seed}`, coordination_policy: policy } as FormationInput, billets, seed };
  });

test('determinism: 1,000 random formations hash the same regardless of key and billet order', () => {
  fc.assert(
    fc.property(arbFormation, ({ formation, billets, seed }) => {
      let s = seed >>> 0;
      const rnd = () => {
        s = (s * 1664525 + 1013904223) >>> 0;
        return s / 2 ** 32;
      };
      const a = compileFormation(formation, billets);
      const again = compileFormation(formation, billets);
      const shuffled = [...billets].sort(() => rnd() - 0.5).map((x) => shuffleKeys(x, rnd) as BilletInput);
      const b2 = compileFormation(shuffleKeys(formation, rnd) as FormationInput, shuffled);
      assert.ok(a.ok && again.ok && b2.ok);
      assert.equal(a.graphHash, again.graphHash);
      assert.equal(a.formationHash, b2.formationHash);
      assert.equal(a.graphHash, b2.graphHash);
      assert.deepEqual(a.graph, b2.graph);
    }),
    { numRuns: 1000, seed: 42 },
  );
});

test('a change in any billet changes the formation hash', () => {
  const base = [b('a'), b('b', { position: 1 })];
  const h = ok({ name: 'f' }, base).formationHash;
  assert.notEqual(ok({ name: 'g' }, base).formationHash, h);
  assert.notEqual(ok({ name: 'f' }, [b('a', { role_label: 'other' }), base[1]!]).formationHash, h);
  assert.notEqual(
    ok({ name: 'f' }, [b('a', { authority_cap: { allowed_tools: ['calc'], clearance_level: 2 } }), base[1]!]).formationHash,
    h,
  );
  assert.notEqual(ok({ name: 'f', coordination_policy: 'parallel' }, base).formationHash, h);
  // set-valued fields are order-insensitive
  assert.equal(
    ok({ name: 'f' }, [b('a', { required_skills: ['s2', 's1'] }), base[1]!]).formationHash,
    ok({ name: 'f' }, [b('a', { required_skills: ['s1', 's2', 's1'] }), base[1]!]).formationHash,
  );
});

test('compiled manager-delegates graph runs on the engine: delegate, report, review', async () => {
  const r = ok(
    { name: 'f', coordination_policy: 'manager-delegates' },
    [b('boss'), b('dev', { reports_to: 'boss' }), b('qa', { reports_to: 'boss' })],
    {
      boss: { agent_id: 'agt_boss' },
      dev: { agent_id: 'agt_dev' },
      qa: { agent_id: 'agt_qa' },
    },
  );
  const m = scriptedModel({ boss: [answer('qa'), answer('final: tested')], qa: [answer('tested')] });
  const { p, j } = await ports({ model: m.port }, ['agt_boss', 'agt_dev', 'agt_qa']);
  const out = await runGraph(r.graph, 'check the release', p, { ...OPTS, graph_hash: r.graphHash });
  assert.equal(out.outcome, 'completed', JSON.stringify(out));
  assert.equal(out.output, 'final: tested');
  assert.deepEqual(
    m.calls.map((c) => c.agent.seat),
    ['boss', 'qa', 'boss'],
  );
  assert.equal(j.records[0]!.graph_hash, r.graphHash);
  assert.deepEqual(await j.verify(), { ok: true });
});

// Golden hashes of format version 1: changing the projection, the graph shape or the
// canonical form must bump a format version (and these values), never silently drift.
const GOLDEN_FORMATION: [FormationInput, BilletInput[]] = [
  { name: 'golden', coordination_policy: 'manager-delegates' },
  [
    {
      id: 'boss',
      role_label: 'manager',
      required_skills: ['skill:plan'],
      authority_cap: { allowed_tools: ['calc', 'kv.get'], clearance_level: 2, budget_ceiling: 5000 },
    },
    {
      id: 'dev',
      role_label: 'developer',
      reports_to: 'boss',
      position: 1,
      authority_cap: { allowed_tools: ['calc'], clearance_level: 1, budget_ceiling: 1000 },
    },
    { id: 'qa', role_label: 'tester', reports_to: 'boss', position: 2, authority_cap: { allowed_tools: ['kv.get'], budget_ceiling: 1000 } },
  ],
];
const GOLDEN = {
  formationHash: 'sha256:c0d638fcaef2f7bbe6580a83a37618ac7415cec6beb74a457e5d74f3957ac015',
  graphHash: 'sha256:5c24623c02938a4032625be13b80d5d66ceea4ab40d45c0d780b34492ae75968',
};

test('golden hashes (format v1) are stable in this process and in a separate one', async () => {
  const r = ok(...GOLDEN_FORMATION);
  assert.equal(r.formationHash, GOLDEN.formationHash);
  assert.equal(r.graphHash, GOLDEN.graphHash);
  const { spawnSync } = await import('node:child_process');
  const src = `import { compileFormation } from './core/compiler/compile.ts';
const [f, b] = ${JSON.stringify(GOLDEN_FORMATION)};
b.reverse();
const r = compileFormation(f, b);
process.stdout.write(r.ok ? r.formationHash + ' ' + r.graphHash : 'error');`;
  const out = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', src], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(out.stdout, `${GOLDEN.formationHash} ${GOLDEN.graphHash}`, out.stderr);
});
