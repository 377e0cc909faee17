/**
 * The writer of a run's Server-Sent Events stream (routes.ts mounts it): the
 * frames, and the loop that subscribes to the run and writes them.
 *
 * The path is hot (hundreds of subscribers on one run, a delta per model
 * token), so each frame is serialised and encoded once and the same bytes are
 * handed to every subscriber (the bus hands each the same record or delta
 * object), and, served by @hono/node-server, a frame is one `write` on
 * node:http's response: no web stream, no promise per frame per subscriber.
 * In process (`app.request`, no node:http response) the same loop writes
 * through hono's streamSSE.
 *
 * Records: `id:` seq, `event:` kind, `data:` the record. Deltas: `event: delta`,
 * `data:` the StepDelta, and no `id:` (they are not journal records, so a
 * client resuming with Last-Event-ID gets records only, and the answer whole
 * in the step record). The stream is authorized when it opens (the route's
 * permission), and its credential is judged again while it is open: whenever
 * the store reports a change that may revoke or narrow a credential (on any
 * cell of the group, within the second revocations take to reach every cell)
 * and at every heartbeat (an expiry, a missed notification). Once refused, or
 * without the route's permission any more, the stream ends with a `closed`
 * event whose data is the error envelope.
 */
import type { ServerResponse } from 'node:http';
import type { SSEStreamingApi } from 'hono/streaming';
import { grants } from '../../core/authority/scopes.ts';
import { isServiceError } from '../../core/errors.ts';
import type { JournalRecord } from '../../core/journal/record.ts';
import type { AuthContext } from '../context.ts';
import type { Change } from '../store/types.ts';
import type { DeltaEvent, RunsContext } from './context.ts';
import { subscribe } from './events.ts';
import { recordText } from './internal/record-text.ts';

/** Kind of the last record of a run: the stream closes after it. */
const TERMINAL_KIND = 'run_finished';

/**
 * The least time between two writes of one stream served by node:http (ms), one frame of a 60 Hz
 * display: a run's steps (and a streamed answer's deltas) that come faster than that reach the
 * client in one write, and wake it once, rather than a write and a wake-up each (bench/RESULTS.md
 * stop 37: the peers bench's lone run and its 16 runs at once both went faster). A run's last
 * frames are not held: the stream's close writes them at once.
 */
export const MIN_WRITE_GAP_MS = 16;

/** Bytes buffered for one slow client (node:http) before its stream is closed (it resumes with Last-Event-ID). */
export const MAX_PENDING_BYTES = 16 * 1024 * 1024;
/** Frames buffered for one slow client (in process) before its stream is closed. */
export const MAX_PENDING_EVENTS = 100_000;

const encoder = new TextEncoder();
const frames = new WeakMap<object, Uint8Array>();

/** The SSE frame of a record, encoded once however many subscribers write it. */
export function recordFrame(rec: JournalRecord): Uint8Array {
  let f = frames.get(rec);
  if (f === undefined) {
    if (/[\r\n]/.test(rec.kind)) throw new Error('event must not contain "\\r" or "\\n"');
    f = encoder.encode(`${rec.kind ? `event: ${rec.kind}\n` : ''}data: ${recordText(rec)}\nid: ${rec.seq}\n\n`);
    frames.set(rec, f);
  }
  return f;
}

/** The SSE frame of a delta: no `id:` line. Encoded once per delta. */
export function deltaFrame(ev: DeltaEvent): Uint8Array {
  let f = frames.get(ev);
  if (f === undefined) {
    f = encoder.encode(`event: delta\ndata: ${JSON.stringify(ev.data)}\n\n`);
    frames.set(ev, f);
  }
  return f;
}

/** Where a stream's bytes go. */
export interface SseSink {
  write(chunk: Uint8Array | string): void;
  /** True when the client has fallen too far behind (its stream is then closed). */
  behind(): boolean;
  /** Ends the stream after what was written. */
  close(): void;
  /** Resolves when the stream ended (closed here, or by the client). */
  readonly ended: Promise<void>;
  readonly isClosed: () => boolean;
}

