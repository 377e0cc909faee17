/**
 * The receipts module's face (docs/architecture.md, "Faces"): what another module of cell/ may use of
 * it. The edge module adds an imported device journal's run to the run log (`RunLog.queueTx`).
 */
import type { Tx } from '../store/types.ts';
import type { ReceiptsContext } from './context.ts';
import { queueTx } from './log.ts';

/** The run log as other modules write to it. */
export class RunLog {
  constructor(private readonly ctx: ReceiptsContext) {}

  /** Queues a finished run's head in the caller's transaction (`source`: `edge:<device id>` for an imported journal). */
  queueTx(tx: Tx, head: { run_id: string; journal_head: string; graph_hash: string }, source: string): Promise<void> {
    return queueTx(this.ctx, tx, head, source);
  }
}
