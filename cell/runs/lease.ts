/**
 * Run ownership in a group of cells: a run being driven is owned by one cell
 * under a lease with an epoch (a fencing token). The lease has no timer of
 * its own: it lasts as long as its owner's heartbeat (cell/cluster), so
 * holding any number of runs costs one write per heartbeat, not one per run.
 *
 * - `claimRun` takes the lease to drive the run: allowed when nobody holds it,
 *   when this cell does, or when the holder's heartbeat lapsed (dead). It
 *   enforces the run's placement needs (clearance, topology) in the same
 *   transaction, so a takeover never lands on a cell that does not qualify.
 *   Each claim by a new driver adds one to the epoch. A run recorded refused
 *   at its start (`flags.refusal`) is never claimed: whoever finds it ends it
 *   `refused` (journal.ts completeRefusal) instead of driving it.
 * - Every write of a driver (journal append, state change, finish) is
 *   conditional on `lease_owner = me AND lease_epoch = mine` in the write's
 *   own transaction (journal.ts). A cell that lost its lease (a paused
 *   process that woke up after a peer took over) learns it at its next
 *   write, with LeaseLostError, and writes nothing more for that run.
 * - A run that waits (approval, timer) releases its lease: whichever cell
 *   wakes it claims it again.
 *
 * On PostgreSQL the claim and the holder's heartbeat read and write the same
 * rows in serializable transactions: a holder that beats is never taken over.
 */
import { qualifies } from '../cluster/api.ts';
import type { Tx } from '../store/types.ts';
import type { RunsContext } from './context.ts';
import * as repo from './repository.ts';
import { isTerminal, refusalOf } from './runs.ts';

/** What a driver holds: its lease's epoch. Its writes carry it. */
export interface Fence {
  epoch: number;
}

/** A write of a driver whose lease another cell has taken (or that never held it). Nothing was written. */
export class LeaseLostError extends Error {
  constructor(
    readonly runId: string,
    readonly epoch: number,
    readonly owner: string | null,
    readonly ownerEpoch: number,
  ) {
    super(`run ${runId}: this cell's lease (epoch ${epoch}) is lost to ${owner ?? 'nobody'} (epoch ${ownerEpoch})`);
    this.name = 'LeaseLostError';
  }
}

export type Claim =
  | {
      ok: true;
      fence: Fence;
      /** True when the lease was taken from another driver that stopped without ending the run (a takeover or a restart). */
      takeover: boolean;
      /** The cell that held the lease before, when it was taken over. */
      previousOwner: string | null;
    }
  | { ok: false; reason: 'terminal' | 'owned' | 'unqualified' | 'refused_at_start'; owner?: string | null };

/** Throws LeaseLostError unless the run's lease is `fence` held by this cell (inside the write's transaction). */
export function assertFence(ctx: RunsContext, runId: string, head: repo.RunHead, fence: Fence): void {
  if (head.lease_owner !== ctx.core.config.cellId || head.lease_epoch !== fence.epoch)
    throw new LeaseLostError(runId, fence.epoch, head.lease_owner, head.lease_epoch);
}

/**
 * Takes the run's lease to drive it, and moves it to `running` (graph hash
 * recorded). `force` (an operator's recover) takes it even from a holder whose
 * heartbeat has not lapsed yet: the new epoch fences that holder off if it is
 * in fact alive.
 */
export async function claimRun(ctx: RunsContext, runId: string, graphHash: string | null, force = false): Promise<Claim> {
  const me = ctx.core.config.cellId;
  const at = ctx.core.clock.now();
  const held = ctx.leases.get(runId);
  const own = await claimOwn(ctx, runId, graphHash, held, at);
  if (own) return own;
  const claim = await ctx.core.store.write(async (tx: Tx): Promise<Claim> => {
    const s = await repo.runLease(tx, runId);
    if (!s || isTerminal(s.state)) return { ok: false, reason: 'terminal' };
    if (s.lease_owner !== null && s.lease_owner !== me && !force && !(await ctx.cluster.lapsedTx(tx, s.lease_owner, at)))
      return { ok: false, reason: 'owned', owner: s.lease_owner };
    // Refused at its start (decided and recorded with the run): never driven (the caller ends it refused).
    const flags = await repo.runFlags(tx, runId);
    if (refusalOf(flags)) return { ok: false, reason: 'refused_at_start', owner: s.lease_owner };
    if (!qualifies(ctx.cluster.self, { clearance: s.need_clearance, topology: s.need_topology }))
      return { ok: false, reason: 'unqualified', owner: s.lease_owner };
    const epoch = s.lease_epoch + 1;
    if (!(await repo.takeLease(tx, runId, me, epoch, s.lease_epoch, at, graphHash))) return { ok: false, reason: 'owned', owner: null };
    // A qualifying cell holds the run again: it is no longer unplaceable.
    if (flags && 'unplaceable' in flags) {
      const { unplaceable: _gone, ...rest } = flags;
      await repo.updateRunFlags(tx, runId, rest, at);
    }
    // Taken from a driver that did not end the run: another cell, or this cell before a restart.
    const takeover = s.lease_owner !== null && s.lease_epoch > 0 && !(s.lease_owner === me && held === s.lease_epoch);
    return { ok: true, fence: { epoch }, takeover, previousOwner: takeover ? s.lease_owner : null };
  });
  if (claim.ok) ctx.leases.set(runId, claim.fence.epoch);
  return claim;
}

