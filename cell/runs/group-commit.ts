/**
 * Group commit of run drivers' journal appends (issue 40). The steps that
 * concurrent runs finish within a few milliseconds are written in one
 * transaction and one round trip pair: one statement locks and stamps every
 * run's row (fenced by each driver's lease), one reads every run's last seq,
 * and the records, their values and the runs' storage shares go in one
 * multi-row statement each, with one COMMIT. Each record is still sealed
 * after its own run's tail: its own seq, its own chain, its own signature.
 *
 * Groups form on their own: a driver's append is queued, and a group starts
 * (at the next check phase of the event loop, so the appends of one burst of
 * answers join it) when no group is in flight, or, on PostgreSQL, beside the
 * one in flight when MIN_SECOND_GROUP appends wait; the appends that arrive
 * while a group is in flight make the next group. A lone run therefore waits
 * for no one, and sixteen runs share their commits.
 *
 * On PostgreSQL a group about to go out with nothing in flight may linger
 * (config appendLingerMs, `--append-linger-ms`, 1 ms) for more appends to join
 * it, as PostgreSQL's own commit_delay does: only while this process drives
 * more runs than are waiting, and only when each waiting run's own step took
 * LINGER_STEP_RATIO lingers at least (its last append was that long ago), so
 * the wait costs a run at most a fifth of its step. It ends as soon as every
 * run driven here waits, or a run whose steps come faster joins. What it buys
 * is fewer transactions a step where a process drives a few runs whose steps
 * come slowly (a loaded group of cells, slow models: bench/RESULTS.md, stop
 * 38); a lone run never lingers.
 *
 * A group never makes one run's failure another's:
 * - a run whose lease was lost or which ended meanwhile (its row did not lock)
 *   is told why, and the others are written again without it;
 * - a storage limit refuses that run's records only (as one by one);
 * - any other failure of the group's transaction writes each append again in
 *   a transaction of its own, so each gets its own answer;
 * - a store outage (connection lost, commit outcome unknown, conflicts past
 *   retries) is every member's answer, as it would have been alone: each
 *   driver then settles its own run from its journal (drive.ts).
 * An append without a fence (a cancel, a note any cell may write) is written
 * alone, as before.
 */
import { isServiceError } from '../../core/errors.ts';
import type { JournalRecord } from '../../core/journal/record.ts';
import type { Tx } from '../store/types.ts';
import type { JournalTail, RunMeter, RunsContext, StagedWrite } from './context.ts';
import { recordText } from './internal/record-text.ts';
import { byHash, EMPTY_HASH, lockRun, RunClosedError, sealAfter, tailAt, type PreparedEntry } from './internal/records.ts';
import { assertFence, type Fence } from './lease.ts';
import * as repo from './repository.ts';
import { isTerminal } from './runs.ts';
import { byteSize, measure, usageRefusal, workspaceFileBytes, type PreparedValue, type RunStorageLimitError } from './storage.ts';

/** Groups in flight at once on PostgreSQL (each holds one connection of the store's pool); one on the embedded store. */
export const MAX_INFLIGHT = 2;
/**
 * Appends that must be waiting for a second group to go out beside the one in flight (PostgreSQL):
 * fewer wait for that one to commit and make the next group with whatever arrives meanwhile.
 * Measured (bench/RESULTS.md, stop 31): 8 against 4, against always (2 in flight) and never (1).
 */
export const MIN_SECOND_GROUP = 8;
/** Runs in one group at most (a notification names at most 100; statements stay well under parameter limits). */
export const MAX_GROUP = 32;
/** A waiting run's own step must have taken this many lingers (config appendLingerMs) for its group to linger: the wait is at most a fifth of it. */
export const LINGER_STEP_RATIO = 5;
/** Runs whose last append's time is kept (their own step's length) before the oldest are forgotten. */
const PACE_RUNS = 4096;

/** One run's append: its prepared records, the writes staged for it, its driver's fence, its meter. */
export interface AppendMember {
  runId: string;
  items: PreparedEntry[];
  staged: StagedWrite[];
  fence?: Fence | undefined;
  meter: RunMeter;
}

