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
import { RequestMetrics } from './request-metrics.ts';

/** Seconds: from a cached read (~100 µs) to a slow write under load (several seconds). */
const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** prom-client's default gauges whose names end in `_total` (see collectProcessMetrics). */
const GAUGES_NAMED_AS_COUNTERS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

export class CellMetrics {
  readonly registry = new Registry();
  /** `cell_http_requests_total` and `cell_http_request_duration_seconds` (cell/ops/request-metrics.ts). */
  readonly #requests = new RequestMetrics(
    this.registry,
    {
      requests: { name: 'cell_http_requests_total', help: 'HTTP requests answered, by route template, method and status.' },
      duration: {
        name: 'cell_http_request_duration_seconds',
        help: 'Time from a request reaching the gateway to its answer, by route template, method and status.',
      },
    },
    LATENCY_BUCKETS,
  );
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
  readonly storeRetries = new Counter({
    name: 'cell_store_write_retries_total',
    help: 'Write transactions run again by the PostgreSQL store after a serialization failure (40001) or deadlock (40P01), by SQLSTATE.',
    labelNames: ['sqlstate'] as const,
    registers: [this.registry],
  });
  readonly runTakeovers = new Counter({
    name: 'cell_run_takeovers_total',
    help: 'Runs this process claimed from a driver that stopped without ending them: previous="peer" (another cell), "restart" (this cell before it restarted), "self" (this very process: a bug, never expected).',
    labelNames: ['previous'] as const,
    registers: [this.registry],
  });
  readonly refusals = new Counter({
    name: 'cell_refusals_total',
    help: 'Requests refused with a 4xx or 503 envelope, by error code and details.reason.',
    labelNames: ['code', 'reason'] as const,
    registers: [this.registry],
  });
  readonly runsFinished = new Counter({
    name: 'cell_runs_finished_total',
    help: 'Runs that reached a terminal state in this process, by state and reason (of a failed or refused run).',
    labelNames: ['state', 'reason'] as const,
    registers: [this.registry],
  });
  readonly journalRecords = new Counter({
    name: 'cell_run_journal_records_total',
    help: 'Journal records appended by this process, by record kind (steps started, completed, refused, …).',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly journalAppends = new Counter({
    name: 'cell_run_journal_append_transactions_total',
    help: 'Transactions of run journal appends by how they were sent: "one_round_trip" (a lone driver\'s append, or a group of drivers\' appends, sent whole with its COMMIT, PostgreSQL: committed), "one_round_trip_refused" (sent whole and aborted by its guard or a failure, then sent locked), "locked" (the runs\' rows locked and read before the records were sealed, whatever the outcome).',
    labelNames: ['path'] as const,
    registers: [this.registry],
  });
  readonly sseSubscribers = new Gauge({
    name: 'cell_sse_subscribers',
    help: 'Open server-sent-event streams of run events.',
    registers: [this.registry],
  });
  readonly modelCalls = new Counter({
    name: 'cell_model_calls_total',
    help: 'Model calls, by provider id and outcome (ok, or the refusal or failure reason).',
    labelNames: ['provider', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly modelDuration = new Histogram({
    name: 'cell_model_call_duration_seconds',
    help: 'Model call latency (retries included), by provider id.',
    labelNames: ['provider'] as const,
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    registers: [this.registry],
  });
  readonly modelTokens = new Counter({
    name: 'cell_model_tokens_total',
    help: 'Tokens the providers reported, by provider id and kind (prompt, completion).',
    labelNames: ['provider', 'kind'] as const,
    registers: [this.registry],
  });
  readonly agentTokenCounter = new Counter({
    name: 'cell_agent_tokens_total',
    help: 'Tokens the providers reported for the model calls of each agent (its principal id), by kind (prompt, completion).',
    labelNames: ['agent', 'kind'] as const,
    registers: [this.registry],
  });
  readonly schedulerFires = new Counter({
    name: 'cell_scheduler_fires_total',
    help: 'Job definition fires made by this cell.',
    registers: [this.registry],
  });
  readonly schedulerLateness = new Histogram({
    name: 'cell_scheduler_lateness_seconds',
    help: 'How long after its scheduled time a definition fired.',
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 3600],
    registers: [this.registry],
  });
  readonly clockOffset = new Gauge({
    name: 'cell_clock_offset_seconds',
    help: "This cell's clock minus the database's, measured at each heartbeat (PostgreSQL store; 0 on the embedded store).",
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
    retry: (sqlState) => this.storeRetries.inc({ sqlstate: sqlState }),
  };

  #processMetrics = false;

  /**
   * Runs by kind and state, counted in the store at each scrape (`count` is
   * the runs module's query), so the figure covers every cell of a group.
   */
  countRunsWith(count: () => Promise<{ kind: string; state: string; n: number }[]>): void {
    new Gauge({
      name: 'cell_runs',
      help: 'Runs in the store, by kind (crew, job) and state.',
      labelNames: ['kind', 'state'] as const,
      registers: [this.registry],
      async collect() {
        this.reset();
        for (const r of await count()) this.set({ kind: r.kind, state: r.state }, r.n);
      },
    });
  }

  /**
   * Runs queued or running with no journal progress for several leases
   * (cell/runs/runs.ts STALL_LEASES), counted in the store at each scrape.
   */
  countStalledWith(count: () => Promise<{ kind: string; n: number }[]>): void {
    new Gauge({
      name: 'cell_runs_stalled',
      help: 'Runs queued or running whose journal has not grown for STALL_LEASES leases (10 by default), by kind.',
      labelNames: ['kind'] as const,
      registers: [this.registry],
      async collect() {
        this.reset();
        this.set({ kind: 'crew' }, 0);
        this.set({ kind: 'job' }, 0);
        for (const r of await count()) this.set({ kind: r.kind }, r.n);
      },
    });
  }

  /**
   * Adds prom-client's process metrics (CPU, memory, event loop lag, GC, handles).
   * Only when metrics are served: they start monitors that live as long as the process.
   */
  collectProcessMetrics(): void {
    if (this.#processMetrics) return;
    this.#processMetrics = true;
    collectDefaultMetrics({ register: this.registry });
    // prom-client names three gauges `*_total`, a suffix Prometheus keeps for counters (promtool
    // refuses them); each is the sum of the per-type gauge beside it (nodejs_active_handles, …).
    for (const name of GAUGES_NAMED_AS_COUNTERS) this.registry.removeSingleMetric(name);
  }

  /** Tokens of one model call made for an agent. */
  agentTokens(agentId: string, prompt: number, completion: number): void {
    this.agentTokenCounter.inc({ agent: agentId, kind: 'prompt' }, prompt);
    this.agentTokenCounter.inc({ agent: agentId, kind: 'completion' }, completion);
  }

  /** One answered request. */
  request(route: string, method: string, status: number, seconds: number): void {
    this.#requests.record(route, method, status, seconds);
  }

  /** The text exposition format (Content-Type: `this.registry.contentType`). */
  expose(): Promise<string> {
    return this.registry.metrics();
  }
}
