/**
 * The span sink of a cell that exports traces: the official OpenTelemetry SDK
 * (a BasicTracerProvider, its sampler and batch settings read from the
 * standard OTEL_* variables) with the OTLP/HTTP protobuf exporter, behind a
 * BatchSpanProcessor, so a span's end only queues it: the export runs on a
 * timer, never on the request or run path, and a queue that is full drops
 * spans rather than hold memory. cell/server.ts imports this file (and so
 * the SDK) only when trace export is on (docs/operations.md "Traces").
 *
 * The resource is the SDK's default (telemetry.sdk.*), then the cell's
 * defaults (`service.name` agent-cell, `service.version`), then what the
 * operator says (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME: the SDK's
 * environment detector), then the cell's identity (`service.instance.id`,
 * `agent_cell.group.id`), which nothing overrides. The tracer is named and
 * versioned after the program (`agent-cell`, package.json's version).
 *
 * Parents are passed explicitly (the cell's own AsyncLocalStorage in
 * cell/http/trace.ts knows the current span), so no global tracer provider
 * or context manager is registered.
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Link, type Span } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { PROGRAM_VERSION } from '../../runtime/version.ts';
import type { TracesConfig } from '../config.ts';
import { parseTraceparent, type SinkSpan, type SpanAttributes, type SpanOptions, type SpanSink, type Trace } from '../http/trace.ts';

const KINDS = { internal: SpanKind.INTERNAL, server: SpanKind.SERVER, client: SpanKind.CLIENT } as const;

function attributes(a: SpanAttributes | undefined): Attributes {
  const out: Attributes = {};
  if (a) for (const [k, v] of Object.entries(a)) if (v !== undefined) out[k] = v;
  return out;
}

function contextOf(t: Trace) {
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId: t.traceId,
    spanId: t.parentId,
    traceFlags: Number.parseInt(t.flags, 16),
    isRemote: true,
  });
}

/** What a thrown value may say on a span: a code, never a message (it may quote a prompt or a provider's body). */
function errorType(e: unknown): string {
  if (typeof e === 'object' && e !== null) {
    const x = e as { reason?: unknown; code?: unknown; details?: { reason?: unknown }; name?: unknown };
    if (typeof x.details?.reason === 'string') return x.details.reason;
    if (typeof x.reason === 'string') return x.reason;
    if (typeof x.code === 'string') return x.code;
    if (typeof x.name === 'string') return x.name;
  }
  return 'error';
}

class ExportedSpan implements SinkSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly flags: string;
  #settled = false;
  constructor(private readonly span: Span) {
    const c = span.spanContext();
    this.traceId = c.traceId;
    this.spanId = c.spanId;
    this.flags = c.traceFlags.toString(16).padStart(2, '0');
  }
  set(a: SpanAttributes): void {
    this.span.setAttributes(attributes(a));
  }
  fail(type: string): void {
    this.#settled = true;
    this.span.setAttribute('error.type', type);
    this.span.setStatus({ code: SpanStatusCode.ERROR });
  }
  ok(): void {
    this.#settled = true;
  }
  rename(name: string): void {
    this.span.updateName(name);
  }
  thrown(e: unknown): void {
    if (!this.#settled) this.fail(errorType(e));
  }
  end(endTime?: number): void {
    this.span.end(endTime);
  }
}

/** The instrumentation scope of every span: the program, by name and version. */
export const TRACER_NAME = 'agent-cell';

/** Starts the SDK for `config`; `identity` names this cell (service.instance.id and the group). */
export function createOtelSink(config: TracesConfig, identity: Record<string, string>): SpanSink & { serviceName: string } {
  const exporter = new OTLPTraceExporter({ url: config.endpoint });
  const resource = defaultResource()
    .merge(resourceFromAttributes({ 'service.name': config.serviceName, 'service.version': PROGRAM_VERSION }))
    .merge(detectResources({ detectors: [envDetector] }))
    .merge(resourceFromAttributes(identity));
  const provider = new BasicTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(exporter)] });
  const tracer = provider.getTracer(TRACER_NAME, PROGRAM_VERSION);
  return {
    serviceName: String(resource.attributes['service.name']),
    captureContent: config.captureContent,
    start(name: string, parent: Trace | null, opts: SpanOptions): SinkSpan {
      const links: Link[] = [];
      for (const l of opts.links ?? []) {
        const t = parseTraceparent(l);
        if (t)
          links.push({ context: { traceId: t.traceId, spanId: t.parentId, traceFlags: Number.parseInt(t.flags, 16), isRemote: true } });
      }
      const span = tracer.startSpan(
        name,
        {
          kind: KINDS[opts.kind ?? 'internal'],
          attributes: attributes(opts.attributes),
          ...(links.length ? { links } : {}),
          ...(opts.startTime !== undefined ? { startTime: opts.startTime } : {}),
        },
        parent ? contextOf(parent) : ROOT_CONTEXT,
      );
      return new ExportedSpan(span);
    },
    shutdown: () => provider.shutdown(),
  };
}