/** What an append kept: its sealed records, the run's new tail, and the refusal that stopped it short (a storage limit). */
export interface AppendOutcome {
  recs: JournalRecord[];
  tail: JournalTail;
  refused: RunStorageLimitError | null;
}

/** A member waiting for its group. */
export interface QueuedAppend {
  member: AppendMember;
  resolve(o: AppendOutcome): void;
  reject(e: unknown): void;
  /** How long ago its run's previous append came (ms; 0 for its first): its own step's length. */
  stepMs: number;
}

/** The appends waiting to be grouped and the groups in flight (RunsContext.appends). */
export interface AppendQueue {
  waiting: QueuedAppend[];
  inflight: number;
  scheduled: boolean;
  /** The linger's timer while a group waits for more appends (null: none). */
  lingering: NodeJS.Timeout | null;
  /** When each driven run's last append came (performance.now ms). */
  lastAppend: Map<string, number>;
}

/** Writes a run's append: alone without a fence, else with whatever other drivers' appends are waiting. */
export function commitAppend(ctx: RunsContext, member: AppendMember): Promise<AppendOutcome> {
  if (member.fence === undefined) return writeAlone(ctx, member);
  return new Promise((resolve, reject) => {
    const q = ctx.appends;
    const stepMs = ownStep(q, member.runId);
    q.waiting.push({ member, resolve, reject, stepMs });
    if (q.lingering && (q.waiting.length >= ctx.writers.size || stepMs < LINGER_STEP_RATIO * ctx.core.config.appendLingerMs)) {
      // Every run driven here waits, or one whose steps come fast joined: no more waiting.
      clearTimeout(q.lingering);
      q.lingering = null;
      q.scheduled = false;
    }
    schedule(ctx);
  });
}

/** How long ago the run's previous append came (0 for its first: a step of unknown length never lingers), noting this one's time. */
function ownStep(q: AppendQueue, runId: string): number {
  const now = performance.now();
  const last = q.lastAppend.get(runId);
  q.lastAppend.delete(runId);
  // Oldest first (a Map keeps insertion order): a run that stopped appending is forgotten first.
  if (q.lastAppend.size >= PACE_RUNS) q.lastAppend.delete(q.lastAppend.keys().next().value!);
  q.lastAppend.set(runId, now);
  return last === undefined ? 0 : now - last;
}

/**
 * Whether a group about to go out with nothing in flight lingers (appendLingerMs) for more appends: on
 * PostgreSQL, while this process drives more runs than wait, each waiting run's own step having taken
 * LINGER_STEP_RATIO lingers at least.
 */
function shouldLinger(ctx: RunsContext): boolean {
  const q = ctx.appends;
  const linger = ctx.core.config.appendLingerMs;
  if (linger <= 0 || ctx.core.store.engine === 'embedded' || q.inflight > 0 || q.waiting.length >= ctx.writers.size) return false;
  return q.waiting.every((w) => w.stepMs >= LINGER_STEP_RATIO * linger);
}

/** Whether another group may go out now, with `inflight` groups in flight. */
function mayStart(ctx: RunsContext, inflight: number, waiting: number): boolean {
  if (waiting === 0) return false;
  if (inflight === 0) return true;
  // The embedded store writes one transaction at a time: a second group would only wait for the first, with
  // fewer members than if they waited to form the next group. On PostgreSQL a second group overlaps the
  // first's round trips, worth its transaction only when enough appends wait to share it.
  return ctx.core.store.engine !== 'embedded' && inflight < MAX_INFLIGHT && waiting >= MIN_SECOND_GROUP;
}

function schedule(ctx: RunsContext): void {
  const q = ctx.appends;
  if (q.scheduled || !mayStart(ctx, q.inflight, q.waiting.length)) return;
  q.scheduled = true;
  const start = () => {
    q.scheduled = false;
    q.lingering = null;
    while (mayStart(ctx, q.inflight, q.waiting.length)) {
      const group = q.waiting.splice(0, MAX_GROUP);
      q.inflight++;
      void runGroup(ctx, group).finally(() => {
        q.inflight--;
        schedule(ctx);
      });
    }
  };
  if (shouldLinger(ctx)) {
    q.lingering = setTimeout(start, ctx.core.config.appendLingerMs);
    return;
  }
  // At the check phase: every answer the poll phase delivered has made its append by then.
  setImmediate(start);
}