/**
 * The claim of a run whose lease this cell holds already (it created the run,
 * or drove it before): no holder's liveness to judge, so no serializable read
 * of the group's membership; the row-locked compare-and-set on owner and
 * epoch is the whole claim, and claims of many runs at once never conflict.
 * Undefined when the slow path must decide (another holder, or none, an
 * `unplaceable` flag to clear, or a refusal recorded with the run).
 */
async function claimOwn(
  ctx: RunsContext,
  runId: string,
  graphHash: string | null,
  held: number | undefined,
  at: number,
): Promise<Claim | undefined> {
  const me = ctx.core.config.cellId;
  const s = await repo.runLease(ctx.core.store, runId);
  if (!s || isTerminal(s.state) || s.lease_owner !== me) return undefined;
  if (!qualifies(ctx.cluster.self, { clearance: s.need_clearance, topology: s.need_topology })) return undefined;
  const epoch = s.lease_epoch + 1;
  const ok = await ctx.core.store
    .write(
      async (tx) => {
        if (!(await repo.takeLease(tx, runId, me, epoch, s.lease_epoch, at, graphHash, 'self'))) return false;
        const flags = await repo.runFlags(tx, runId);
        // Let the slow path clear it, or refuse the claim (nothing to keep: this transaction rolls back).
        if (flags && ('unplaceable' in flags || refusalOf(flags))) throw new SlowPath();
        return true;
      },
      { isolation: 'row-locks' },
    )
    .catch((e: unknown) => {
      if (e instanceof SlowPath) return false;
      throw e;
    });
  if (!ok) return undefined;
  ctx.leases.set(runId, epoch);
  // Taken from a driver that did not end the run: this cell before a restart.
  const takeover = s.lease_epoch > 0 && held !== s.lease_epoch;
  return { ok: true, fence: { epoch }, takeover, previousOwner: takeover ? me : null };
}

class SlowPath extends Error {}

/**
 * The driver lets go of a waiting run (state `waiting`, or `outcome_unknown` when it waits on an operator;
 * no owner); LeaseLostError when the lease is not its own any more.
 */
export async function releaseToWaiting(
  ctx: RunsContext,
  runId: string,
  fence: Fence,
  state: 'waiting' | 'outcome_unknown' = 'waiting',
): Promise<void> {
  const me = ctx.core.config.cellId;
  const at = ctx.core.clock.now();
  await ctx.core.store.write(async (tx) => {
    if (await repo.releaseToWaiting(tx, runId, me, fence.epoch, at, state)) return;
    const s = await repo.runHead(tx, runId);
    if (s && !isTerminal(s.state)) throw new LeaseLostError(runId, fence.epoch, s.lease_owner, s.lease_epoch);
  });
}

/**
 * Hands a run this cell created but does not qualify to execute to the group:
 * its lease is released, and a live peer that qualifies claims it at its next
 * heartbeat (the takeover sweep). True when released.
 */
export async function placeOnPeer(ctx: RunsContext, runId: string): Promise<boolean> {
  const me = ctx.core.config.cellId;
  return ctx.core.store.write((tx) => repo.releaseUnclaimed(tx, runId, me));
}

/**
 * Marks `flags.unplaceable` on runs of `kind` whose holder is dead (or that
 * nobody holds) when no live or suspect member qualifies to execute them: a
 * visible state instead of a silent wait. The claim of a qualifying cell that
 * comes back clears it.
 */
