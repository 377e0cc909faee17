/**
 * The durable cron scheduler of job definitions.
 *
 * - One timer, never polling: it sleeps until the earliest stored
 *   `next_fire_at` of an enabled, live definition (an indexed MIN query), fires
 *   what is due, and sleeps again. Any change to a definition re-arms it.
 * - A fire is one transaction: a compare-and-set on the definition's
 *   `next_fire_at` (the time being fired) advances it to the next cron time,
 *   takes the lease (`lease_owner` = this cell, `lease_until` = now + 60 s but
 *   never past the next fire time, unless that time is already due: then 1 s,
 *   so one cell fires a backlog in order while its peers wait), records the fire in `job_fires`, and for
 *   compute / sql / notebook / agent creates the job run row (the same submit
 *   path as POST jobs/runs; agent.ts runs the pinned graph). So a fire happens
 *   at most once: a restart, a second tick or a second cell sees the advanced
 *   `next_fire_at` (or a live lease of another cell) and does nothing. The run
 *   is then driven; a crash before that leaves it queued and the runs
 *   recovery drives it.
 * - A group of cells (one PostgreSQL store): every cell arms its timer for the
 *   earliest next fire, re-armed when another cell changes a definition
 *   (`store.onChange`), so whichever cells are up, each scheduled time is
 *   fired by exactly one of them: at least one (every live cell's timer goes
 *   off), at most one (the compare-and-set). A lease never outlives the next
 *   fire time, so a cell that dies after a fire does not hold the next one.
 * - team fires are recorded `pending` in the same transaction, with the id
 *   their crew run will have, and dispatched right after (Agent Teams' crew
 *   run path: compile, placement, ledgers). A pending fire left behind (its
 *   cell crashed, or died: it is still pending a minute later) is taken over
 *   by a compare-and-set and dispatched, at start and at every tick (durable
 *   dispatch). Dispatching launches the run under the reserved id, so of two
 *   launches of one fire (a cell dying between launch and settle, a launch
 *   slower than the grace) the run table's key lets one through.
 * - Late and missed fires: a cell that fires a time late by less than the
 *   misfire grace (60 s: a busy or paused process, a cell taking over from one
 *   that died) fires every scheduled time in order, each once. A time no cell
 *   fired within the grace was missed (no cell of the group ran): catch_up
 *   `once` runs the definition once however many were missed, `skip` only
 *   advances. Either way `next_fire_at` moves past now.
 * - Authority at fire time: the definition acts as its author only while the
 *   author is an active principal whose recorded authority, intersected with
 *   its current role permissions, still grants what the job type needs
 *   (definition-authority.ts). Otherwise the fire is refused and the
 *   definition disabled, with the reason on it, in `job_fires` and on the
 *   audit trail, in the same compare-and-set transaction.
 * - Storage: a fire whose workspace (or cell) has no storage room left for a
 *   run is recorded `refused` (detail `workspace_quota` or
 *   `cell_storage_quota`) and creates no run (cell/runs/storage.ts).
 * - Minimum interval: the next fire is never sooner than the cell's minimum
 *   interval after this one, even for a definition authored before the
 *   minimum was raised.
 * - Times are the group's (`ctx.groupClock`: the database's clock, as the
 *   cell measures its offset to it at each heartbeat; the cell clock when
 *   injected). A cell whose clock strays beyond the bound fires nothing and
 *   looks again a second later.
 * - Store outages: a tick or a re-arm that cannot read the store is logged
 *   once per outage and tried again with a back-off (250 ms doubling to 2 s; at once when the store's notifications resume),
 *   then the scheduler resumes by itself (missed times: the grace and the
 *   catch_up policy above). Nothing of it ever rejects into a timer.
 * - With a manual clock, tests call `tick()` after moving the clock.
 */
import type { JobsContext } from './context.ts';
import { authorityLapse, disableAtFireTx } from './definition-authority.ts';
import { nextFireAfter } from './definitions.ts';
import { jobGraphHash } from './graph.ts';
import * as repo from './repository.ts';
import type { Definition } from './repository.ts';
import { startJobDrive } from './runner.ts';