/** Why some members of a group could not be written: their own errors (lease lost, run closed, a storage limit on their first record). */
class MembersRefused extends Error {
  constructor(readonly errors: Map<string, unknown>) {
    super(`${errors.size} runs of a journal group could not be written`);
    this.name = 'MembersRefused';
  }
}

/** A store outage: every member's answer as it would have been alone (drive.ts settles each run from its journal). */
function outage(err: unknown): boolean {
  if (!isServiceError(err) || err.code !== 'service_unavailable') return false;
  const reason = (err.details as { reason?: unknown } | undefined)?.reason;
  return reason === 'connection_lost' || reason === 'commit_unknown' || reason === 'write_conflict' || reason === 'store_closed';
}

async function runGroup(ctx: RunsContext, group: QueuedAppend[]): Promise<void> {
  if (group.length === 1) {
    const [one] = group;
    await writeAlone(ctx, one!.member).then(one!.resolve, one!.reject);
    return;
  }
  let outcomes: Map<string, AppendOutcome>;
  let whole: Map<string, AppendOutcome> | null;
  try {
    whole = await sentWhole(
      ctx,
      group.map((g) => g.member),
    );
  } catch (err) {
    for (const g of group) g.reject(err);
    return;
  }
  if (whole !== null) {
    for (const g of group) g.resolve(whole.get(g.member.runId)!);
    return;
  }
  ctx.metrics.journalAppends.inc({ path: 'locked' });
  try {
    outcomes = await ctx.core.store.write(
      (tx) =>
        writeMembers(
          ctx,
          tx,
          group.map((g) => g.member),
        ),
      appendOptions(group.map((g) => g.member.runId)),
    );
  } catch (err) {
    if (err instanceof MembersRefused) {
      const rest: QueuedAppend[] = [];
      for (const g of group) {
        const e = err.errors.get(g.member.runId);
        if (e === undefined) rest.push(g);
        else g.reject(e);
      }
      // The others again, without them: first in line.
      if (rest.length > 0) await runGroup(ctx, rest);
      return;
    }
    if (outage(err)) {
      for (const g of group) g.reject(err);
      return;
    }
    // Anything else: each append alone, so that each gets its own answer.
    ctx.core.log.warn('a group of journal appends failed; writing them one by one', {
      runs: group.length,
      error: err instanceof Error ? err.message : String(err),
    });
    await Promise.all(group.map((g) => writeAlone(ctx, g.member).then(g.resolve, g.reject)));
    return;
  }
  for (const g of group) g.resolve(outcomes.get(g.member.runId)!);
}

/** The options of every append's transaction. */
const appendOptions = (runIds: string[]) =>
  ({
    // Other cells hear of journal appends in one notification shared by the appends of a short
    // interval (store WriteOptions.notify), so concurrent runs' commits share their flushes.
    // Its rows are the runs' (the staged writes too): other cells re-read only the runs named (Change.subjects).
    isolation: 'row-locks',
    notify: 'batched',
    subjects: runIds,
  }) as const;

/** One run's append in a transaction of its own: in one round trip when it can be (writeAtOnce), else its row locked first. */
async function writeAlone(ctx: RunsContext, m: AppendMember): Promise<AppendOutcome> {
  const whole = await sentWhole(ctx, [m]);
  if (whole !== null) return whole.get(m.runId)!;
  ctx.metrics.journalAppends.inc({ path: 'locked' });
  const o = await ctx.core.store.write((tx) => writeMembers(ctx, tx, [m]), appendOptions([m.runId]));
  return o.get(m.runId)!;
}

