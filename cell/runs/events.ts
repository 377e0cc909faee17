/**
 * The run event stream: an in-process bus fed by appendJournal/finishRun.
 * An event IS a sealed journal record (core/journal/record.ts); its `seq` is
 * the event id. Crew runs and job runs share it.
 *
 * `subscribe(ctx, runId, afterSeq, onEvent)` first replays the durable
 * records with seq > afterSeq from the journal table, then delivers live ones,
 * each exactly once and in seq order (a per-subscriber high-water mark drops
 * anything already delivered; live records published while the backlog is
 * being read are held back and delivered after it), so resuming from a
 * Last-Event-ID neither loses nor duplicates events. It resolves, once the
 * backlog is delivered, with the unsubscribe function.
 *
 * Live tokens: `publishDelta` hands a model step's fragments (the engine's
 * `delta` port, bound by drive.ts) to the subscribers that asked for them. They
 * are not journal records (no seq): a subscriber gets the deltas published
 * after its backlog, first the answer so far of each step in flight as one
 * delta per part, then each new one. Deltas exist only on the cell that drives
 * the run: a subscriber on another cell of the group follows the records
 * (catchUpRemote), whose step record carries the whole answer.
 */
import { LiveAnswers } from '../../core/engine/live-answers.ts';
import type { StepDelta } from '../../core/engine/types.ts';
import type { JournalRecord } from '../../core/journal/record.ts';
import type { Logger } from '../context.ts';
import type { DeltaEvent, RunDeltaListener, RunEventListener, RunsContext, Subscriber } from './context.ts';
import { records } from './repository.ts';

export type { DeltaEvent, RunDeltaListener, RunEventListener } from './context.ts';

/** Kind of a run's last record (journal.ts TERMINAL_KIND; spelled here so events.ts imports nothing of journal.ts). */
const TERMINAL_KIND = 'run_finished';

function deliver(s: Subscriber, rec: JournalRecord, log: Logger): void {
  if (rec.seq <= s.high) return;
  s.high = rec.seq;
  try {
    s.fn(rec);
  } catch (err) {
    log.warn('run event listener threw', { run_id: rec.run_id, seq: rec.seq, error: err });
  }
}

/** Publishes a durable record to the run's live subscribers (called by journal.ts only). */
export function publish(ctx: RunsContext, rec: JournalRecord): void {
  // The record of a model step ends its live answer (the record carries it whole); the run's end ends them all.
  const live = ctx.live.get(rec.run_id);
  if (live !== undefined) {
    if (rec.kind !== 'intent') live.end(rec.step_id);
    if (rec.kind === TERMINAL_KIND || live.size === 0) ctx.live.delete(rec.run_id);
  }
  const subs = ctx.bus.get(rec.run_id);
  if (!subs) return;
  // A Set iterated while a listener unsubscribes skips the removed one: no copy per record.
  for (const s of subs) {
    if (s.held) s.held.push(rec);
    else deliver(s, rec, ctx.core.log);
  }
}

/** Publishes a live fragment of a model step of a run this cell drives (drive.ts binds it as the engine's delta port). */
export function publishDelta(ctx: RunsContext, runId: string, d: StepDelta): void {
  let live = ctx.live.get(runId);
  if (live === undefined) {
    live = new LiveAnswers();
    ctx.live.set(runId, live);
  }
  live.apply(d);
  const subs = ctx.bus.get(runId);
  if (!subs) return;
  const ev: DeltaEvent = { kind: 'delta', data: d };
  for (const s of subs) if (s.delta !== null) sendDelta(s, ev, ctx.core.log);
}

function sendDelta(s: Subscriber, ev: DeltaEvent, log: Logger): void {
  try {
    s.delta!(ev);
  } catch (err) {
    log.warn('run delta listener threw', { step_id: ev.data.step_id, error: err });
  }
}

/**
 * Subscribes to a run's events after `afterSeq` (0 = from the start): the
 * backlog is delivered before the returned promise resolves, then live events.
 */
export async function subscribe(
  ctx: RunsContext,
  runId: string,
  afterSeq: number,
  onEvent: RunEventListener,
  onDelta?: RunDeltaListener,
): Promise<() => void> {
  const bus = ctx.bus;
  let subs = bus.get(runId);
  if (!subs) {
    subs = new Set();
    bus.set(runId, subs);
  }
  const s: Subscriber = { high: afterSeq, fn: onEvent, held: [], delta: null };
  subs.add(s);
  const unsubscribe = () => {
    const set = bus.get(runId);
    if (!set) return;
    set.delete(s);
    if (set.size === 0) bus.delete(runId);
  };
  // Backlog after registering: a record committed in between is either in the
  // table (read here) or held back; the high-water mark drops the twin.
  try {
    for (const rec of await records(ctx.core.store, runId, afterSeq, Number.MAX_SAFE_INTEGER)) deliver(s, rec, ctx.core.log);
  } catch (err) {
    unsubscribe();
    throw err;
  }
  const held = s.held ?? [];
  s.held = null;
  for (const rec of held.sort((a, b) => a.seq - b.seq)) deliver(s, rec, ctx.core.log);
  // Deltas from here on: first the answer so far of each step in flight (synchronously, so none is missed between).
  if (onDelta !== undefined) {
    s.delta = onDelta;
    for (const d of ctx.live.get(runId)?.catchUp() ?? []) sendDelta(s, { kind: 'delta', data: d }, ctx.core.log);
  }
  return unsubscribe;
}

/**
 * Delivers records other cells of the group appended (the store heard a remote
 * change to the journal): for each run with subscribers here that the change
 * names (`runIds`, the notification's subjects; absent: every run followed
 * here), the records after the lowest high-water mark are read and published;
 * each subscriber's mark drops what it already has. So a client on this cell
 * follows a run executing on another one, with the journal seq as the event
 * id, and the appends of runs nobody here follows cost no read. One catch-up
 * at a time; runs named meanwhile are read after it.
 */
export function catchUpRemote(ctx: RunsContext, runIds?: ReadonlySet<string>): Promise<void> {
  if (runIds === undefined) ctx.catchUpPending = 'all';
  else if (ctx.catchUpPending !== 'all')
    for (const id of runIds) {
      if (!ctx.bus.has(id)) continue;
      ctx.catchUpPending ??= new Set();
      ctx.catchUpPending.add(id);
    }
  if (ctx.catchingUp) return ctx.catchingUp;
  if (ctx.catchUpPending === null) return Promise.resolve();
  const p = (async () => {
    while (ctx.catchUpPending !== null) {
      const want = ctx.catchUpPending;
      ctx.catchUpPending = null;
      for (const runId of want === 'all' ? [...ctx.bus.keys()] : want) {
        const subs = ctx.bus.get(runId);
        if (!subs) continue;
        let low = Number.MAX_SAFE_INTEGER;
        for (const s of subs) if (s.held === null) low = Math.min(low, s.high);
        if (low === Number.MAX_SAFE_INTEGER) continue;
        for (const rec of await records(ctx.core.store, runId, low, 10_000)) publish(ctx, rec);
      }
    }
  })().finally(() => {
    ctx.catchingUp = null;
  });
  ctx.catchingUp = p;
  return p;
}

/** Number of live subscribers of a run (tests, metrics). */
export function subscriberCount(ctx: RunsContext, runId: string): number {
  return ctx.bus.get(runId)?.size ?? 0;
}
