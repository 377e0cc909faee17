/**
 * The ops module's face (docs/architecture.md, "Faces"): what another module of cell/ may use of
 * it. The cell's metrics (`CellMetrics`, one prom-client Registry per cell, created in
 * cell/server.ts and handed to what records into them), and `Ops`, the instance's API (the
 * metrics listener's URL and the exposition).
 */
export { CellMetrics } from './metrics.ts';

export interface Ops {
  /** The loopback URL metrics are served on, once started with a metrics port; null otherwise. */
  metricsUrl(): string | null;
  /** The metrics as a scrape reads them (the text exposition format), served or not. */
  exposition(): Promise<string>;
}