/**
 * The members' appends sent whole (writeAtOnce), counted by how they went: their outcomes, or null
 * when they are to be written locked first (a member may not go at once, or a guard refused them).
 * A store outage is thrown: it is every member's answer, as it is the locked write's (the COMMIT may
 * have been kept: drive.ts settles each run from its journal). Anything else (a guard's refusal: a
 * lost lease, an ended run, a tail this process did not write, a storage limit) is said by the locked write.
 */
async function sentWhole(ctx: RunsContext, members: readonly AppendMember[]): Promise<Map<string, AppendOutcome> | null> {
  try {
    const whole = await writeAtOnce(ctx, members);
    if (whole !== null) ctx.metrics.journalAppends.inc({ path: 'one_round_trip' });
    return whole;
  } catch (err) {
    if (outage(err)) throw err;
    ctx.metrics.journalAppends.inc({ path: 'one_round_trip_refused' });
    return null;
  }
}

/**
 * The run's tail as this process left it, when its append may be sent in one round trip: on
 * PostgreSQL (the embedded store has no round trips), by the run's driver (fenced), after an append
 * of this process read the run's graph hash under its lock, with only writes staged that issue their
 * statements at once. Null: write it locked first.
 */
function atOnceTail(ctx: RunsContext, m: AppendMember): JournalTail | null {
  if (ctx.core.store.engine === 'embedded' || m.fence === undefined) return null;
  const tail = ctx.tails.get(m.runId);
  if (tail?.graph === undefined) return null;
  return m.staged.every((w) => w.atOnce === true) ? tail : null;
}

/**
 * Appends in one round trip (issue 40), a lone driver's or a group's, when each member could go so
 * (atOnceTail, its own cap not passed): every member's records sealed after the tail this process
 * left, then BEGIN, each run's lock with its guard in one statement (repository lockAndGuardAppend:
 * the lease, the run not ended, the graph hash, the last seq, the storage limits; in run id order, as
 * every writer of several runs' rows takes them), the staged writes, the records, their values and
 * the runs' storage shares, and COMMIT, sent together. A storage quota's guard counts what the
 * members before it add (to the cell; to its workspace), as the locked write does. A guard that
 * fails aborts the transaction, so nothing of it is kept; the caller then writes the members locked
 * first, which says which was refused and why. Null when a member may not go at once (its own cap
 * would be passed: the locked write refuses it record by record).
 */
async function writeAtOnce(ctx: RunsContext, unordered: readonly AppendMember[]): Promise<Map<string, AppendOutcome> | null> {
  const config = ctx.core.config;
  const members = [...unordered].sort((a, b) => (a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0));
  const tails: JournalTail[] = [];
  for (const m of members) {
    const tail = atOnceTail(ctx, m);
    if (tail === null) return null;
    tails.push(tail);
  }
  const sealed: { m: AppendMember; o: SealedMember; tail: JournalTail; enforcing: boolean }[] = [];
  for (const [i, m] of members.entries()) {
    const tail = tails[i]!;
    const head: repo.RunHead = {
      state: 'running',
      graph_hash: tail.graph ?? null,
      lease_owner: config.cellId,
      lease_epoch: m.fence!.epoch,
    };
    const o = await sealMember(ctx, m, head, tail, null);
    const enforcing = m.items.some((item) => item.enforce);
    if (enforcing && m.meter.bytes + o.adding > config.runStorageCapBytes) return null;
    sealed.push({ m, o, tail, enforcing });
  }
  let staged: Promise<void>[] = [];
  await ctx.core.store.write(
    async (tx) => {
      // Issued in this order, none awaited: they leave with the COMMIT, which the server answers with
      // ROLLBACK when any of them failed (store Tx.run).
      const sent: Promise<unknown>[] = [];
      let adding = 0;
      const byWorkspace = new Map<string | null, number>();
      for (const { m, o, tail, enforcing } of sealed) {
        adding += o.adding;
        const workspaceAdding = (byWorkspace.get(m.meter.workspace) ?? 0) + o.adding;
        byWorkspace.set(m.meter.workspace, workspaceAdding);
        sent.push(
          repo.lockAndGuardAppend(tx, {
            runId: m.runId,
            at: m.items.at(-1)!.f.at!,
            owner: config.cellId,
            epoch: m.fence!.epoch,
            graph: tail.graph ?? null,
            lastSeq: tail.seq,
            quota: enforcing
              ? {
                  workspaceId: m.meter.workspace,
                  adding,
                  workspaceAdding,
                  cellLimit: config.runStorageQuotaBytes,
                  workspaceLimit: config.workspaceQuotaBytes - workspaceFileBytes(ctx, m.meter.workspace),
                }
              : null,
          }),
        );
      }
      staged = sealed.flatMap(({ m }) => m.staged.map((w) => w(tx)));
      sent.push(writeSealed(tx, sealed));
      for (const p of [...sent, ...staged]) p.catch(() => undefined);
    },
    appendOptions(members.map((m) => m.runId)),
  );
  // Settled with the transaction: their answers (a reservation's amount) are read before the caller goes
  // on. One that failed did so with the connection after the COMMIT left, and the server then said the
  // transaction committed (a failed statement would have aborted it): its answer is lost, not its write
  // (journal.ts writeWithDriver reads it back).
  await Promise.allSettled(staged);
  return new Map(sealed.map(({ m, o }) => [m.runId, { recs: o.recs, tail: o.tail, refused: null }]));
}

