/**
 * The model tokens a journal's records say each agent spent: what the engine counts against a seat
 * (core/engine/internal/model.ts: a call's answer usage, plus `failed_usage`, what the port's own failed
 * attempts consumed before it; a failed attempt under a retry policy its `attempt` record's `usage`).
 * A resumed run rebuilds `ctx.spent(seat)` from the same records (the recorded answers' usage), and a
 * device adds each call's tokens to its agent's spending as it commits them; the cell charges a device's
 * journal to the ledgers with this sum (cell/edge/journal-import.ts).
 *
 * A fork's records copied from its parent (`data.reused`) were spent by the parent's run, so they count
 * nothing here. A record's agent is its seat's (`agentOfSeat`, from the graph the run ran), never the
 * agent the record names (`data.agent_id`: a device's word could name any agent of the cell); a record
 * whose seat the graph does not know is nobody's. An attempt record names no seat, so its seat is its
 * input's (`inputOf`, the journal's values).
 */
import type { JournalRecord } from './record.ts';

const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : 0);
const strOrNull = (v: unknown): string | null => (typeof v === 'string' && v.length > 0 ? v : null);

/** Tokens by agent id that `records` spent on model calls (records copied from a fork's parent excluded). */
export function modelUsageByAgent(
  records: readonly JournalRecord[],
  agentOfSeat: (seat: string) => string | null,
  inputOf: (hash: string) => unknown = () => undefined,
): Record<string, number> {
  const out: Record<string, number> = {};
  const add = (agent: string | null, tokens: number) => {
    if (agent !== null && tokens > 0) out[agent] = (out[agent] ?? 0) + tokens;
  };
  for (const r of records) {
    const d = r.data;
    if (d === undefined || d['reused'] !== undefined) continue;
    if (r.kind === 'step' && r.step_id.includes('/model/')) {
      const seat = strOrNull(d['seat']);
      add(seat !== null ? agentOfSeat(seat) : null, num(d['usage']) + num(d['failed_usage']));
    } else if (r.kind === 'attempt' && d['call'] === 'model' && num(d['usage']) > 0) {
      const input = inputOf(r.input_hash);
      const seat = typeof input === 'object' && input !== null ? strOrNull((input as Record<string, unknown>)['seat']) : null;
      add(seat !== null ? agentOfSeat(seat) : null, num(d['usage']));
    }
  }
  return out;
}
