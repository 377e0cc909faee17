/**
 * Whether a journal is the journal of a completed run of a graph: its recorded
 * steps, replayed through this engine with no port that can act (a model, tool
 * or approval call, a budget reservation: each refused), complete the run with
 * the recorded output, and the replay appends nothing but the run's end. A
 * journal that says `completed` but lacks a step the graph runs (one cut short
 * and ended by hand) fails: the replay reaches the missing step and cannot take
 * it. Used by the cell to judge a journal carried back from a device, whose
 * signer could write any records (docs/edge.md, "Journal export").
 */
import { contentHash } from '../canonical.ts';
import type { JournalRecord } from '../journal/record.ts';
import { recordedFrom } from '../journal/recorded.ts';
import { runGraph } from './run.ts';
import type { EnginePorts, Graph, JournalAppend } from './types.ts';

export type ReplayVerdict = { ok: true } | { ok: false; problem: string };

/** Replays `records` (a verified journal) on `graph`; `blob(hash)` gives a recorded value or undefined. */
export async function replaysToCompletion(
  graph: Graph,
  records: readonly JournalRecord[],
  blob: (hash: string) => unknown,
): Promise<ReplayVerdict> {
  const started = records.find((r) => r.kind === 'run_started');
  const end = records.at(-1);
  if (started === undefined) return { ok: false, problem: 'the journal has no run_started record' };
  if (end?.kind !== 'run_finished') return { ok: false, problem: 'the journal does not end with run_finished' };
  const input = blob(started.input_hash);
  if (input === undefined) return { ok: false, problem: "the run's input is not among the values" };
  const requester = started.data?.['requester'];
  const refused = (what: string) => () => {
    throw new Error(`replay: ${what} is not recorded`);
  };
  const appended: JournalAppend[] = [];
  const recorded = recordedFrom(records, blob);
  const ports: EnginePorts = {
    // The run's own end time: a timer or a retry's due time recorded before it has passed.
    clock: { now: () => end.at },
    model: { complete: refused('a model call') },
    tools: { describe: () => undefined, call: refused('a tool call') },
    approvals: { decisions: refused('an approval') },
    budget: { hasLedger: async () => true, reserve: refused('a budget reservation'), commit: refused('a budget commit') },
    journal: { append: async (f) => void appended.push(f) },
    recorded: async (id) => recorded(id),
  };
  const r = await runGraph(graph, input, ports, {
    run_id: started.run_id,
    graph_hash: started.graph_hash,
    requester: typeof requester === 'string' ? requester : '',
  });
  if (r.outcome !== 'completed') return { ok: false, problem: `the recorded steps do not complete the run (${r.reason ?? r.outcome})` };
  if (appended.length !== 1 || appended[0]!.kind !== 'run_finished')
    return { ok: false, problem: 'the replay needed steps the journal does not record' };
  if (contentHash(r.output) !== end.output_hash || appended[0]!.input_hash !== end.input_hash)
    return { ok: false, problem: "the run's end does not record the output its steps give" };
  return { ok: true };
}
