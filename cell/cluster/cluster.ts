/**
 * Group membership: the cells started on one store form a group. Each cell
 * registers what it is (id, region, clearance, topology, posture, address;
 * its public keys are the iam module's `cell_keys`) and then heartbeats: one
 * write per cell every `heartbeatMs`, never one per run. A run's lease is its
 * owner's heartbeat (cell/runs/lease.ts): when a cell's heartbeat is older
 * than its `leaseMs`, or it stopped cleanly, its runs may be taken over.
 *
 * Members are classified from the heartbeat's age, by the member's own
 * settings: `live` (beat within two intervals), `suspect` (late, but within
 * its lease), `dead` (past its lease, or stopped).
 *
 * One clock: on PostgreSQL heartbeats are stamped, and judged, with the
 * database's clock (`clock_timestamp()` in the statement that writes or
 * judges them), never a cell's. Each cell measures its own offset to the
 * database at every heartbeat: beyond `maxClockSkewMs` it stops judging peers
 * dead (no takeover claims), stops its sweeps and its scheduler's fires,
 * answers not-ready on /readyz and says what to fix, until the clocks agree
 * again. The scheduler reads the group's time as this cell's clock corrected
 * by that offset (`now()`).
 *
 * One member per id: a cell keeps a secret in its data directory
 * (`member-<hash of id>.key`); the row holds its SHA-256, and only that
 * holder beats or stops the row. A process started with the id of a live
 * member that holds another key refuses to start (`cell_id_in_use`); the same
 * data directory restarting after a crash is the same member and joins at once.
 *
 * On the embedded store the cell is alone by construction (its directory
 * lock): it registers but writes no heartbeat (no fsync twice a second for
 * nothing) and counts itself live; rows of other ids there are cells this
 * data directory ran as before, dead once their lease passed. A cell started
 * with an injected clock (the in-process tests) judges on that clock on both
 * engines.
 *
 * Posture: `multi-cell` needs the PostgreSQL store; a `single-cell` cell
 * refuses to join a store that has another live (or suspect) member, and no
 * cell joins a store where a live `single-cell` cell claims to be alone.
 * Joining is one serializable transaction, so two cells starting at once
 * cannot both pass the check.
 *
 * Store outages: a failing heartbeat is logged once per outage (and its end
 * once), the cell reports not-ready meanwhile, and the beat goes on at its
 * interval until the store answers again. An outage is nobody's death: after
 * one, a peer's heartbeat is judged from the moment the store answered again
 * (the PostgreSQL server's start, or the end of this cell's own failing
 * beats, whichever is later), so every member gets a whole lease to beat
 * before its runs may be taken over.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileDurable } from '../../runtime/write-durable.ts';
import { systemClock, type CellCore } from '../context.ts';
import type { Tx } from '../store/types.ts';
import * as repo from './repository.ts';

export type MemberState = 'live' | 'suspect' | 'dead';
export const MEMBER_STATES: readonly MemberState[] = ['live', 'suspect', 'dead'];

export interface Member extends repo.CellRow {
  state: MemberState;
}

/** Thrown at start when the cell must not join the group (posture); main.ts prints the message and exits. */
export class ClusterRefusal extends Error {
  constructor(
    message: string,
    readonly reason: string,
  ) {
    super(message);
    this.name = 'ClusterRefusal';
  }
}

/**
 * A member's state at `now`, judged by its own heartbeat interval and lease.
 * `since`: from when a heartbeat could be expected at all (the end of a store
 * outage): a member is not judged late for beats it could not write.
 */
export function memberState(c: repo.CellRow, now: number, since = 0): MemberState {
  if (c.stopped_at !== null) return 'dead';
  const age = now - Math.max(c.heartbeat_at, since);
  if (age <= Math.min(2 * c.heartbeat_ms, c.lease_ms)) return 'live';
  if (age <= c.lease_ms) return 'suspect';
  return 'dead';
}

/** What a run needs of the cell that executes it (placement: hard constraints). */
export interface PlacementNeed {
  clearance: number;
  topology: Record<string, string>;
}

/** True when a cell of this clearance and topology meets `need`. */
export function qualifies(cell: { clearance: number; topology: Record<string, string> }, need: PlacementNeed): boolean {
  if (!(cell.clearance >= need.clearance)) return false;
  for (const [k, v] of Object.entries(need.topology)) if (!Object.hasOwn(cell.topology, k) || cell.topology[k] !== v) return false;
  return true;
}

