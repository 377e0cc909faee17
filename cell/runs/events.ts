/**
 * The run event stream: an in-process bus fed by appendJournal/finishRun.
 * An event IS a sealed journal record (core/journal/record.ts); its `seq` is
 * the event id. Crew runs and job runs share it.
 *
 * `subscribe(cell, runId, afterSeq, onEvent)` first replays the durable
 * records with seq > afterSeq from the journal table, then delivers live ones,
 * each exactly once and in seq order (a per-subscriber high-water mark drops
 * anything already delivered), so resuming from a Last-Event-ID neither loses
 * nor duplicates events. It returns the unsubscribe function.
 */
import type { JournalRecord } from '../../core/journal/record.ts';
import type { Cell } from '../context.ts';

export type RunEventListener = (rec: JournalRecord) => void;

interface Subscriber { high: number; fn: RunEventListener }

const buses = new WeakMap<Cell, Map<string, Set<Subscriber>>>();

function busOf(cell: Cell): Map<string, Set<Subscriber>> {
  let b = buses.get(cell);
  if (!b) { b = new Map(); buses.set(cell, b); }
  return b;
}

function deliver(s: Subscriber, rec: JournalRecord, log: Cell['log']): void {
  if (rec.seq <= s.high) return;
  s.high = rec.seq;
  try {
    s.fn(rec);
  } catch (err) {
    log.warn('run event listener threw', { run_id: rec.run_id, seq: rec.seq, error: err instanceof Error ? err.message : String(err) });
  }
}

/** Publishes a durable record to the run's live subscribers (called by journal.ts only). */
export function publish(cell: Cell, rec: JournalRecord): void {
  const subs = busOf(cell).get(rec.run_id);
  if (!subs) return;
  for (const s of [...subs]) deliver(s, rec, cell.log);
}

/**
 * Subscribes to a run's events after `afterSeq` (0 = from the start): the
 * backlog is delivered synchronously before this returns, then live events.
 */
export function subscribe(cell: Cell, runId: string, afterSeq: number, onEvent: RunEventListener): () => void {
  const bus = busOf(cell);
  let subs = bus.get(runId);
  if (!subs) { subs = new Set(); bus.set(runId, subs); }
  const s: Subscriber = { high: afterSeq, fn: onEvent };
  subs.add(s);
  // Backlog after registering: a record committed in between is either in the
  // table (read here) or published later; the high-water mark drops the twin.
  const rows = cell.store.all<{ record: string }>('SELECT record FROM journal WHERE run_id = ? AND seq > ? ORDER BY seq', [runId, afterSeq]);
  for (const r of rows) deliver(s, JSON.parse(r.record) as JournalRecord, cell.log);
  return () => {
    const set = bus.get(runId);
    if (!set) return;
    set.delete(s);
    if (set.size === 0) bus.delete(runId);
  };
}

/** Number of live subscribers of a run (tests, metrics). */
export function subscriberCount(cell: Cell, runId: string): number {
  return busOf(cell).get(runId)?.size ?? 0;
}
