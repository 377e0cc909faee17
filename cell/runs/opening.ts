/**
 * What follows a run's creating commit (issue 22): the records that open its
 * journal (`run_requested`, a fork's lineage, a refusal) and the flags other
 * runs keep of it. Once the run is committed the request that started it
 * answers with it, never with a refusal: these writes are tried at once, and
 * while the store is unreachable (or a COMMIT's outcome is unknown) again in
 * the background, with backoff, until they are written or the module stops.
 * Each write is idempotent (it reads the journal to see whether it was kept),
 * so a retry after a COMMIT cut off writes nothing twice. `then` (the drive)
 * starts once they are written, so the journal's opening records come first.
 * A run refused at its start is recorded with its refusal (`flags.refusal`):
 * if these writes never happen (the cell died), whoever picks the run up ends
 * it refused instead of driving it (journal.ts completeRefusal).
 */
import type { RunsContext } from './context.ts';
import { isStoreOutage, outageWait } from './drive.ts';

/**
 * Runs `write` now; if the store is unreachable, again in the background until
 * it succeeds (`again`: a retry, which reads what an earlier try kept). Resolves `true` when written now, `false` when handed to the
 * background; rejects only with an error that is not an outage (written now or
 * not, the caller's to answer). `then` runs after the write succeeded.
 */
export async function afterCommit(
  ctx: RunsContext,
  runId: string,
  write: (again: boolean) => Promise<void>,
  then: () => void = () => undefined,
): Promise<boolean> {
  try {
    await write(false);
  } catch (err) {
    if (!isStoreOutage(err)) throw err;
    ctx.core.log.warn('the store went away after a run was recorded; its opening is written when it is back', {
      run_id: runId,
      error: err,
    });
    void retry(ctx, runId, write, then);
    return false;
  }
  then();
  return true;
}

async function retry(ctx: RunsContext, runId: string, write: (again: boolean) => Promise<void>, then: () => void): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    await outageWait(attempt, { unref: true });
    // A stopping cell leaves the run as it is: a queued run is taken over by a peer, or resumed at its restart.
    if (ctx.stopping) return;
    try {
      await write(true);
    } catch (err) {
      if (isStoreOutage(err)) continue;
      ctx.core.log.warn('a recorded run could not be opened', { run_id: runId, error: err });
      return;
    }
    ctx.core.log.info('a recorded run was opened after the store came back', { run_id: runId });
    then();
    return;
  }
}
