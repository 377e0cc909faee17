/**
 * Server-Sent Events over `fetch`, because an EventSource cannot send an
 * Authorization header (nor a fresh DPoP proof per request). Two parts:
 *
 * - `SseParser`: the event-stream format of the HTML standard (§9.2.6):
 *   lines end with CRLF, LF or CR (also when split across chunks); `:`
 *   starts a comment (the cell's heartbeats); `data` lines join with `\n`;
 *   `id` sets the last event id (kept across events), `retry` the reconnection
 *   delay; an event without data is not dispatched.
 * - `follow`: reads a stream, reconnects with `Last-Event-ID` when it ends or
 *   breaks (after the server's `retry`, backing off on repeated failures), and
 *   stops on 204, on a refusal (the error reaches `onError`), when `onEvent`
 *   returns `'stop'`, or when the signal aborts.
 */

export interface SseEvent {
  id: string;
  event: string;
  data: string;
}

export class SseParser {
  #buf = '';
  #pendingCr = false;
  #data: string[] = [];
  #event = '';
  /** The last event id seen (the id of the stream, carried across events). */
  lastEventId = '';
  /** The reconnection delay the server asked for, ms, or null. */
  retry: number | null = null;

  /** Feeds decoded text; returns the events completed by it. */
  push(text: string): SseEvent[] {
    const out: SseEvent[] = [];
    let s = text;
    if (this.#pendingCr) {
      this.#pendingCr = false;
      if (s.startsWith('\n')) s = s.slice(1);
    }
    this.#buf += s;
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.#buf);
      if (!m) break;
      // A CR at the very end may be the first half of a CRLF split across chunks.
      if (m[0] === '\r' && m.index === this.#buf.length - 1) this.#pendingCr = true;
      const line = this.#buf.slice(0, m.index);
      this.#buf = this.#buf.slice(m.index + m[0].length);
      const ev = this.#line(line);
      if (ev) out.push(ev);
    }
    return out;
  }

  #line(line: string): SseEvent | null {
    if (line === '') {
      if (this.#data.length === 0) {
        this.#event = '';
        return null;
      }
      const ev = { id: this.lastEventId, event: this.#event || 'message', data: this.#data.join('\n') };
      this.#data = [];
      this.#event = '';
      return ev;
    }
    if (line.startsWith(':')) return null;
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? '' : line.slice(i + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.#data.push(value);
    else if (field === 'event') this.#event = value;
    else if (field === 'id') {
      if (!value.includes('\0')) this.lastEventId = value;
    } else if (field === 'retry') {
      if (/^\d+$/.test(value)) this.retry = Number(value);
    }
    return null;
  }
}

export interface FollowOptions {
  /** Opens the stream; `lastEventId` is '' on the first request. */
  open(lastEventId: string, signal: AbortSignal): Promise<Response>;
  /** Called for every event; return 'stop' to end. */
  onEvent(ev: SseEvent): undefined | 'stop';
  /** A refusal (non-2xx other than 204) or repeated failures; following ends. */
  onError?(err: unknown): void;
  /** Called each time a connection is (re)established. */
  onOpen?(): void;
  signal: AbortSignal;
  /** Starting Last-Event-ID (resume after a snapshot). */
  lastEventId?: string;
  /** Waits `ms` (tests pass their own). */
  sleep?(ms: number, signal: AbortSignal): Promise<void>;
  /** Consecutive failed connections before giving up (default 8). */
  maxFailures?: number;
}

function defaultSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        resolve();
      },
      { once: true },
    );
  });
}

/** An error response of the stream request: following stops and the caller sees it. */
export class StreamRefused extends Error {
  constructor(readonly response: Response) {
    super(`event stream refused: HTTP ${response.status}`);
    this.name = 'StreamRefused';
  }
}

/** Follows an event stream until it is told to stop; resolves when following ends. */
export async function follow(o: FollowOptions): Promise<void> {
  const sleep = o.sleep ?? defaultSleep;
  const maxFailures = o.maxFailures ?? 8;
  let lastId = o.lastEventId ?? '';
  let retry = 1000;
  let failures = 0;
  while (!o.signal.aborted) {
    let res: Response;
    try {
      res = await o.open(lastId, o.signal);
    } catch (e) {
      if (o.signal.aborted) return;
      if (e instanceof StreamRefused) {
        o.onError?.(e);
        return;
      }
      if (++failures >= maxFailures) {
        o.onError?.(e);
        return;
      }
      await sleep(Math.min(retry * 2 ** (failures - 1), 30_000), o.signal);
      continue;
    }
    if (res.status === 204) return;
    if (!res.ok || !res.body) {
      o.onError?.(new StreamRefused(res));
      return;
    }
    o.onOpen?.();
    const parser = new SseParser();
    parser.lastEventId = lastId;
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let stopped = false;
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        failures = 0;
        for (const ev of parser.push(value)) {
          lastId = parser.lastEventId;
          if (o.onEvent(ev) === 'stop') {
            stopped = true;
            break;
          }
        }
        if (parser.retry !== null) retry = parser.retry;
        if (stopped) break;
      }
    } catch (e) {
      if (o.signal.aborted) return;
      failures++;
      if (failures >= maxFailures) {
        o.onError?.(e);
        return;
      }
    } finally {
      lastId = parser.lastEventId || lastId;
      reader.cancel().catch(() => undefined);
    }
    if (stopped) return;
    await sleep(retry, o.signal);
  }
}
