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
 *
 * A run its creating cell drives at once, with nothing to write before it but
 * its first record (a crew run neither refused, nor placed on a peer, nor
 * forked; a job run other than an agent's or a rerun), is recorded with that
 * record, if any, and claimed by the cell, in its creating transaction
 * (`recordDrivenRunTx`): no write follows the commit before the drive, which
 * starts under that claim.
 */
import { GENESIS_HASH, type JournalRecord } from '../../core/journal/record.ts';
import type { Tx } from '../store/types.ts';
import type { JournalTail, RunMeter, RunsContext } from './context.ts';
import { isStoreOutage, outageWait } from './drive.ts';
import { publish } from './events.ts';
import { EMPTY_HASH, sealAfter, stamped, type AppendFields } from './internal/records.ts';
import { recordText } from './internal/record-text.ts';
import type { Fence } from './lease.ts';
import * as repo from './repository.ts';
import { newRunId, recordRunTx, type NewRun, type Run } from './runs.ts';
import { byteSize, meterTx } from './storage.ts';

/** A run recorded claimed, with its first record if it has one: what its drive starts from (DriveOptions.claimed). */
export interface DrivenRun {
  run: Run;
  /** The claim the run was recorded with (epoch 1): the drive's first claim. */
  fence: Fence;
  /** The run's first record, as its creating transaction wrote it; null for a run recorded without one. */
  opening: JournalRecord | null;
}

/**
 * Records a run that this cell drives at once, inside the caller's (creating)
 * transaction: the run `running` under this cell's lease at epoch 1 (the claim
 * a drive would make first, made here), and, if given, its journal's first
 * record (`opening`, e.g. `run_requested`) sealed at seq 1 under that epoch
 * and metered with the run's spec, as an append would. Fewer commits before
 * the run's first step than a run recorded `queued` then opened and claimed,
 * and nothing to write again after a commit whose store went away: the run
 * exists with its opening or not at all. Once the transaction commits this
 * process knows the run's tail, meter and lease as if it had appended and
 * claimed (so the drive reads none of them), and publishes the record. The
 * caller must hand `fence` to the drive (DriveOptions.claimed), and name the
 * run in the transaction's `subjects` when it writes an opening. If this cell
 * dies before it drives the run, its restart (or a peer) claims it as any run
 * it held: a takeover at epoch 2, after the journal verifies.
 */
export async function recordDrivenRunTx(ctx: RunsContext, tx: Tx, r: NewRun, opening?: AppendFields): Promise<DrivenRun> {
  const runId = r.run_id ?? newRunId();
  const fence: Fence = { epoch: 1 };
  // Every statement is issued before any answer is awaited (one round trip on PostgreSQL): the run is
  // recorded as given (its insert answers what it was given), so the record is sealed from `r`.
  const inserted = recordRunTx(
    tx,
    { ...r, run_id: runId, state: 'running', coordinator: r.coordinator ?? ctx.core.config.cellId },
    fence.epoch,
  );
  // Its failure is the transaction's (awaited below); handled here too, should sealing throw first.
  inserted.catch(() => undefined);
  // The meter meterOf would load for a run without records: nothing stored yet, the spec counted with the first write.
  const meter: RunMeter = {
    workspace: r.workspace_id ?? null,
    bytes: 0,
    hashes: new Set(),
    spec: byteSize(JSON.stringify(r.spec ?? null)),
  };
  let tail: JournalTail = { seq: 0, hash: GENESIS_HASH };
  let rec: JournalRecord | null = null;
  const writes: Promise<unknown>[] = [inserted];
  if (opening) {
    const sealed = await sealAfter(ctx, tail, runId, r.graph_hash ?? EMPTY_HASH, stamped(ctx, opening), fence.epoch);
    rec = sealed.rec;
    tail = sealed.tail;
    writes.push(meterTx(ctx, tx, meter, runId, byteSize(recordText(rec)), [], false), repo.insertRecords(tx, [rec]));
  }
  const [run] = (await Promise.all(writes)) as [Run, ...unknown[]];
  tx.afterCommit(() => {
    ctx.meters.set(runId, meter);
    // The graph hash as this transaction wrote it: the drive's first append may go in one round trip (group-commit.ts).
    ctx.tails.set(runId, { ...tail, graph: run.graph_hash });
    ctx.leases.set(runId, fence.epoch);
    if (rec) {
      ctx.metrics.journalRecords.inc({ kind: rec.kind });
      publish(ctx, rec);
    }
  });
  return { run, fence, opening: rec };
}

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