/** How long a cell's lease on a definition lasts after it fires, ms (never past the next fire time). */
export const LEASE_MS = 60_000;
/** The lease of a cell firing a backlog (its next time already due), ms: peers wait this long for it. */
export const CATCH_UP_LEASE_MS = 1_000;
/** A scheduled time not fired within this long was missed (no cell ran): the catch_up policy applies. */
export const MISFIRE_GRACE_MS = 60_000;
/** A team fire still pending this long after it was recorded is taken over by another cell. */
export const PENDING_GRACE_MS = 60_000;
const MAX_TIMER_MS = 2 ** 31 - 1;
/** Back-off of a tick or re-arm that could not read the store: first retry, and ceiling, ms. */
const RETRY_FIRST_MS = 250;
/** How long a starting cell waits for its first tick (the backlog of missed seconds) before it listens anyway, ms. */
const START_WAIT_MS = 2_000;
const RETRY_MAX_MS = 2_000;
/** An untrusted clock (beyond the skew bound) is looked at again this often, ms. */
const UNTRUSTED_RECHECK_MS = 1_000;
const BATCH = 200;

export class Scheduler {
  #timer: ReturnType<typeof setTimeout> | null = null;
  #armedFor: number | null = null;
  /** The tick under way, if any. */
  #inFlight: Promise<number> | null = null;
  /** Times a tick has read the clock (to tell whether a tick read it after a request for one). */
  #clockReads = 0;
  #stopped = false;
  /** Asked for a tick while one was under way: it looks at the clock again before it ends. */
  #again = false;
  /** Re-arms started so far; only the latest one's read arms the timer. */
  #rearms = 0;
  #rearming: Promise<void> = Promise.resolve();
  /** Team fires this scheduler is dispatching now (`<schedule_id>@<fire_at>`): never taken over by itself. */
  readonly #dispatching = new Set<string>();
  /** The current store outage (logged once), and the next retry's delay. */
  #failing: { since: number; retryMs: number } | null = null;
  #retry: ReturnType<typeof setTimeout> | null = null;
  /** Fires done by this scheduler (tests, metrics). */
  fired = 0;
  /** Ticks run (the bench checks that an idle scheduler does not tick). */
  ticks = 0;

  constructor(private readonly ctx: JobsContext) {}

  /** Start: dispatch pending fires left behind, fire what is due (missed fires by the catch_up policy), then arm. */
  async start(): Promise<void> {
    // Awaited for START_WAIT_MS at most: a backlog (the seconds missed while the group was down) that takes
    // longer goes on firing in the background while the cell listens. Each fire is a few store writes: on a
    // loaded machine a restarted cell's backlog held up its start past a minute.
    const first = this.ctx.core.traces.detached(() => this.tick());
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([first, new Promise<void>((r) => (timer = setTimeout(r, START_WAIT_MS)))]);
    clearTimeout(timer);
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    if (this.#retry) clearTimeout(this.#retry);
    this.#retry = null;
  }

  /** A store call failed (`what`): logged once per outage (the first failure of it names what failed). */
  #noteFailure(what: string, err: unknown, fields: Record<string, unknown> = {}): void {
    if (this.#failing !== null) return;
    this.#failing = { since: Date.now(), retryMs: RETRY_FIRST_MS };
    this.ctx.core.log.error(`scheduler: ${what}; retrying with back-off until the store answers`, {
      ...fields,
      error: err,
    });
  }

  /** The store failed (`what`): logged once per outage; a tick is tried again after the back-off. */
  #storeFailed(what: string, err: unknown): void {
    if (this.#failing === null) this.#noteFailure(what, err);
    else this.#failing.retryMs = Math.min(this.#failing.retryMs * 2, RETRY_MAX_MS);
    this.#later(this.#failing!.retryMs);
  }

  /** The store answered: the outage (if any) is over. */
  #storeAnswered(): void {
    if (this.#failing === null) return;
    this.ctx.core.log.info('scheduler: the store answers again; firing resumes', { outage_ms: Date.now() - this.#failing.since });
    this.#failing = null;
  }

  /** A tick in `ms` (retries; an untrusted clock looked at again), beside the armed timer. */
  #later(ms: number): void {
    if (this.#stopped || this.#retry) return;
    this.#retry = setTimeout(() => {
      this.#retry = null;
      void this.ctx.core.traces.detached(() => this.tick());
    }, ms);
    this.#retry.unref?.();
  }

  /**
   * Re-arms the timer for the earliest next fire (after a definition changed).
   * Reads may complete out of order (PostgreSQL runs them on a pool): only the
   * latest re-arm's read arms the timer, so an older, stale time never replaces
   * a newer one. Resolves once this re-arm is done (never rejects).
   */
  rearm(): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    const seq = ++this.#rearms;
    const { store, config } = this.ctx.core;
    const clock = this.ctx.groupClock;
    this.#rearming = Promise.all([repo.earliestFire(store, config.cellId), repo.oldestPendingFire(store)]).then(
      ([fire, pending]) => {
        // A pending fire becomes another cell's to take over after the grace; one this cell is still
        // dispatching past it is looked at again a second later, not in a loop.
        const takeover = pending === null ? null : Math.max(pending + PENDING_GRACE_MS, clock.now() + 1000);
        const t = fire === null ? takeover : takeover === null ? fire : Math.min(fire, takeover);
        if (seq === this.#rearms) this.#arm(t);
      },
      (err: unknown) => this.#storeFailed('cannot read the next fire time', err),
    );
    return this.#rearming;
  }

