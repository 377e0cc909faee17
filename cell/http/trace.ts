/**
 * W3C Trace Context (`traceparent`) and the cell's spans. A request that
 * carries a valid `traceparent` is handled inside its trace, so what the
 * request starts can name it: the access-log line (`trace_id`), the model
 * provider calls it makes (each sent with a `traceparent` of the same trace)
 * and the journal records of the runs it starts or drives
 * (`data.traceparent`), so a run can be followed from the request that
 * started it. An invalid header is ignored (the spec's rule for a receiver
 * that cannot parse it).
 *
 * With trace export on (`--otlp-endpoint` / `OTEL_EXPORTER_OTLP_ENDPOINT`,
 * docs/operations.md "Traces"), `span()` opens a span of the current trace
 * through a SpanSink (cell/ops/otel-sink.ts, the OpenTelemetry SDK, loaded
 * only then) and runs its work inside it: spans opened within are its
 * children, and `traceparent()`/`outgoing()` name it. Off, `span()` is a
 * plain call of its work and the SDK is never loaded.
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

/** Attribute values a span takes (OpenTelemetry's primitive values and string arrays). */
export type SpanValue = string | number | boolean | string[];
export type SpanAttributes = Record<string, SpanValue | undefined>;

/** The span a piece of work runs in, as the work sees it. */
export interface SpanScope {
  /** Adds or overwrites attributes (undefined values are left out). */
  set(attributes: SpanAttributes): void;
  /** Ends the span as failed with this error type (`error.type`), whatever the work then does. */
  fail(errorType: string): void;
  /** Marks the span as not failed even if the work throws (a run that stops to wait is not an error). */
  ok(): void;
  /** Renames the span (a request's route template is known once it was routed). */
  rename(name: string): void;
}

/**
 * What the model calls made inside a span add up to: the agent span of a run drive (`invoke_agent`) carries
 * the drive's token usage and the providers it called (the GenAI conventions' `gen_ai.usage.*`,
 * `gen_ai.provider.name`). Opened with SpanOptions.tally; every span within it adds to it.
 */
export interface UsageTally {
  providers: Set<string>;
  inputTokens: number;
  outputTokens: number;
}

export interface SpanOptions {
  kind?: 'internal' | 'server' | 'client';
  /** Counts the model calls made inside this span, and inside the spans within it (`RequestTraces.addUsage`). */
  tally?: UsageTally;
  attributes?: SpanAttributes;
  /** The parent as a `traceparent` (a run's stored trace); default: the span this code runs in. */
  parent?: string | undefined;
  /** Spans this one is linked to (`traceparent`s), e.g. the request that woke a run. */
  links?: string[];
  /** Start time, ms since the epoch (a span recorded after the fact). */
  startTime?: number;
  /** End time, ms since the epoch (a span recorded after the fact). */
  endTime?: number;
}

/** A started span of the SDK (cell/ops/otel-sink.ts). */
export interface SinkSpan extends SpanScope {
  readonly traceId: string;
  readonly spanId: string;
  readonly flags: string;
  /** Records the work's exception (status error unless ok() was called), without its message when it may hold content. */
  thrown(e: unknown): void;
  end(endTime?: number): void;
}

/** What exports spans: the OpenTelemetry SDK with the OTLP/HTTP exporter, batched. */
export interface SpanSink {
  /** Whether prompt and completion text may be put on spans (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT). */
  readonly captureContent: boolean;
  start(name: string, parent: Trace | null, opts: SpanOptions): SinkSpan;
  /** Exports what is batched and stops the exporter (the cell's stop). */
  shutdown(): Promise<void>;
}

const NOOP_SCOPE: SpanScope = { set() {}, fail() {}, ok() {}, rename() {} };

/** The trace this code runs in: the caller's (as received) or, with spans on, the current span. */
interface Active extends Trace {
  /** The span this code runs in, when spans are exported. */
  span?: SinkSpan;
  /** The tally of the nearest span that keeps one (SpanOptions.tally). */
  tally?: UsageTally;
}

export class RequestTraces {
  readonly #als = new AsyncLocalStorage<Active>();
  readonly #sink: SpanSink | null;