export async function markUnplaceable(ctx: RunsContext, kind: repo.RunKind): Promise<void> {
  const members = await ctx.cluster.sweepMembers();
  const state = new Map(members.map((m) => [m.cell_id, m.state]));
  // Runs held by a member that is not dead are not read at all (the check below stays for a member that died since).
  const holding = members.filter((m) => m.state !== 'dead').map((m) => m.cell_id);
  for (const r of await repo.leasedElsewhere(ctx.core.store, kind, holding)) {
    // A run refused at its start needs no qualifying cell: any cell ends it (orphanedRuns).
    if (r.flags['unplaceable'] !== undefined || refusalOf(r.flags)) continue;
    if (r.lease_owner !== null && (state.get(r.lease_owner) ?? 'dead') !== 'dead') continue;
    const need = await repo.runLease(ctx.core.store, r.run_id);
    if (!need) continue;
    const n = { clearance: need.need_clearance, topology: need.need_topology };
    if (members.some((m) => m.state !== 'dead' && qualifies(m, n))) continue;
    const at = ctx.core.clock.now();
    await ctx.core.store.write(async (tx) => {
      const flags = await repo.runFlags(tx, r.run_id);
      if (!flags || flags['unplaceable'] !== undefined) return;
      await repo.updateRunFlags(tx, r.run_id, { ...flags, unplaceable: { since: at, needs: n } }, at);
    });
  }
}

/** Forgets the lease this process held (the drive ended). */
export function dropLease(ctx: RunsContext, runId: string): void {
  ctx.leases.delete(runId);
}

/**
 * Runs of `kind` queued or running whose lease holder's heartbeat lapsed (or
 * that nobody holds), which this cell qualifies to execute: the takeover
 * sweep's candidates. The claim re-checks everything in its transaction.
 * A run recorded refused at its start (`flags.refusal`) is a candidate
 * whatever its placement needs: it is ended refused, never driven.
 */
export async function orphanedRuns(ctx: RunsContext, kind: repo.RunKind): Promise<repo.Run[]> {
  const me = ctx.core.config.cellId;
  const all = await ctx.cluster.sweepMembers();
  const members = new Map(all.map((m) => [m.cell_id, m.state]));
  // Runs held by this cell or by a member that is not dead are no candidates: not read (a busy group's heartbeat reads no run).
  const holding = [me, ...all.filter((m) => m.state !== 'dead' && m.cell_id !== me).map((m) => m.cell_id)];
  const candidates = await repo.leasedElsewhere(ctx.core.store, kind, holding);
  if (candidates.length === 0) return [];
  const out: repo.Run[] = [];
  for (const r of candidates) {
    if (r.lease_owner !== null && (members.get(r.lease_owner) ?? 'dead') !== 'dead') continue;
    if (ctx.drivers.has(r.run_id)) continue;
    if (refusalOf(r.flags)) {
      out.push(r);
      continue;
    }
    const need = await repo.runLease(ctx.core.store, r.run_id);
    if (need && qualifies(ctx.cluster.self, { clearance: need.need_clearance, topology: need.need_topology })) out.push(r);
  }
  return out;
}

/**
 * Runs of `kind` waiting (approval, timer) whose last driver is dead, which
 * this cell qualifies to execute: their wake-up timer died with that cell, so
 * the takeover sweep drives them once here (the drive's claim decides between
 * peers), which arms the timer in this cell (or acts at once when it is due).
 */
export async function orphanedWaitingRuns(ctx: RunsContext, kind: repo.RunKind): Promise<repo.Run[]> {
  const me = ctx.core.config.cellId;
  const all = await ctx.cluster.sweepMembers();
  const members = new Map(all.map((m) => [m.cell_id, m.state]));
  const holding = [me, ...all.filter((m) => m.state !== 'dead' && m.cell_id !== me).map((m) => m.cell_id)];
  const candidates = await repo.waitingElsewhere(ctx.core.store, kind, holding);
  if (candidates.length === 0) return [];
  const out: repo.Run[] = [];
  for (const r of candidates) {
    if ((members.get(r.coordinator!) ?? 'dead') !== 'dead' || ctx.drivers.has(r.run_id)) continue;
    const need = await repo.runLease(ctx.core.store, r.run_id);
    if (need && qualifies(ctx.cluster.self, { clearance: need.need_clearance, topology: need.need_topology })) out.push(r);
  }
  return out;
}

/**
 * True when the run's lease holder is another cell whose heartbeat is fresh
 * (`live`): a recover there would fight a working driver. A `suspect` holder
 * (late heartbeats) may be recovered from: the forced claim fences it off.
 */
export async function heldByLivePeer(ctx: RunsContext, run: repo.Run): Promise<boolean> {
  if (run.lease_owner === null || run.lease_owner === ctx.core.config.cellId) return false;
  const m = (await ctx.cluster.members()).find((x) => x.cell_id === run.lease_owner);
  return m !== undefined && m.state === 'live';
}
