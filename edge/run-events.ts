/**
 * The event stream of offline runs at the edge, as the cell serves it:
 *   GET /api/public/v1/admin/jobs/runs/{run_id}/events/sse   system.orchestration.admin.read
 * Each journal record is a frame with `id:` its seq and `event:` its kind;
 * live tokens of model steps are `event: delta` frames without `id:` (the
 * local model's token callback); a client joining mid-step first gets the
 * answer so far (core/engine/live-answers.ts). Resume with Last-Event-ID
 * (records only). The stream closes after `run_finished`; a finished run with
 * nothing after Last-Event-ID answers 204.
 */
import type { Hono, MiddlewareHandler } from 'hono';
import { streamSSE } from 'hono/streaming';
import { notFound } from '../core/errors.ts';
import { LiveAnswers } from '../core/engine/live-answers.ts';
import type { StepDelta } from '../core/engine/types.ts';
import type { JournalRecord } from '../core/journal/record.ts';
import { PERMISSIONS } from '../core/permissions.ts';
import type { EdgeEnv } from './gateway.ts';

type Sink = (frame: string, last: boolean) => void;

interface ActiveRun {
  records: readonly JournalRecord[];
  live: LiveAnswers;
  subs: Set<Sink>;
  watchers: Set<Watcher>;
}

/** What follows a run's records as they are (the MCP endpoint, edge/mcp.ts): each record, each delta, and the drive's end. */
export interface Watcher {
  record(rec: JournalRecord): void;
  delta?(d: StepDelta): void;
  /** The drive ended (the run finished, or waits, or failed outside the engine). */
  end(): void;
}

const recordFrame = (r: JournalRecord) => `event: ${r.kind}\ndata: ${JSON.stringify(r)}\nid: ${r.seq}\n\n`;
const deltaFrame = (d: StepDelta) => `event: delta\ndata: ${JSON.stringify(d)}\n\n`;

/** The runs this device drives now, with their subscribers. */
export class RunStreams {
  private readonly active = new Map<string, ActiveRun>();

  /** A drive starts: `records` is the run's journal as it grows. */
  begin(runId: string, records: readonly JournalRecord[]): void {
    this.active.set(runId, { records, live: new LiveAnswers(), subs: new Set(), watchers: new Set() });
  }

  /** A record was appended to the run's journal. */
  record(runId: string, rec: JournalRecord): void {
    const a = this.active.get(runId);
    if (a === undefined) return;
    if (rec.kind !== 'intent') a.live.end(rec.step_id);
    const last = rec.kind === 'run_finished';
    for (const w of a.watchers) w.record(rec);
    if (a.subs.size === 0) return;
    const frame = recordFrame(rec);
    for (const s of a.subs) s(frame, last);
  }

  /** A live fragment of a model step (the engine's delta port). */
  delta(runId: string, d: StepDelta): void {
    const a = this.active.get(runId);
    if (a === undefined) return;
    a.live.apply(d);
    for (const w of a.watchers) w.delta?.(d);
    if (a.subs.size === 0) return;
    const frame = deltaFrame(d);
    for (const s of a.subs) s(frame, false);
  }

  /** The drive ended (finished, waiting, or failed outside the engine): its streams close. */
  end(runId: string): void {
    const a = this.active.get(runId);
    if (a === undefined) return;
    this.active.delete(runId);
    for (const s of a.subs) s('', true);
    for (const w of a.watchers) w.end();
  }

  /**
   * Follows a run being driven: its records so far at once, then each new one, and the drive's end.
   * Undefined when the run is not being driven here.
   */
  watch(runId: string, w: Watcher): (() => void) | undefined {
    const a = this.active.get(runId);
    if (a === undefined) return undefined;
    for (const r of a.records) w.record(r);
    a.watchers.add(w);
    return () => a.watchers.delete(w);
  }

  /**
   * Subscribes to a run being driven after `after`: the backlog and the answers so far are handed
   * to `sink` at once, then live frames. Undefined when the run is not being driven here.
   */
  subscribe(runId: string, after: number, sink: Sink): (() => void) | undefined {
    const a = this.active.get(runId);
    if (a === undefined) return undefined;
    for (const r of a.records) if (r.seq > after) sink(recordFrame(r), r.kind === 'run_finished');
    for (const d of a.live.catchUp()) sink(deltaFrame(d), false);
    a.subs.add(sink);
    return () => a.subs.delete(sink);
  }
}

function lastEventId(h: string | undefined, q: string | undefined): number {
  const v = (h ?? q ?? '').trim();
  const n = Number(v);
  return v !== '' && Number.isSafeInteger(n) && n >= 0 ? n : 0;
}

/** Mounts the SSE route; `journalOf` reads a run's journal from disk (undefined: no such run). */
export function mountRunEvents(
  app: Hono<EdgeEnv>,
  guard: (p: string) => MiddlewareHandler<EdgeEnv>,
  streams: RunStreams,
  journalOf: (runId: string) => readonly JournalRecord[] | undefined,
): void {
  app.get('/api/public/v1/admin/jobs/runs/:run_id/events/sse', guard(PERMISSIONS.jobsRead), (c) => {
    const runId = c.req.param('run_id');
    const records = journalOf(runId);
    if (records === undefined) throw notFound('run');
    const after = lastEventId(c.req.header('last-event-id'), c.req.query('last_event_id'));
    const finished = records.at(-1)?.kind === 'run_finished';
    if (finished && records.length <= after) return c.body(null, 204);
    return streamSSE(c, async (stream) => {
      let writing: Promise<unknown> = stream.write('retry: 1000\n\n');
      let unsubscribe: (() => void) | undefined;
      const ended = new Promise<void>((resolve) => {
        let closed = false;
        const close = () => {
          if (closed) return;
          closed = true;
          unsubscribe?.();
          void writing.then(() => resolve());
        };
        stream.onAbort(close);
        const sink: Sink = (frame, last) => {
          if (closed) return;
          if (frame !== '') writing = writing.then(() => stream.write(frame));
          if (last) close();
        };
        unsubscribe = streams.subscribe(runId, after, sink);
        if (closed) unsubscribe?.();
        if (unsubscribe === undefined) {
          // Not driven here now: the journal on disk, then the stream ends.
          for (const r of journalOf(runId) ?? []) if (r.seq > after) sink(recordFrame(r), false);
          close();
        }
      });
      await ended;
    });
  });
}
