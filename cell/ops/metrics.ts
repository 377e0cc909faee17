/**
 * The cell's metrics: one prom-client Registry per cell (two cells in one
 * process never share a counter), the instruments every part records into,
 * and the text exposition a scrape reads (served by cell/ops/metrics-server.ts
 * on `--metrics-port`). Names and labels: docs/operations.md.
 *
 * Labels are bounded: HTTP requests are labelled by route template (never the
 * raw path), rate-limit refusals by gate, store writes by outcome.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { StoreObserver } from '../store/types.ts';

/** Seconds: from a cached read (~100 µs) to a slow write under load (several seconds). */
const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export class CellMetrics {
  readonly registry = new Registry();
  readonly httpRequests = new Counter({
    name: 'cell_http_requests_total',
    help: 'HTTP requests answered, by route template, method and status.',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [this.registry],
  });
  readonly httpDuration = new Histogram({
    name: 'cell_http_request_duration_seconds',
    help: 'Time from a request reaching the gateway to its answer, by route template, method and status.',
    labelNames: ['route', 'method', 'status'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  readonly rateLimitRefusals = new Counter({
    name: 'cell_rate_limit_refusals_total',
    help: 'Requests refused with 429, by the gate that refused them (gateway, credential, endpoint).',
    labelNames: ['gate'] as const,
    registers: [this.registry],
  });
  readonly storeWrite = new Histogram({
    name: 'cell_store_write_duration_seconds',
    help: 'Store write transactions, from the call to durability (or refusal), by outcome.',
    labelNames: ['outcome'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  readonly fsyncBatch = new Histogram({
    name: 'cell_store_fsync_batch_transactions',
    help: 'Transactions made durable by one fsync of the embedded store (group commit).',
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
    registers: [this.registry],
  });
  readonly checkpoint = new Histogram({
    name: 'cell_store_checkpoint_duration_seconds',
    help: 'Checkpoints of the embedded store (snapshot written, log truncated).',
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly ready = new Gauge({
    name: 'cell_ready',
    help: '1 when the last readiness check (GET /readyz) passed, 0 when it failed.',
    registers: [this.registry],
  });

  /** What the store tells these metrics (passed to openStore). */
  readonly storeObserver: StoreObserver = {
    write: (seconds, ok) => this.storeWrite.observe({ outcome: ok ? 'committed' : 'refused' }, seconds),
    fsyncBatch: (n) => this.fsyncBatch.observe(n),
    checkpoint: (seconds) => this.checkpoint.observe(seconds),
  };

  #processMetrics = false;

  /**
   * Adds prom-client's process metrics (CPU, memory, event loop lag, GC, handles).
   * Only when metrics are served: they start monitors that live as long as the process.
   */
  collectProcessMetrics(): void {
    if (this.#processMetrics) return;
    this.#processMetrics = true;
    collectDefaultMetrics({ register: this.registry });
  }

  /** One answered request. */
  request(route: string, method: string, status: number, seconds: number): void {
    const labels = { route, method, status: String(status) };
    this.httpRequests.inc(labels);
    this.httpDuration.observe(labels, seconds);
  }

  /** The text exposition format (Content-Type: `this.registry.contentType`). */
  expose(): Promise<string> {
    return this.registry.metrics();
  }
}