/**
 * A sink on node:http's response: the SSE head, then the frames, written together once per turn of
 * the event loop, after the I/O that turn started. A run's driver publishes a record and goes on to
 * its next model call or append, which node's HTTP client and the journal's group commit send from
 * the check phase (setImmediate); the frames are written after them, while that call is in flight,
 * rather than on the path that decides when it starts: from an immediate that the first frame's
 * immediate schedules, so in the loop's next check phase, after every immediate the publishing turn
 * scheduled, whether it published from a callback or a promise's continuation. At most one write
 * every MIN_WRITE_GAP_MS: frames published sooner after the last write wait for the rest of that
 * interval and leave together. Closing writes what is pending first, at once.
 */
export function nodeSink(out: ServerResponse): SseSink {
  let pending: (Uint8Array | string)[] = [];
  let pendingBytes = 0;
  let scheduled = false;
  let timer: ReturnType<typeof setTimeout> | null = null;
  let lastWrite = Number.NEGATIVE_INFINITY;
  const flush = () => {
    scheduled = false;
    if (timer) clearTimeout(timer);
    timer = null;
    if (pending.length === 0) return;
    lastWrite = performance.now();
    const chunks = pending;
    pending = [];
    pendingBytes = 0;
    if (out.writableEnded || out.destroyed) return;
    // One write: one chunk of the response, one system call.
    out.write(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks.map((c) => (typeof c === 'string' ? Buffer.from(c) : c))));
  };
  // An immediate scheduled from an immediate runs in the loop's next check phase.
  const later = () => setImmediate(flush);
  let closed = false;
  let done!: () => void;
  const ended = new Promise<void>((r) => {
    done = r;
  });
  const finish = () => {
    if (closed) return;
    closed = true;
    // A client gone: nothing held is written any more.
    if (timer) clearTimeout(timer);
    timer = null;
    done();
  };
  out.statusCode = 200;
  out.setHeader('content-type', 'text/event-stream');
  out.setHeader('cache-control', 'no-cache');
  out.setHeader('connection', 'keep-alive');
  out.setHeader('x-accel-buffering', 'no');
  out.on('close', finish);
  out.on('error', finish);
  return {
    write(chunk) {
      if (closed) return;
      pending.push(chunk);
      pendingBytes += chunk.length;
      if (!scheduled) {
        scheduled = true;
        const wait = lastWrite + MIN_WRITE_GAP_MS - performance.now();
        if (wait <= 0) setImmediate(later);
        else timer = setTimeout(flush, wait);
      }
    },
    behind: () => out.writableLength + pendingBytes > MAX_PENDING_BYTES,
    close() {
      if (closed) return;
      flush();
      out.end();
      finish();
    },
    ended,
    isClosed: () => closed,
  };
}

/** A sink on hono's streamSSE (in process): writes chained in order, counted while pending. */
export function webSink(stream: SSEStreamingApi, signal: AbortSignal | undefined): SseSink {
  let closed = false;
  let pending = 0;
  let writing: Promise<unknown> = Promise.resolve();
  let done!: () => void;
  const ended = new Promise<void>((r) => {
    done = r;
  });
  const finish = () => {
    if (closed) return;
    closed = true;
    void writing.then(done);
  };
  stream.onAbort(finish);
  signal?.addEventListener('abort', finish);
  return {
    write(chunk) {
      if (closed) return;
      pending++;
      writing = writing
        .then(() => stream.write(chunk))
        .then(() => {
          pending--;
        });
    },
    behind: () => pending > MAX_PENDING_EVENTS,
    close: finish,
    ended,
    isClosed: () => closed,
  };
}

/** How a stream keeps judging the credential that opened it (the gateway's CredentialCheck, bound to the request). */
export interface StreamCredential {
  /** The credential judged again now; throws its refusal. */
  recheck(): Promise<AuthContext>;
  /** Whether a change may have revoked or narrowed it. */
  concerns(change: Change): boolean;
  /** The route's permission: the credential must still grant it (absent: only that it is still honoured). */
  permission?: string | undefined;
}