/** The group's time, as the scheduler reads it. */
export interface GroupClock {
  /** Ms since the epoch on the database's clock: this cell's clock corrected by its measured offset. */
  now(): number;
  /** False while this cell's clock is off the database's beyond the bound: it must not fire schedules. */
  trusted(): boolean;
}

/** What this cell knows of its clock against the database's (readiness, /admin/cells, the metric). */
export interface ClockReport {
  /** This cell's clock minus the database's, ms (0 on the embedded store); null before the first measure. */
  offsetMs: number | null;
  /** True while the offset is beyond `maxClockSkewMs`. */
  skewed: boolean;
}

/** The member secret of this data directory for `cellId` (created on first start), as its SHA-256 hex. */
function memberKey(dataDir: string, cellId: string): string {
  const file = join(dataDir, `member-${createHash('sha256').update(cellId).digest('hex').slice(0, 16)}.key`);
  let secret = existsSync(file) ? readFileSync(file, 'utf8').trim() : '';
  if (!secret) {
    secret = randomBytes(32).toString('base64url');
    writeFileDurable(file, `${secret}\n`, { mode: 0o600 });
  }
  return createHash('sha256').update(secret).digest('hex');
}

export class Cluster implements GroupClock {
  #timer: ReturnType<typeof setInterval> | null = null;
  #beating: Promise<void> | null = null;
  #sweeping: Promise<void> | null = null;
  readonly #ticks: Array<() => Promise<void>> = [];
  #stopped = false;
  /** Heartbeats and judgements read the database's clock (PostgreSQL, system clock) rather than the cell's. */
  readonly #dbClock: boolean;
  #memberKey: string | null = null;
  #offsetMs: number | null = null;
  #skewed = false;
  /** When the current outage (failing heartbeats) began, by this cell's clock; null while beats succeed. */
  #failingSince: number | null = null;
  /** When this cell's heartbeat last resumed after failing (group clock): peers are not judged late for the outage. */
  #answeringSince = 0;
  /** The earliest moment (database clock) a peer seen live or suspect lapses, from the last member read. */
  #nextLapse: number | null = null;
  #wake: ReturnType<typeof setTimeout> | null = null;
  /** True from a failed sweep to the next one that succeeds (its failure is logged once). */
  #sweepFailing = false;
  /** Told of each measured offset (the `cell_clock_offset_seconds` gauge). */
  onOffset: ((offsetMs: number) => void) | null = null;

