/**
 * The two metrics of every answered request, `cell_http_requests_total`
 * (counter) and `cell_http_request_duration_seconds` (histogram), labelled
 * by route template, method and status, recorded without prom-client's
 * per-call work (issue 28: a label object built, validated and hashed into
 * a string key twice per request, ~4 % of the gateway's CPU). Each series
 * (a route, method and status) is found through nested Maps of the values
 * themselves and counts its observations in place; a scrape reads them
 * through the same interface prom-client's own Counter and Histogram give
 * the Registry (`get`, `getForPromString`, `reset`), so the exposition is
 * what prom-client printed for them: same names, help, types, labels,
 * buckets (cumulative, then `+Inf`), `_sum` and `_count`.
 */
import type { Metric, Registry } from 'prom-client';

interface Series {
  labels: { route: string; method: string; status: string };
  count: number;
  sum: number;
  /** Observations per upper bound (not cumulative), as prom-client keeps them; past the last bound only in `count`. */
  buckets: number[];
}

/** A value of a metric as prom-client's Registry reads it. */
interface Value {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
  sharedLabels?: Record<string, string>;
  exemplar?: null | undefined;
}

export class RequestMetrics {
  readonly #byRoute = new Map<string, Map<string, Map<number, Series>>>();
  /** Every series in the order first seen (prom-client's order). */
  #series: Series[] = [];

  constructor(
    registry: Registry,
    private readonly names: { requests: { name: string; help: string }; duration: { name: string; help: string } },
    private readonly bounds: readonly number[],
  ) {
    const counter = {
      ...names.requests,
      type: 'counter',
      aggregator: 'sum',
      get: async () => ({ ...names.requests, type: 'counter', values: this.#counterValues(), aggregator: 'sum' }),
      reset: () => this.#reset(),
    };
    const histogram = {
      ...names.duration,
      type: 'histogram',
      aggregator: 'sum',
      getForPromString: async () => ({ ...names.duration, type: 'histogram', values: this.#histogramValues(), aggregator: 'sum' }),
      // prom-client's `get` gives each value its series' labels merged in ("splayed").
      get: async () => ({
        ...names.duration,
        type: 'histogram',
        values: this.#histogramValues().map(({ sharedLabels, labels, ...v }) => ({ ...v, labels: { ...labels, ...sharedLabels } })),
        aggregator: 'sum',
      }),
      reset: () => this.#reset(),
    };
    registry.registerMetric(counter as unknown as Metric);
    registry.registerMetric(histogram as unknown as Metric);
  }

  /** One answered request. */
  record(route: string, method: string, status: number, seconds: number): void {
    let byMethod = this.#byRoute.get(route);
    if (!byMethod) {
      byMethod = new Map();
      this.#byRoute.set(route, byMethod);
    }
    let byStatus = byMethod.get(method);
    if (!byStatus) {
      byStatus = new Map();
      byMethod.set(method, byStatus);
    }
    let s = byStatus.get(status);
    if (!s) {
      s = { labels: { route, method, status: String(status) }, count: 0, sum: 0, buckets: this.bounds.map(() => 0) };
      byStatus.set(status, s);
      this.#series.push(s);
    }
    s.count += 1;
    s.sum += seconds;
    const b = this.bounds;
    for (let i = 0; i < b.length; i++)
      if (seconds <= b[i]!) {
        s.buckets[i]! += 1;
        break;
      }
  }

  #reset(): void {
    this.#byRoute.clear();
    this.#series = [];
  }

  #counterValues(): Value[] {
    return this.#series.map((s) => ({ value: s.count, labels: { ...s.labels } }));
  }

  #histogramValues(): Value[] {
    const name = this.names.duration.name;
    const out: Value[] = [];
    for (const s of this.#series) {
      let acc = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        acc += s.buckets[i]!;
        out.push({
          labels: { le: this.bounds[i]! },
          sharedLabels: { ...s.labels },
          value: acc,
          metricName: `${name}_bucket`,
          exemplar: null,
        });
      }
      out.push({ labels: { le: '+Inf' }, sharedLabels: { ...s.labels }, value: s.count, metricName: `${name}_bucket`, exemplar: null });
      out.push({ labels: {}, sharedLabels: { ...s.labels }, value: s.sum, metricName: `${name}_sum`, exemplar: undefined });
      out.push({ labels: {}, sharedLabels: { ...s.labels }, value: s.count, metricName: `${name}_count`, exemplar: undefined });
    }
    return out;
  }
}