  /** Resolves once the latest re-arm (e.g. the one a definition route started) has armed the timer. */
  rearmed(): Promise<void> {
    return this.#rearming;
  }

  #arm(t: number | null): void {
    if (this.#stopped) return;
    if (this.#timer && this.#armedFor === t) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    this.#armedFor = t;
    if (t === null) return;
    const delay = Math.min(Math.max(0, t - this.ctx.groupClock.now()), MAX_TIMER_MS);
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#armedFor = null;
      // The timer may have been armed by a request (a definition changed): a fire is the cell's own work, not that request's.
      void this.ctx.core.traces.detached(() => this.tick());
    }, delay);
    this.#timer.unref?.();
  }

  /** When the timer would fire next (ms since the epoch), or null. */
  get armedFor(): number | null {
    return this.#armedFor;
  }

  /**
   * Fires every due definition (and dispatches pending fires left behind); returns how many fired.
   * Asked while a tick is under way (its timer, a re-arm's, a retry's), it waits for that tick, which
   * looks at the clock again before it ends; or, should that tick have ended its loop already, ticks
   * again. Either way what is due when it is asked has been fired (or skipped) when it resolves, and
   * it answers with the count of the tick that did it.
   */
  async tick(): Promise<number> {
    const asked = this.#clockReads;
    for (let running = this.#inFlight; running !== null; running = this.#inFlight) {
      this.#again = true;
      const n = await running;
      // A tick that read the clock after this request has ended: what was due then was its.
      if (this.#clockReads > asked && this.#inFlight === null) return n;
    }
    const p = this.#tickOnce();
    this.#inFlight = p;
    try {
      return await p;
    } finally {
      this.#inFlight = null;
    }
  }

  /** The group's clock, as a tick reads it (counted: tick() tells a read after its request by it). */
  #readClock(): number {
    this.#clockReads++;
    return this.ctx.groupClock.now();
  }

  async #tickOnce(): Promise<number> {
    this.#again = false;
    this.ticks++;
    let n = 0;
    let rearm = true;
    try {
      if (!this.ctx.groupClock.trusted()) {
        // This cell's clock strays beyond the bound (cell/cluster says so, once): its peers fire.
        this.#later(UNTRUSTED_RECHECK_MS);
        return 0;
      }
      await this.#dispatchPending().catch((err: unknown) => this.#noteFailure('cannot dispatch pending fires', err));
      // What was due when the tick began (or was asked again) is fired here, backlog included; a second falling due
      // meanwhile is the next tick's. Chasing the clock instead never ends when one fire takes a second (a loaded
      // machine), and the first tick holds up the cell's start.
      let now = this.#readClock();
      for (let guard = 0; guard < 1000; guard++) {
        let due: Awaited<ReturnType<typeof repo.dueDefinitions>>;
        try {
          due = await repo.dueDefinitions(this.ctx.core.store, now, BATCH);
        } catch (err) {
          // Never a rejection into the timer (which would end the process): logged once, tried again.
          this.#storeFailed('cannot read the due definitions', err);
          rearm = false;
          return n;
        }
        this.#storeAnswered();
        let progressed = false;
        for (const d of due) {
          try {
            if (await this.#fire(d.schedule_id, d.next_fire_at, now)) {
              n++;
              progressed = true;
              this.ctx.metrics.schedulerFires.inc();
              this.ctx.metrics.schedulerLateness.observe(Math.max(0, now - d.next_fire_at) / 1000);
            }
          } catch (err) {
            // Most often the store going away between the read and the fire: one line per outage.
            this.#noteFailure('scheduled fire failed', err, { schedule_id: d.schedule_id });
            this.#later(this.#failing?.retryMs ?? RETRY_FIRST_MS);
          }
        }
        // Catching up (a store outage, a pause): the next due times are fired in this tick, not one per timer hop.
        if (due.length < BATCH && !this.#again && !progressed) break;
        if (this.#again) now = this.#readClock();
        this.#again = false;
      }
    } finally {
      if (rearm) void this.rearm();
    }
    return n;
  }

  /** One fire of one definition at its scheduled time `at` (compare-and-set). Returns true when it fired. */
  async #fire(id: string, at: number, now: number): Promise<boolean> {
    const { core, runs } = this.ctx;
    const def = await repo.definitionById(core.store, id);
    if (!def?.enabled || def.deleted_at !== null || def.next_fire_at !== at) return false;
    const me = core.config.cellId;
    if (def.lease_owner !== null && def.lease_owner !== me && (def.lease_until ?? 0) > now) return false;
    // Late by less than the grace: the next scheduled time follows this one (fired at once if already due).
    // Missed: the catch_up policy, and the next time is after now. Never sooner than the minimum interval.
    const missed = now - at > MISFIRE_GRACE_MS;
    const earliest = at + core.config.scheduleMinIntervalSeconds * 1000 - 1;
    const next = nextFireAfter(def.cron, def.timezone, missed ? Math.max(now, earliest) : earliest);
    const skip = missed && def.catch_up === 'skip';
    // The author, as it is now. (A deactivation racing this fire disables the definition in its own
    // transaction: the compare-and-set below then finds it disabled, or the run it made is the last.)
    const lapse = await authorityLapse(this.ctx, def);
    const specBytes = Buffer.byteLength(JSON.stringify(def.spec ?? null), 'utf8');
    // Row locks, not serializable: the compare-and-set on next_fire_at (a row lock, re-checked after a
    // concurrent fire commits) is what makes a fire happen once. Serializable, the storage room read
    // conflicted with every run's storage fold and a fire ran two or three times over on a busy group,
    // each ~0.5 s: an every-second definition fell seconds behind.
    const result = await core.store.write(
      async (tx) => {
        if (lapse !== null) {
          return (await disableAtFireTx(this.ctx, tx, def, at, lapse, now)) ? { runId: null as string | null, refused: lapse } : null;
        }
        // A workspace (or cell) whose storage has no room for the run: this fire is refused, the next one may run.
        const noRoom = skip ? null : await runs.storageRoomRefusal(def.workspace_id, specBytes, tx);
        const held = skip || noRoom !== null;
        // While catching up (the next time is already due), the lease holds a moment past now, so the
        // cell catching up fires the backlog in order while its peers wait instead of racing it for each time.
        const leaseUntil = next === null ? now + LEASE_MS : Math.min(now + LEASE_MS, Math.max(next, now + CATCH_UP_LEASE_MS));
        if (!(await repo.claimFire(tx, id, at, { next, cellId: me, now, leaseUntil, held }))) return null;
        if (held) {
          await repo.recordFire(tx, {
            schedule_id: id,
            fire_at: at,
            state: skip ? 'skipped' : 'refused',
            run_id: null,
            detail: noRoom?.reason ?? 'missed while no cell ran; catch_up skip',
            cell_id: me,
            at: now,
          });
          return { runId: null as string | null, held: noRoom?.reason ?? 'skipped' };
        }
        let runId: string | null = null;
        let reserved: string | null = null;
        if (def.job_type === 'team') reserved = runs.newRunId();
        else {
          runId = await runs.createRunTx(tx, {
            kind: 'job',
            job_type: def.job_type,
            workspace_id: def.workspace_id,
            requester: def.author_id,
            spec: def.spec,
            graph_hash: jobGraphHash(def.job_type, def.spec),
            source: `schedule:${id}`,
            flags: { schedule_id: id, scheduled_for: at },
            at: now,
          });
          await repo.setLastRun(tx, id, runId);
        }
        await repo.recordFire(tx, {
          schedule_id: id,
          fire_at: at,
          state: runId ? 'dispatched' : 'pending',
          run_id: runId ?? reserved,
          detail: null,
          cell_id: me,
          at: now,
        });
        return { runId, reserved };
      },
      { isolation: 'row-locks' },
    );
    if (result === null) return false;
    if ('refused' in result) {
      core.log.warn('scheduled fire refused: definition disabled', { schedule_id: id, reason: result.refused });
      return false;
    }
    if ('held' in result) {
      if (!skip) core.log.warn('scheduled fire refused: no storage room', { schedule_id: id, reason: result.held });
      return false;
    }
    this.fired++;
    if (result.runId) {
      const run = await runs.getRun(result.runId);
      if (run) void startJobDrive(this.ctx, run);
    } else {
      await this.#dispatch(def, at, result.reserved);
    }
    return true;
  }

  /** Dispatches an agent or team fire recorded pending (crew run path). */
  async #dispatch(def: Definition, at: number, reserved: string | null): Promise<void> {
    const key = `${def.schedule_id}@${at}`;
    this.#dispatching.add(key);
    try {
      await this.#dispatchOnce(def, at, reserved);
    } finally {
      this.#dispatching.delete(key);
    }
  }

  /**
   * Launches the fire's crew run under its reserved id (null: a fire recorded
   * before ids were reserved). A run already under that id was launched by an
   * earlier dispatch of this fire (this cell before a crash, or a cell that
   * died or was slow): the fire is settled with it, not launched again.
   */
  async #dispatchOnce(def: Definition, at: number, reserved: string | null): Promise<void> {
    const { core, runs, teams } = this.ctx;
    let runId: string | null = null;
    let state: repo.FireState = 'dispatched';
    let detail: string | null = null;
    try {
      if (reserved !== null && (await runs.getRun(reserved))) {
        await core.store.write(async (tx) => {
          await repo.settleFire(tx, def.schedule_id, at, 'dispatched', reserved, null);
          await repo.setLastRun(tx, def.schedule_id, reserved);
        });
        return;
      }
      const spec = def.spec as { crew_id?: string; input?: unknown };
      const crewId = spec.crew_id;
      // A pending fire dispatched after a restart: its author is judged again.
      const lapse = await authorityLapse(this.ctx, (await repo.definitionById(core.store, def.schedule_id)) ?? def);
      if (lapse !== null) {
        state = 'refused';
        detail = lapse;
      } else if (!crewId) {
        state = 'refused';
        detail = 'crew_unknown';
      } else {
        const run = await teams.startCrewRun(
          def.author_id,
          crewId,
          { input: spec.input ?? null, workspace_id: def.workspace_id },
          { ...(reserved !== null ? { runId: reserved } : {}), source: `schedule:${def.schedule_id}` },
        );
        runId = run.run_id;
        await runs.setRunFlags(runId, { schedule_id: def.schedule_id, scheduled_for: at });
      }
    } catch (err) {
      // A crew run refused before its first step is still a run (its id is in details).
      const d = (err as { details?: Record<string, unknown> }).details;
      runId = typeof d?.['run_id'] === 'string' ? d['run_id'] : null;
      detail = typeof d?.['reason'] === 'string' ? d['reason'] : 'dispatch_failed';
      if (runId === null && reserved !== null && (await runs.getRun(reserved))) {
        // Another dispatch of this fire created the run first (the insert under the reserved id failed): it is that run.
        runId = reserved;
        detail = null;
      }
      state = runId ? 'dispatched' : 'refused';
    }
    const settledRun = runId;
    await core.store.write(async (tx) => {
      await repo.settleFire(tx, def.schedule_id, at, state, settledRun, detail);
      if (settledRun) await repo.setLastRun(tx, def.schedule_id, settledRun);
    });
  }

  /**
   * Dispatches the pending fires left behind: this cell's own (recorded before
   * it restarted) and any another cell has not dispatched within the grace
   * (it died). Each is taken over by a compare-and-set first, so of the cells
   * that find it, one dispatches it.
   */
  async #dispatchPending(): Promise<void> {
    const { core } = this.ctx;
    const me = core.config.cellId;
    for (const r of await repo.pendingFires(core.store, 1000)) {
      const now = this.ctx.groupClock.now();
      if (r.cell_id !== me && now - r.created_at < PENDING_GRACE_MS) continue;
      if (r.cell_id === me && this.#dispatching.has(`${r.schedule_id}@${r.fire_at}`)) continue;
      if (!(await core.store.write((tx) => repo.claimPendingFire(tx, r, me, now)))) continue;
      const def = await repo.definitionById(core.store, r.schedule_id);
      if (def) await this.#dispatch(def, r.fire_at, r.run_id);
      else await core.store.write((tx) => repo.settleFire(tx, r.schedule_id, r.fire_at, 'refused', null, 'definition_gone'));
    }
  }
}