  constructor(private readonly core: CellCore) {
    this.#dbClock = core.store.engine === 'postgres' && core.clock === systemClock;
    if (!this.#dbClock) this.#offsetMs = 0;
  }

  get cellId(): string {
    return this.core.config.cellId;
  }

  /** This cell's own placement attributes. */
  get self(): { cellId: string; clearance: number; topology: Record<string, string> } {
    const c = this.core.config;
    return { cellId: c.cellId, clearance: c.clearance, topology: c.topology };
  }

  /** The group's time (GroupClock). */
  now(): number {
    return this.core.clock.now() - (this.#offsetMs ?? 0);
  }

  /** False while this cell's clock is beyond the bound (GroupClock). */
  trusted(): boolean {
    return !this.#skewed;
  }

  clock(): ClockReport {
    return { offsetMs: this.#offsetMs, skewed: this.#skewed };
  }

  /** Why this cell is not ready as a member (`clock_skew`, `heartbeat_failing`), or 'ok'. */
  health(): string {
    if (this.#skewed) return 'clock_skew';
    if (this.#failingSince !== null) return 'heartbeat_failing';
    return 'ok';
  }

  #now(local: number): repo.DbNow {
    return this.#dbClock ? repo.dbNow('postgres', local) : repo.dbNow('embedded', local);
  }

  /**
   * The judging clock now (the database's, or the injected clock), and from
   * when a peer's heartbeat could be expected: after the store came back,
   * whether this cell saw it away (its heartbeat failed) or the server says
   * so (it started since). A store outage is nobody's death: without this, the
   * first cell to beat after one would take over the runs of every peer.
   */
  async #judgeClock(): Promise<{ now: number; since: number }> {
    const local = this.core.clock.now();
    if (!this.#dbClock) return { now: local, since: this.#answeringSince };
    const c = await repo.readJudgeClock(this.core.store, this.#now(local));
    return { now: c.now, since: Math.max(c.up, this.#answeringSince) };
  }

  #key(): string {
    this.#memberKey ??= memberKey(this.core.config.dataDir, this.core.config.cellId);
    return this.#memberKey;
  }

  /**
   * Registers this cell (start). Refuses (ClusterRefusal) a posture that does
   * not allow the group it would join, or an id a live member holds, writing nothing.
   */
  async join(): Promise<void> {
    const { config, store, clock } = this.core;
    if (!(config.heartbeatMs > 0) || !(config.leaseMs >= 2 * config.heartbeatMs))
      throw new ClusterRefusal(
        `the lease (${config.leaseMs} ms) must be at least two heartbeat intervals (${config.heartbeatMs} ms)`,
        'lease_too_short',
      );
    if (config.posture === 'multi-cell' && store.engine !== 'postgres')
      throw new ClusterRefusal(
        'posture multi-cell needs the PostgreSQL store: cells form a group on one PostgreSQL database (--store postgres://user@host:port/db)',
        'multi_cell_needs_postgres',
      );
    const key = this.#key();
    if (this.#dbClock) await this.#measure();
    // The embedded store is one process's by its directory lock: another id's row there is a cell
    // this data directory ran as before (a replaced id), never a second live member.
    const shared = store.engine === 'postgres';
    await store.write(async (tx) => {
      const now = this.#now(clock.now());
      const at = await repo.readNow(tx, now);
      const rows = shared ? await repo.allCells(tx) : [];
      const others = rows.filter((c) => c.cell_id !== config.cellId && memberState(c, at) !== 'dead');
      if (config.posture === 'single-cell' && others.length > 0)
        throw new ClusterRefusal(
          `posture single-cell: this store already has a live cell (${others.map((c) => c.cell_id).join(', ')}); ` +
            'start every cell of a group with --posture multi-cell on the PostgreSQL store, or give this cell a store of its own',
          'single_cell_group',
        );
      const alone = others.filter((c) => c.posture === 'single-cell');
      if (alone.length > 0)
        throw new ClusterRefusal(
          `cell ${alone[0]!.cell_id} runs on this store with posture single-cell and is live: it does not share its store; ` +
            'stop it, or restart it with --posture multi-cell',
          'single_cell_member',
        );
      const held = rows.find((c) => c.cell_id === config.cellId);
      if (held && held.member_key !== null && held.member_key !== key && memberState(held, at) !== 'dead')
        throw new ClusterRefusal(
          `cell id ${config.cellId} is in use: a live member of this group holds it (last heartbeat ${Math.max(0, at - held.heartbeat_at)} ms ago` +
            `${held.url ? `, at ${held.url}` : ''}, started from another data directory). Start this cell with its own --cell-id, ` +
            `or stop that member first (its id is free once it stops, or ${held.lease_ms} ms after its last heartbeat)`,
          'cell_id_in_use',
        );
      await repo.upsertCell(
        tx,
        {
          cell_id: config.cellId,
          region: config.region,
          clearance: config.clearance,
          topology: config.topology,
          posture: config.posture,
          url: config.publicUrl,
          heartbeat_ms: config.heartbeatMs,
          lease_ms: config.leaseMs,
          stopped_at: null,
          member_key: key,
          clock_offset_ms: this.#dbClock ? this.#offsetMs : null,
        },
        now,
      );
    });
  }

  /** Runs `fn` after each heartbeat (takeover sweeps); one at a time, errors logged. */
  onTick(fn: () => Promise<void>): void {
    this.#ticks.push(fn);
  }

  /** Starts the heartbeat (once the cell listens: its address is known). */
  start(): void {
    if (this.#timer) return;
    this.#stopped = false;
    // The beat never waits for the sweeps: a slow sweep must not make this cell look dead.
    const t = setInterval(() => {
      if (this.#beating) return; // the previous beat still runs
      this.#beating = this.beatLogged().then((ok) => {
        this.#beating = null;
        if (ok) this.#sweepSoon();
      });
    }, this.core.config.heartbeatMs);
    t.unref();
    this.#timer = t;
  }

  /** Starts the sweeps unless they run; then arms the wake-up at the next lapse of a peer. */
  #sweepSoon(): void {
    if (this.#sweeping || this.#stopped) return;
    this.#sweeping = this.sweep().finally(() => {
      this.#sweeping = null;
      this.#armLapseWake();
    });
  }

  /**
   * A peer that stopped beating lapses between two of this cell's beats: the
   * sweep is woken at that moment (its last heartbeat plus its lease, on the
   * database's clock) rather than at the next beat, so a takeover does not
   * wait up to one more interval. Peers that beat keep their lapse more than
   * an interval ahead, so nothing is armed while the group is healthy.
   */
  #armLapseWake(): void {
    if (this.#stopped || this.#timer === null || this.#nextLapse === null) return;
    const delay = this.#nextLapse - this.now() + 5;
    if (delay >= this.core.config.heartbeatMs) return;
    if (this.#wake) clearTimeout(this.#wake);
    this.#wake = setTimeout(
      () => {
        this.#wake = null;
        this.#sweepSoon();
      },
      Math.max(0, delay),
    );
    this.#wake.unref();
  }

  /** One heartbeat, then the sweeps. Tests call it directly with a manual clock. */
  async tick(): Promise<void> {
    if (await this.beatLogged()) await this.sweep();
  }

  /** One heartbeat; false when it failed. A failing store is logged once per outage, and its end once. */
  async beatLogged(): Promise<boolean> {
    if (this.#stopped) return false;
    try {
      await this.beat();
      if (this.#failingSince !== null) {
        this.core.log.info('heartbeat resumed: the store answers again', { outage_ms: this.core.clock.now() - this.#failingSince });
        this.#failingSince = null;
        this.#answeringSince = this.now();
      }
      return true;
    } catch (e) {
      if (this.#failingSince === null) {
        this.#failingSince = this.core.clock.now();
        this.core.log.warn('heartbeat failed: the cell reports not-ready and retries every interval until the store answers', {
          error: e,
        });
      }
      return false;
    }
  }

  /**
   * The sweeps registered with onTick, one after the other; none while this
   * cell's clock is beyond the bound. A failing sweep (most often the store
   * away) is logged once, and its end once, not at every beat and wake-up.
   */
  async sweep(): Promise<void> {
    if (this.#skewed) return;
    if (this.#sweepsUnderWay++ === 0) this.#sweepView = null;
    try {
      await this.#sweepAll();
    } finally {
      if (--this.#sweepsUnderWay === 0) this.#sweepView = null;
    }
  }

  /** Sweeps under way (sweep), and the membership they share (sweepMembers). */
  #sweepsUnderWay = 0;
  #sweepView: ReturnType<Cluster['members']> | null = null;

  /**
   * members(), read once for the sweeps under way (their takeover scans share
   * it; every claim judges its holder again in its own transaction); outside
   * a sweep, members().
   */
  sweepMembers(): ReturnType<Cluster['members']> {
    if (this.#sweepsUnderWay === 0) return this.members();
    this.#sweepView ??= this.members();
    return this.#sweepView;
  }

  async #sweepAll(): Promise<void> {
    let failed = false;
    for (const fn of this.#ticks) {
      if (this.#stopped) return;
      try {
        await fn();
      } catch (e) {
        failed = true;
        if (!this.#sweepFailing)
          this.core.log.warn('cluster sweep failed; logged once until a sweep succeeds', {
            error: e,
          });
        this.#sweepFailing = true;
      }
    }
    if (!failed && this.#sweepFailing) {
      this.#sweepFailing = false;
      this.core.log.info('cluster sweeps succeed again');
    }
  }

  /**
   * Measures this cell's clock against the database's (the midpoint of the
   * read's round trip) and judges the skew: beyond the bound even allowing
   * for the round trip, the cell is skewed (logged once when it starts and once when it ends).
   */
  async #measure(): Promise<void> {
    const { clock, store, config, log } = this.core;
    const t0 = clock.now();
    const db = await repo.readNow(store, this.#now(t0));
    const t1 = clock.now();
    const offset = Math.round((t0 + t1) / 2 - db);
    const slack = (t1 - t0) / 2;
    this.#offsetMs = offset;
    this.onOffset?.(offset);
    const skewed = Math.abs(offset) - slack > config.maxClockSkewMs;
    if (skewed && !this.#skewed)
      log.error(
        `clock skew: this cell's clock is ${Math.abs(offset)} ms ${offset > 0 ? 'ahead of' : 'behind'} the database's ` +
          `(bound ${config.maxClockSkewMs} ms, --max-clock-skew-ms). Until the clocks agree it takes over no run and fires no schedule, ` +
          'and /readyz answers 503. Fix the time of this host or of the database host (NTP: timedatectl, chronyc tracking)',
        { clock_offset_ms: offset, max_clock_skew_ms: config.maxClockSkewMs },
      );
    else if (!skewed && this.#skewed)
      log.info('clock skew over: this cell agrees with the database clock again', { clock_offset_ms: offset });
    this.#skewed = skewed;
  }

  /** The heartbeat write (database clock); re-registers when the row was lost. None on the embedded store (see the header). */
  async beat(): Promise<void> {
    const { config, store, clock } = this.core;
    if (store.engine !== 'postgres') return;
    if (this.#dbClock) await this.#measure();
    const key = this.#key();
    // Row locks, not serializable: the beat is one UPDATE of this cell's own row, whose guard (not
    // stopped, still this member's key) READ COMMITTED re-checks on the row's newest version once it holds
    // the row's lock, so a concurrent stop or re-registration is never overwritten. Serializable, it
    // predicate-locked the whole cells table once the planner preferred a sequential scan of its few
    // rows, and the beats of two cells that overlapped failed each other's commits (issue 21).
    const ok = await store.write(
      (tx) =>
        repo.beat(
          tx,
          { cellId: config.cellId, memberKey: key, url: config.publicUrl, clockOffsetMs: this.#dbClock ? this.#offsetMs : null },
          this.#now(clock.now()),
        ),
      { isolation: 'row-locks' },
    );
    if (!ok) await this.join();
  }

  /** Stops the heartbeat and marks this cell stopped: peers may take its runs over at once. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    if (this.#wake) clearTimeout(this.#wake);
    this.#wake = null;
    await this.#beating?.catch(() => undefined);
    await this.#sweeping?.catch(() => undefined);
    try {
      const key = this.#key();
      await this.core.store.write(async (tx) => repo.markStopped(tx, this.core.config.cellId, key, this.#now(this.core.clock.now())));
    } catch (e) {
      this.core.log.warn('could not record the stop', { error: e });
    }
  }

  /** Every member with its state now (judged on the database's clock), and its heartbeat's age. */
  async members(): Promise<Array<Member & { heartbeat_age_ms: number }>> {
    const { now, since } = await this.#judgeClock();
    const alone = this.core.store.engine !== 'postgres';
    const rows = await repo.allCells(this.core.store);
    // When the next peer seen alive would lapse (the sweep's wake-up, #armLapseWake).
    const lapses = rows
      .filter((c) => c.cell_id !== this.cellId && memberState(c, now, since) !== 'dead')
      .map((c) => Math.max(c.heartbeat_at, since) + c.lease_ms + 1);
    this.#nextLapse = lapses.length > 0 ? Math.min(...lapses) : null;
    return rows.map((c) =>
      alone && c.cell_id === this.cellId && c.stopped_at === null && !this.#stopped
        ? { ...c, heartbeat_at: now, state: 'live' as const, heartbeat_age_ms: 0 }
        : { ...c, state: memberState(c, now, since), heartbeat_age_ms: Math.max(0, now - c.heartbeat_at) },
    );
  }

  /**
   * Inside a transaction: true when `cellId`'s runs may be taken over now
   * (unknown cell, stopped, or heartbeat older than its lease), judged on the
   * database's clock in the same statement that reads the heartbeat (`_now`,
   * the caller's clock, is not used). Reading the row in the claim's
   * transaction makes a claim and the owner's heartbeat conflict
   * (serializable): a cell that beats is never taken over. A cell whose own
   * clock is beyond the bound judges no peer dead.
   */
  async lapsedTx(tx: Tx, cellId: string, _now?: number): Promise<boolean> {
    if (cellId === this.cellId && this.core.store.engine !== 'postgres') return this.#stopped;
    if (this.#skewed && cellId !== this.cellId) return false;
    const c = await repo.cellByIdAt(tx, cellId, this.#now(this.core.clock.now()));
    return c === undefined || memberState(c.row, c.now, Math.max(c.up, this.#answeringSince)) === 'dead';
  }

  /** Live (or suspect) members that meet `need`, this cell first when it does. */
  async qualifyingMembers(need: PlacementNeed): Promise<Member[]> {
    const ms = (await this.members()).filter((m) => m.state !== 'dead' && qualifies(m, need));
    return ms.sort((a, b) => Number(b.cell_id === this.cellId) - Number(a.cell_id === this.cellId));
  }
}
