// The one rule of whether a human decision counts (core/engine/approval-rule.ts), as properties over
// random principals, delegation chains, rules and decisions (fast-check): no principal of the
// requester's chain is ever one of a two-person quorum, through any token; a decision counts as its
// whole chain (one person, one voice); it approves exactly one input digest; an approval recorded
// for another run stands only for the same input and the same requester chain.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  alreadyDecided,
  approvalReusable,
  chainOf,
  decisionCounts,
  leadsTo,
  requesterChain,
  tallyApproval,
  type DecisionFacts,
} from '../../../core/engine/approval-rule.ts';

const PEOPLE = ['usr_a', 'usr_b', 'usr_c', 'usr_d', 'usr_e', 'svc_f'];
const DIGEST = `sha256:${'1'.repeat(64)}`;
const OTHER = `sha256:${'2'.repeat(64)}`;

const person = fc.constantFrom(...PEOPLE);
const actors = fc.uniqueArray(person, { maxLength: 3 });
const requesterArb = fc.record({ id: person, actors });
const decisionArb: fc.Arbitrary<DecisionFacts> = fc
  .record({
    principal: person,
    actors,
    decision: fc.constantFrom('approve' as const, 'reject' as const),
    input_hash: fc.constantFrom(DIGEST, DIGEST, DIGEST, OTHER, null),
  })
  .map(({ actors: a, ...d }) => ({ ...d, chain: [d.principal, ...a] }));
const stepArb = fc.record({
  rule: fc.constantFrom('two_person', 'quorum'),
  approvers: fc.oneof(fc.constant([] as string[]), fc.uniqueArray(person, { minLength: 1, maxLength: 4 })),
  quorum: fc.integer({ min: 1, max: 4 }),
  input_hash: fc.constant(DIGEST),
});

test('two-person: no principal of the requester’s chain counts, through any token, and two people are two disjoint chains', () => {
  fc.assert(
    fc.property(fc.array(decisionArb, { maxLength: 12 }), requesterArb, stepArb, (ds, requester, s) => {
      const step = { ...s, rule: 'two_person' };
      const theirs = new Set(requesterChain(requester));
      for (const d of ds) {
        if (chainOf(d).some((p) => theirs.has(p))) assert.equal(decisionCounts(d, step, requester).counts, false);
      }
      const t = tallyApproval(ds, step, requester);
      const voices = [...t.approvals, ...(t.rejected ? [t.rejected] : [])].map(chainOf);
      for (const v of voices) assert.ok(!v.some((p) => theirs.has(p)), 'a chain member of the requester was counted');
      const all = voices.flat();
      assert.equal(new Set(all).size, all.length, 'two counted decisions share a principal');
      if (t.approved) assert.ok(t.approvals.length >= 2);
    }),
    { numRuns: 2000 },
  );
});

test('a decision counts only for the input it approved and only from a named approver', () => {
  fc.assert(
    fc.property(decisionArb, requesterArb, stepArb, (d, requester, step) => {
      const v = decisionCounts(d, step, requester);
      if (d.input_hash !== step.input_hash) assert.deepEqual(v, { counts: false, reason: 'approval_input_changed' });
      if (step.approvers.length > 0 && !step.approvers.includes(d.principal)) assert.equal(v.counts, false);
      if (v.counts) assert.equal(d.input_hash, step.input_hash);
    }),
    { numRuns: 2000 },
  );
});

test('the tally never counts more people than there are, and adding decisions never uncounts one', () => {
  fc.assert(
    fc.property(fc.array(decisionArb, { maxLength: 12 }), decisionArb, requesterArb, stepArb, (ds, more, requester, step) => {
      const t = tallyApproval(ds, step, requester);
      const counted = new Set(t.approvals.flatMap(chainOf));
      assert.ok(t.approvals.length <= counted.size);
      assert.ok(t.approvals.every((d) => d.decision === 'approve' && decisionCounts(d, step, requester).counts));
      const later = tallyApproval([...ds, more], step, requester);
      assert.deepEqual(later.approvals.slice(0, t.approvals.length), t.approvals, 'a later decision changed who counted before it');
      if (t.rejected !== null) assert.equal(later.rejected, t.rejected);
      // One voice per person: a decider whose chain meets a recorded decision's is already decided.
      if (ds.length > 0)
        assert.equal(
          alreadyDecided(chainOf(more), ds),
          chainOf(more).some((p) => ds.some((d) => chainOf(d).includes(p))),
        );
    }),
    { numRuns: 2000 },
  );
});

test('an approval recorded for another run stands only for the same input, the same requester chain and nothing replaced after it', () => {
  fc.assert(
    fc.property(requesterArb, requesterArb, fc.constantFrom(DIGEST, OTHER), fc.boolean(), (recorded, now, digest, replacedAfter) => {
      const ok = approvalReusable({ input_hash: DIGEST, requester: recorded }, { input_hash: digest, requester: now, replacedAfter });
      const same = JSON.stringify(requesterChain(recorded)) === JSON.stringify(requesterChain(now));
      assert.equal(ok, same && digest === DIGEST && !replacedAfter);
    }),
    { numRuns: 2000 },
  );
  assert.equal(
    approvalReusable({ input_hash: DIGEST, requester: null }, { input_hash: DIGEST, requester: { id: 'usr_a' }, replacedAfter: false }),
    false,
    'a record that names no requester stands for no other run',
  );
});

test('leadsTo follows edges (an approval covers what flows after it)', () => {
  const edges = [
    { from: 'pre:0', to: 'agent:a' },
    { from: 'agent:a', to: 'agent:b' },
    { from: 'x', to: 'y' },
  ];
  assert.equal(leadsTo(edges, 'pre:0', 'agent:b'), true);
  assert.equal(leadsTo(edges, 'agent:b', 'pre:0'), false);
  assert.equal(leadsTo(edges, 'pre:0', 'y'), false);
});