  /** `sink`: where spans go; absent, `span()` only runs its work. */
  constructor(sink: SpanSink | null = null) {
    this.#sink = sink;
  }

  /** True when spans are exported. */
  get spans(): boolean {
    return this.#sink !== null;
  }

  /** True when spans may carry prompt and completion text (the operator opted in). */
  get captureContent(): boolean {
    return this.#sink?.captureContent === true;
  }

  /** Runs `fn` inside `trace`: everything it starts, now or later, sees it. */
  run<T>(trace: Trace, fn: () => T): T {
    return this.#als.run(trace, fn);
  }

  /** Runs `fn` outside any request's trace (work of the cell's own, e.g. a scheduled fire). */
  detached<T>(fn: () => T): T {
    return this.#als.exit(fn);
  }

  /** The trace of the request this code runs for, if it carried one (or, with spans on, the trace of the current span). */
  current(): Trace | undefined {
    return this.#als.getStore();
  }

  /**
   * The current trace as journal records name it, or undefined: the header as
   * received, or with spans on the span this code runs in.
   */
  traceparent(): string | undefined {
    const t = this.#als.getStore();
    if (!t) return undefined;
    return t.span ? `00-${t.span.traceId}-${t.span.spanId}-${t.span.flags}` : `00-${t.traceId}-${t.parentId}-${t.flags}`;
  }

  /**
   * A `traceparent` for a call this code makes: the same trace, a new span id
   * (with spans on, the id of the span this code runs in, e.g. the model call's);
   * undefined outside a trace.
   */
  outgoing(): string | undefined {
    const t = this.#als.getStore();
    if (!t) return undefined;
    if (t.span) return `00-${t.span.traceId}-${t.span.spanId}-${t.span.flags}`;
    return `00-${t.traceId}-${randomBytes(8).toString('hex')}-${t.flags}`;
  }

  /**
   * Runs `fn` in a new span, child of `opts.parent` or of the span this code
   * runs in; ends it when `fn` settles (failed when it throws, unless told
   * `ok()`). With spans off, only calls `fn`.
   */
  span<T>(name: string, opts: SpanOptions, fn: (s: SpanScope) => Promise<T>): Promise<T> {
    const sink = this.#sink;
    if (sink === null) return fn(NOOP_SCOPE);
    const parent = (opts.parent !== undefined ? parseTraceparent(opts.parent) : null) ?? this.#parentOfNew();
    const span = sink.start(name, parent, opts);
    const tally = opts.tally ?? this.#als.getStore()?.tally;
    const active: Active = { traceId: span.traceId, parentId: span.spanId, flags: span.flags, span, ...(tally ? { tally } : {}) };
    return this.#als.run(active, async () => {
      try {
        return await fn(span);
      } catch (e) {
        span.thrown(e);
        throw e;
      } finally {
        span.end(opts.endTime);
      }
    });
  }

  /** Adds one model call's provider and tokens to the tally of the span this code runs in (SpanOptions.tally), if any. */
  addUsage(provider: string, inputTokens: number, outputTokens: number): void {
    const t = this.#als.getStore()?.tally;
    if (!t) return;
    t.providers.add(provider);
    t.inputTokens += inputTokens;
    t.outputTokens += outputTokens;
  }

  /** Records a finished span (start and end times given), child of `opts.parent` or of the current span. */
  record(name: string, opts: SpanOptions & { startTime: number; endTime: number }): void {
    const sink = this.#sink;
    if (sink === null) return;
    const parent = (opts.parent !== undefined ? parseTraceparent(opts.parent) : null) ?? this.#parentOfNew();
    sink.start(name, parent, opts).end(opts.endTime);
  }

  /** Exports the spans batched so far and stops the exporter (the cell's stop). */
  async shutdown(): Promise<void> {
    await this.#sink?.shutdown();
  }

  #parentOfNew(): Trace | null {
    const t = this.#als.getStore();
    if (!t) return null;
    return t.span ? { traceId: t.span.traceId, parentId: t.span.spanId, flags: t.span.flags } : t;
  }
}