/**
 * The transaction of a group (or of one append): the runs' rows locked first (then stamped), the
 * writes staged for them (budget), their last seqs read, in one round trip; then every record
 * sealed after its run's tail and metered, and the records, their values and the runs' storage
 * shares written with the COMMIT.
 */
async function writeMembers(ctx: RunsContext, tx: Tx, members: readonly AppendMember[]): Promise<Map<string, AppendOutcome>> {
  const at = Math.max(...members.map((m) => m.items.at(-1)!.f.at!));
  const ids = members.map((m) => m.runId);
  const enforcing = members.filter((m) => m.items.some((i) => i.enforce));
  const workspaces = [...new Set(enforcing.map((m) => m.meter.workspace))];
  // Issued together (one round trip on PostgreSQL), run in this order: the locks come first.
  const [heads, , seqs, usages] = await Promise.all([
    members.length === 1
      ? lockRun(ctx, tx, members[0]!.runId, at, members[0]!.fence).then((h) => new Map([[members[0]!.runId, h]]))
      : repo.lockRunHeads(
          tx,
          members.map((m) => ({ runId: m.runId, epoch: m.fence!.epoch })),
          ctx.core.config.cellId,
          at,
        ),
    Promise.all(members.flatMap((m) => m.staged.map((w) => w(tx)))),
    repo.lastSeqs(tx, ids),
    Promise.all(workspaces.map((ws) => repo.storageUsage(tx, ws))),
  ]);
  if (heads.size < members.length) throw new MembersRefused(await whyNotLocked(ctx, tx, members, heads));
  // The storage in use as read, plus what the members before in this group add.
  const usage = new Map(workspaces.map((ws, i) => [ws, { ...usages[i]! }]));
  const outcomes = new Map<string, AppendOutcome>();
  const kept: { m: AppendMember; o: SealedMember }[] = [];
  const refusedFirst = new Map<string, unknown>();
  for (const m of members) {
    const head = heads.get(m.runId)!;
    const tail = await tailAt(ctx, tx, m.runId, seqs.get(m.runId) ?? 0);
    const o = await sealMember(ctx, m, head, tail, usage.get(m.meter.workspace) ?? null);
    if (o.recs.length === 0) {
      // Its first record refused: nothing of it is kept, its staged writes neither (they wait for the next append).
      refusedFirst.set(m.runId, o.refused ?? new TypeError('appendJournalBatch: nothing to write'));
      continue;
    }
    outcomes.set(m.runId, o);
    for (const u of usage.values()) {
      u.cell += o.adding;
    }
    const ws = usage.get(m.meter.workspace);
    if (ws && m.meter.workspace !== null) ws.workspace += o.adding;
    kept.push({ m, o });
  }
  if (refusedFirst.size > 0) {
    if (members.length === 1) throw refusedFirst.values().next().value;
    throw new MembersRefused(refusedFirst);
  }
  // Not waited for: they travel with the COMMIT (store Tx.run), whose write fails with them.
  writeSealed(tx, kept).catch(() => undefined);
  return outcomes;
}

