/**
 * W3C Trace Context (`traceparent`): a request that carries a valid one is
 * handled inside its trace, so what the request starts can name it: the
 * access-log line (`trace_id`), the model provider calls it makes (each sent
 * with a `traceparent` of the same trace and a new span id) and the journal
 * records of the runs it starts or drives (`data.traceparent`), so a run can
 * be followed from the request that started it. An invalid header is
 * ignored (the spec's rule for a receiver that cannot parse it).
 *
 * One RequestTraces per cell (cell/server.ts puts it in the CellCore).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';

export interface Trace {
  /** 32 lower-case hex digits. */
  traceId: string;
  /** The caller's span, 16 lower-case hex digits. */
  parentId: string;
  /** Trace flags, 2 hex digits (01: sampled). */
  flags: string;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** The trace a `traceparent` header names, or null when it is absent or invalid. */
export function parseTraceparent(header: string | undefined): Trace | null {
  if (!header || header.length > 512) return null;
  const m = TRACEPARENT.exec(header.trim());
  if (!m) return null;
  const [, version, traceId, parentId, flags, rest] = m as unknown as [string, string, string, string, string, string | undefined];
  // Version ff is invalid; version 00 has nothing after the flags.
  if (version === 'ff' || (version === '00' && rest !== undefined)) return null;
  if (/^0+$/.test(traceId) || /^0+$/.test(parentId)) return null;
  return { traceId, parentId, flags };
}

export class RequestTraces {
  readonly #als = new AsyncLocalStorage<Trace>();

  /** Runs `fn` inside `trace`: everything it starts, now or later, sees it. */
  run<T>(trace: Trace, fn: () => T): T {
    return this.#als.run(trace, fn);
  }

  /** Runs `fn` outside any request's trace (work of the cell's own, e.g. a scheduled fire). */
  detached<T>(fn: () => T): T {
    return this.#als.exit(fn);
  }

  /** The trace of the request this code runs for, if it carried one. */
  current(): Trace | undefined {
    return this.#als.getStore();
  }

  /** The current trace as it was received (journal records name it), or undefined. */
  traceparent(): string | undefined {
    const t = this.#als.getStore();
    return t ? `00-${t.traceId}-${t.parentId}-${t.flags}` : undefined;
  }

  /** A `traceparent` for a call this code makes: the same trace, a new span id; undefined outside a trace. */
  outgoing(): string | undefined {
    const t = this.#als.getStore();
    return t ? `00-${t.traceId}-${randomBytes(8).toString('hex')}-${t.flags}` : undefined;
  }
}
