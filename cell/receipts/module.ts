/**
 * The receipts module (docs/receipts.md): the run log, an append-only Merkle
 * log of finished runs' heads with signed checkpoints and proofs, and the
 * runs' attestations (in-toto in DSSE, SCITT COSE_Sign1). Every run's end
 * queues its head in its own transaction (the runs module's finish hook);
 * the sequencer appends the queued heads after the commit and on each
 * heartbeat (heads a stopped cell left queued), serialized across the group.
 */
import type { CellCore } from '../context.ts';
import type { Iam } from '../iam/api.ts';
import type { CellModule } from '../module.ts';
import type { Runs } from '../runs/api.ts';
import type { Teams } from '../teams/api.ts';
import { RunLog } from './api.ts';
import type { ReceiptsContext } from './context.ts';
import { queueTx, schedule } from './log.ts';
import { receiptsRoutes } from './routes.ts';

export interface ReceiptsModule extends CellModule {
  log: RunLog;
}

export function createReceiptsModule(core: CellCore, deps: { iam: Iam; runs: Runs; teams: Teams }): ReceiptsModule {
  const ctx: ReceiptsContext = { core, ...deps, integrating: null, again: false, soon: null };
  deps.runs.onRunFinishedTx((tx, head) => queueTx(ctx, tx, head, `cell:${core.config.cellId}`));
  // Heads queued by a cell that stopped before its sequencing ran are appended by the next heartbeat of any cell.
  deps.runs.onHeartbeat(async () => schedule(ctx));
  return {
    name: 'receipts',
    log: new RunLog(ctx),
    routes(app) {
      receiptsRoutes(app, ctx);
    },
    async start() {
      schedule(ctx);
    },
    async stop() {
      // Heads queued by the last runs' ends are appended before the cell stops (else by the next heartbeat).
      if (ctx.soon) {
        clearTimeout(ctx.soon);
        ctx.soon = null;
        schedule(ctx);
      }
      await ctx.integrating;
    },
  };
}