/** What sealMember answers: the member's outcome, what it adds to storage, its values and the hashes new to its meter. */
type SealedMember = Awaited<ReturnType<typeof sealMember>>;

/**
 * Issues the members' storage shares, their values and their records (one statement each, in that
 * order) and moves their meters once the transaction commits. Not awaited by the callers: they leave
 * with the COMMIT, whose write fails with them.
 */
function writeSealed(tx: Tx, kept: readonly { m: AppendMember; o: SealedMember }[]): Promise<unknown> {
  const values = new Map<string, PreparedValue>();
  for (const { o } of kept) for (const v of o.values) values.set(v.hash, v);
  const sent = Promise.all([
    repo.addStorages(
      tx,
      kept.map(({ m, o }) => ({ runId: m.runId, workspaceId: m.meter.workspace, bytes: o.adding })),
    ),
    repo.putBlobs(tx, [...values.values()].sort(byHash)),
    repo.insertRecords(
      tx,
      kept.flatMap(({ o }) => o.recs),
    ),
  ]);
  tx.afterCommit(() => {
    for (const { m, o } of kept) {
      m.meter.bytes += o.adding;
      m.meter.spec = 0;
      for (const h of o.fresh) m.meter.hashes.add(h);
    }
  });
  return sent;
}

/**
 * A member's records sealed after `tail` and metered; with `usage`, stops at the first a storage limit
 * refuses. The tail it leaves carries the graph hash of `head`.
 */
async function sealMember(
  ctx: RunsContext,
  m: AppendMember,
  head: repo.RunHead,
  after: JournalTail,
  usage: { cell: number; workspace: number } | null,
): Promise<AppendOutcome & { adding: number; values: PreparedValue[]; fresh: Set<string> }> {
  const { meter } = m;
  let tail: JournalTail = after;
  const epoch = m.fence ? m.fence.epoch : head.lease_epoch;
  const recs: JournalRecord[] = [];
  const values: PreparedValue[] = [];
  const fresh = new Set<string>();
  let adding = 0;
  let refused: RunStorageLimitError | null = null;
  for (const item of m.items) {
    const sealed = await sealAfter(ctx, tail, m.runId, head.graph_hash ?? EMPTY_HASH, item.f, epoch);
    const trial = new Set(fresh);
    const add = measure(
      { ...meter, spec: recs.length === 0 ? meter.spec : 0 },
      byteSize(recordText(sealed.rec)),
      item.values,
      trial,
    ).adding;
    if (item.enforce && usage) {
      refused = usageRefusal(ctx, meter, usage, adding + add);
      if (refused) break;
    }
    for (const h of trial) fresh.add(h);
    values.push(...item.values);
    adding += add;
    recs.push(sealed.rec);
    tail = sealed.tail;
  }
  return { recs, tail: { seq: tail.seq, hash: tail.hash, graph: head.graph_hash }, refused, adding, values, fresh };
}

/** For each member whose row did not lock: why, as a lone append would have said (RunClosedError, LeaseLostError). */
async function whyNotLocked(
  ctx: RunsContext,
  tx: Tx,
  members: readonly AppendMember[],
  heads: ReadonlyMap<string, repo.RunHead>,
): Promise<Map<string, unknown>> {
  const out = new Map<string, unknown>();
  for (const m of members) {
    if (heads.has(m.runId)) continue;
    const s = await repo.runHead(tx, m.runId);
    let err: unknown = new RunClosedError(m.runId, s?.state ?? 'unknown');
    if (s && !isTerminal(s.state) && m.fence) {
      try {
        assertFence(ctx, m.runId, s, m.fence);
      } catch (e) {
        err = e;
      }
    }
    out.set(m.runId, err);
  }
  return out;
}