/** The last frame of a stream whose credential was refused: `event: closed`, the error envelope, no `id:`. */
export function closedFrame(error: { code: string; message: string; details?: Record<string, unknown> | undefined }): string {
  const body = { error: error.code, message: error.message, ...(error.details ? { details: error.details } : {}) };
  return `event: closed\ndata: ${JSON.stringify(body)}\n\n`;
}

/**
 * Judges `credential` again whenever `trigger()` is called (at most one judgement at a time; triggers
 * meanwhile make one more after it), and calls `refused` once with the refusal when it is refused or no
 * longer permitted (the run event stream here; an MCP call that follows a run, cell/mcp/follow.ts). A judgement
 * that fails for another reason (the store unavailable) refuses nothing:
 * the next trigger judges again.
 */
export function credentialWatch(
  credential: StreamCredential,
  refused: (e: { code: string; message: string; details?: Record<string, unknown> }) => void,
): { trigger(): void } {
  let running = false;
  let again = false;
  let done = false;
  const judge = async (): Promise<void> => {
    running = true;
    do {
      again = false;
      try {
        const auth = await credential.recheck();
        if (credential.permission !== undefined && !grants(auth.effective, credential.permission)) {
          done = true;
          // As the route's gate refuses a credential without its permission.
          refused({
            code: 'forbidden',
            message: `the credential lacks the permission ${credential.permission}`,
            details: { required_permission: credential.permission },
          });
        }
      } catch (e) {
        if (isServiceError(e) && (e.code === 'unauthorized' || e.code === 'forbidden')) {
          done = true;
          refused({ code: e.code, message: e.message, ...(e.details ? { details: e.details } : {}) });
        }
      }
    } while (again && !done);
    running = false;
  };
  return {
    trigger() {
      if (done) return;
      if (running) again = true;
      else void judge();
    },
  };
}

/**
 * Streams run `runId` after `after` into `sink` until it ends: `retry:`, the
 * backlog of records, the answer so far of model steps in flight, then live
 * records and deltas; heartbeats while idle. `isExhausted` tells whether the
 * run has nothing more to say after `after` (then the stream closes at once).
 */
export async function streamRun(
  ctx: RunsContext,
  runId: string,
  after: number,
  sink: SseSink,
  opts: { heartbeatMs: number; isExhausted: () => Promise<boolean>; credential?: StreamCredential },
): Promise<void> {
  const send = (rec: JournalRecord) => {
    if (sink.isClosed()) return;
    // A client that stops reading is cut off rather than buffered without bound; it resumes with Last-Event-ID.
    if (sink.behind()) return sink.close();
    sink.write(recordFrame(rec));
    if (rec.kind === TERMINAL_KIND) sink.close();
  };
  const sendDelta = (ev: DeltaEvent) => {
    if (sink.isClosed()) return;
    if (sink.behind()) return sink.close();
    sink.write(deltaFrame(ev));
  };
  sink.write('retry: 1000\n\n');
  const unsubscribe = await subscribe(ctx, runId, after, send, sendDelta);
  ctx.metrics.sseSubscribers.inc();
  const credential = opts.credential;
  const watch = credential
    ? credentialWatch(credential, (e) => {
        if (sink.isClosed()) return;
        sink.write(closedFrame(e));
        sink.close();
      })
    : undefined;
  const unwatch = credential && watch ? ctx.core.store.onChange((c) => credential.concerns(c) && watch.trigger()) : undefined;
  const hb = setInterval(() => {
    sink.write(': heartbeat\n\n');
    watch?.trigger();
  }, opts.heartbeatMs);
  hb.unref?.();
  try {
    if (!sink.isClosed() && (await opts.isExhausted())) sink.close();
    await sink.ended;
  } finally {
    clearInterval(hb);
    unwatch?.();
    unsubscribe();
    ctx.metrics.sseSubscribers.dec();
  }
}
