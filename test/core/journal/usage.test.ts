// The model tokens a journal says each agent spent (core/journal/usage.ts): what the engine counts against
// a seat (an answer's usage and failed_usage, a failed attempt's usage), the records a fork copied from its
// parent excluded.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { JournalRecord } from '../../../core/journal/record.ts';
import { modelUsageByAgent } from '../../../core/journal/usage.ts';

let seq = 0;
const rec = (kind: string, step_id: string, data?: Record<string, unknown>, input_hash = 'sha256:in'): JournalRecord =>
  ({
    v: 1,
    seq: ++seq,
    run_id: 'run_1',
    step_id,
    kind,
    input_hash,
    output_hash: 'sha256:out',
    at: 0,
    ...(data ? { data } : {}),
  }) as unknown as JournalRecord;

const seats: Record<string, string> = { s1: 'agt_a', s2: 'agt_b' };
const agentOf = (seat: string) => seats[seat] ?? null;

test("an answer counts its usage and failed_usage under its seat's agent, never the agent the record names", () => {
  const records = [
    rec('run_started', 'run'),
    rec('step', 'agent:s1/model/0', { seat: 's1', agent_id: 'agt_a', usage: 7, failed_usage: 3 }),
    rec('step', 'agent:s1/model/1', { seat: 's1', agent_id: 'agt_victim', usage: 2 }),
    rec('step', 'agent:s1', { seat: 's1' }),
    rec('step', 'agent:s2/model/0', { seat: 's2', usage: 5 }),
    rec('step', 'agent:s2/model/1', { seat: 'nobody', agent_id: 'agt_b', usage: 9 }),
  ];
  assert.deepEqual(modelUsageByAgent(records, agentOf), { agt_a: 12, agt_b: 5 });
});

test("a failed attempt's usage counts under its input's seat; an ok attempt or a tool attempt counts nothing", () => {
  const records = [
    rec('attempt', 'agent:s2/model/0', { call: 'model', attempt: 1, outcome: 'failed', usage: 4 }, 'sha256:ask'),
    rec('attempt', 'agent:s2/model/0', { call: 'model', attempt: 2, outcome: 'ok' }, 'sha256:ask'),
    rec('attempt', 'tool:x', { call: 'tool', attempt: 1, outcome: 'failed', usage: 100 }, 'sha256:ask'),
  ];
  assert.deepEqual(
    modelUsageByAgent(records, agentOf, (h) => (h === 'sha256:ask' ? { seat: 's2' } : undefined)),
    { agt_b: 4 },
  );
  assert.deepEqual(modelUsageByAgent(records, agentOf), {}, 'no input, no seat: nobody to charge');
});

test("a fork's copies of its parent's records count nothing (the parent's run spent them)", () => {
  const reused = { run_id: 'run_0', seq: 2, record_hash: `sha256:${'0'.repeat(64)}` };
  const records = [
    rec('forked', 'run', { from: reused }),
    rec('step', 'agent:s1/model/0', { seat: 's1', agent_id: 'agt_a', usage: 7, reused }),
    rec('step', 'agent:s2/model/0', { seat: 's2', agent_id: 'agt_b', usage: 6 }),
  ];
  assert.deepEqual(modelUsageByAgent(records, agentOf), { agt_b: 6 });
});
