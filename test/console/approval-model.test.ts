// console/src/approval-model.ts: the quorum and two-person arithmetic the
// console shows, and when it offers Approve, agree with the engine's rules.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { approvalStatus, approvedToolCall, toolCallOrigin, whyNot, type PendingApproval } from '../../console/src/approval-model.ts';
import { contentHash } from '../../core/canonical.ts';

const at = '2026-01-01T00:00:00.000Z';
const ask = (over: Partial<PendingApproval>): PendingApproval => ({
  step_id: 'pre:0',
  kind: 'human_approval',
  rule: 'quorum',
  approvers: [],
  quorum: 1,
  prompt: null,
  due: null,
  requested_at: at,
  decisions: [],
  ...over,
});
const run = { run_id: 'run_1', kind: 'crew', crew_id: 'crw_1', requester: 'usr_req' };

test('quorum of two named approvers: one approval leaves one more, from the other', () => {
  const a = ask({ quorum: 2, approvers: ['usr_a', 'usr_b'], decisions: [{ principal: 'usr_a', decision: 'approve', at }] });
  assert.deepEqual(approvalStatus(a, run.requester), {
    need: 2,
    approvedBy: ['usr_a'],
    rejectedBy: [],
    stillNeeded: 1,
    waitingOn: ['usr_b'],
  });
  assert.equal(whyNot(a, run, 'usr_b', true, true), null, 'bob may decide');
  assert.match(whyNot(a, run, 'usr_a', true, true)!, /decided/);
  assert.match(whyNot(a, run, 'usr_c', true, true)!, /not a named approver/);
  assert.match(whyNot(a, run, 'usr_b', false, true)!, /lacks the permission agent_teams\.approve/);
  assert.equal(whyNot(a, run, null, true, false), null, 'unknown principal and permissions: offered, the cell decides');
  // A decision by someone not named does not count (the engine filters it out).
  const stray = ask({ quorum: 2, approvers: ['usr_a', 'usr_b'], decisions: [{ principal: 'usr_x', decision: 'approve', at }] });
  assert.equal(approvalStatus(stray, run.requester).approvedBy.length, 0);
});

test('two-person rule: two distinct people, never the requester', () => {
  const a = ask({
    rule: 'two_person',
    quorum: 2,
    decisions: [
      { principal: 'usr_req', decision: 'approve', at },
      { principal: 'usr_a', decision: 'approve', at },
    ],
  });
  const st = approvalStatus(a, run.requester);
  assert.equal(st.need, 2);
  assert.deepEqual(st.approvedBy, ['usr_a'], "the requester's own approval does not count");
  assert.equal(st.stillNeeded, 1);
  assert.equal(st.waitingOn, null, 'anyone else may give the second');
  assert.match(whyNot(ask({ rule: 'two_person' }), run, 'usr_req', true, true)!, /requested this run/);
  assert.equal(whyNot(ask({ rule: 'two_person' }), run, 'usr_c', true, true), null);
});

test('a rejection is shown; a quorum of one from anyone', () => {
  const a = ask({ decisions: [{ principal: 'usr_a', decision: 'reject', at }] });
  assert.deepEqual(approvalStatus(a, run.requester).rejectedBy, ['usr_a']);
  assert.equal(approvalStatus(ask({ quorum: 0 }), run.requester).need, 1, 'a quorum is at least one');
});

test('chains: the requester acting through another token, and the actors it requested through, count for nobody under two-person', () => {
  const a = ask({
    rule: 'two_person',
    quorum: 2,
    decisions: [
      { principal: 'usr_a', chain: ['usr_a', 'usr_req'], decision: 'approve', at },
      { principal: 'usr_m', decision: 'approve', at },
      { principal: 'usr_b', decision: 'approve', at },
      { principal: 'usr_c', chain: ['usr_c', 'usr_b'], decision: 'approve', at },
    ],
  });
  const st = approvalStatus(a, run.requester, ['usr_m']);
  assert.deepEqual(st.approvedBy, ['usr_b'], 'one person, outside the requester’s chain');
  assert.equal(st.stillNeeded, 1);
  const through = { ...run, flags: { requester_actors: ['usr_m'] } };
  assert.match(whyNot(ask({ rule: 'two_person' }), through, 'usr_m', true, true)!, /outside its chain/);
  assert.match(whyNot(a, run, 'usr_b', true, true)!, /decided/, 'bob decided, also through carol');
});

test('a tool call waiting under ask: the model answer that asked for it, its exact arguments, checked against the digest', () => {
  assert.deepEqual(toolCallOrigin('agent:blt_1/tool/2.1'), { modelStep: 'agent:blt_1/model/2', index: 1 });
  assert.equal(toolCallOrigin('pre:0'), null);
  const answer = {
    content: null,
    tool_calls: [
      { id: 'c0', name: 'clock.now', arguments: {} },
      { id: 'c1', name: 'calc', arguments: { expression: '6*7' } },
    ],
  };
  // The engine's digest of a call under ask (core/engine/internal/tool.ts): contentHash({ tool, args }).
  const digest = contentHash({ tool: 'calc', args: { expression: '6*7' } });
  assert.deepEqual(approvedToolCall(answer, 1, digest), { tool: 'calc', args: { expression: '6*7' }, matches: true });
  assert.equal(approvedToolCall(answer, 0, digest)?.matches, false, 'another call is not the approved one');
  assert.equal(approvedToolCall(answer, 1, contentHash({ tool: 'calc', args: { expression: '6*8' } }))?.matches, false);
  assert.equal(approvedToolCall(answer, 5, digest), null);
  assert.equal(approvedToolCall({ content: 'no call' }, 0, digest), null);
});
