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
 * its lease), `dead` (past its lease, or stopped). Clocks of the cells must
 * agree to well within a lease (NTP): docs/multi-cell.md.
 *
 * On the embedded store the cell is alone by construction (its directory
 * lock): it registers but writes no heartbeat (no fsync twice a second for
 * nothing) and counts itself live; rows of other ids there are cells this
 * data directory ran as before, dead once their lease passed.
 *
 * Posture: `multi-cell` needs the PostgreSQL store; a `single-cell` cell
 * refuses to join a store that has another live (or suspect) member, and no
 * cell joins a store where a live `single-cell` cell claims to be alone.
 * Joining is one serializable transaction, so two cells starting at once
 * cannot both pass the check.
 */
import type { CellCore } from '../context.ts';
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

/** A member's state at `now`, judged by its own heartbeat interval and lease. */
export function memberState(c: repo.CellRow, now: number): MemberState {
  if (c.stopped_at !== null) return 'dead';
  const age = now - c.heartbeat_at;
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

export class Cluster {
  #timer: ReturnType<typeof setInterval> | null = null;
  #beating: Promise<void> | null = null;
  #sweeping: Promise<void> | null = null;
  readonly #ticks: Array<() => Promise<void>> = [];
  #stopped = false;

  constructor(private readonly core: CellCore) {}

  get cellId(): string {
    return this.core.config.cellId;
  }

  /** This cell's own placement attributes. */
  get self(): { cellId: string; clearance: number; topology: Record<string, string> } {
    const c = this.core.config;
    return { cellId: c.cellId, clearance: c.clearance, topology: c.topology };
  }

  /**
   * Registers this cell (start). Refuses (ClusterRefusal) a posture that does
   * not allow the group it would join, writing nothing.
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
    const at = clock.now();
    // The embedded store is one process's by its directory lock: another id's row there is a cell
    // this data directory ran as before (a replaced id), never a second live member.
    const shared = store.engine === 'postgres';
    await store.write(async (tx) => {
      const others = shared ? (await repo.allCells(tx)).filter((c) => c.cell_id !== config.cellId && memberState(c, at) !== 'dead') : [];
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
      await repo.upsertCell(tx, {
        cell_id: config.cellId,
        region: config.region,
        clearance: config.clearance,
        topology: config.topology,
        posture: config.posture,
        url: config.publicUrl,
        heartbeat_ms: config.heartbeatMs,
        lease_ms: config.leaseMs,
        started_at: at,
        heartbeat_at: at,
        stopped_at: null,
      });
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
        if (ok && !this.#sweeping) {
          this.#sweeping = this.sweep().finally(() => {
            this.#sweeping = null;
          });
        }
      });
    }, this.core.config.heartbeatMs);
    t.unref();
    this.#timer = t;
  }

  /** One heartbeat, then the sweeps. Tests call it directly with a manual clock. */
  async tick(): Promise<void> {
    if (await this.beatLogged()) await this.sweep();
  }

  async beatLogged(): Promise<boolean> {
    if (this.#stopped) return false;
    try {
      await this.beat();
      return true;
    } catch (e) {
      this.core.log.warn('heartbeat failed', { error: e instanceof Error ? e.message : String(e) });
      return false;
    }
  }

  /** The sweeps registered with onTick, one after the other. */
  async sweep(): Promise<void> {
    for (const fn of this.#ticks) {
      if (this.#stopped) return;
      try {
        await fn();
      } catch (e) {
        this.core.log.warn('cluster sweep failed', { error: e instanceof Error ? e.message : String(e) });
      }
    }
  }

  /** The heartbeat write; re-registers when the row was lost. None on the embedded store (see the header). */
  async beat(): Promise<void> {
    const { config, store, clock } = this.core;
    if (store.engine !== 'postgres') return;
    const at = clock.now();
    const ok = await store.write((tx) => repo.beat(tx, config.cellId, at, config.publicUrl));
    if (!ok) await this.join();
  }

  /** Stops the heartbeat and marks this cell stopped: peers may take its runs over at once. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#beating?.catch(() => undefined);
    await this.#sweeping?.catch(() => undefined);
    const at = this.core.clock.now();
    try {
      await this.core.store.write((tx) => repo.markStopped(tx, this.core.config.cellId, at));
    } catch (e) {
      this.core.log.warn('could not record the stop', { error: e instanceof Error ? e.message : String(e) });
    }
  }

  /** Every member with its state now. */
  async members(): Promise<Member[]> {
    const now = this.core.clock.now();
    const alone = this.core.store.engine !== 'postgres';
    return (await repo.allCells(this.core.store)).map((c) =>
      alone && c.cell_id === this.cellId && c.stopped_at === null && !this.#stopped
        ? { ...c, heartbeat_at: now, state: 'live' as const }
        : { ...c, state: memberState(c, now) },
    );
  }

  /**
   * Inside a transaction: true when `cellId`'s runs may be taken over at `now`
   * (unknown cell, stopped, or heartbeat older than its lease). Reading the
   * row in the claim's transaction makes a claim and the owner's heartbeat
   * conflict (serializable): a cell that beats is never taken over.
   */
  async lapsedTx(tx: Tx, cellId: string, now: number): Promise<boolean> {
    if (cellId === this.cellId && this.core.store.engine !== 'postgres') return this.#stopped;
    const c = await repo.cellById(tx, cellId);
    return c === undefined || memberState(c, now) === 'dead';
  }

  /** Live (or suspect) members that meet `need`, this cell first when it does. */
  async qualifyingMembers(need: PlacementNeed): Promise<Member[]> {
    const ms = (await this.members()).filter((m) => m.state !== 'dead' && qualifies(m, need));
    return ms.sort((a, b) => Number(b.cell_id === this.cellId) - Number(a.cell_id === this.cellId));
  }
}
