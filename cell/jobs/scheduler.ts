/**
 * The durable cron scheduler of job definitions.
 *
 * - One timer, never polling: it sleeps until the earliest stored
 *   `next_fire_at` of an enabled, live definition (an indexed MIN query), fires
 *   what is due, and sleeps again. Any change to a definition re-arms it.
 * - A fire is one transaction: a compare-and-set on the definition's
 *   `next_fire_at` (the time being fired) advances it to the next cron time,
 *   takes the lease (`lease_owner` = this cell, `lease_until`), records the fire
 *   in `job_fires`, and for compute / sql / notebook / agent creates the job run
 *   row (the same submit path as POST jobs/runs; agent.ts runs the pinned graph). So a
 *   fire happens at most once: a restart, a second tick or a second cell sees
 *   the advanced `next_fire_at` (or a live lease of another cell) and does
 *   nothing. The run is then driven; a crash before that leaves it queued and
 *   the runs recovery drives it.
 * - team fires are recorded `pending` in the same transaction and dispatched
 *   right after (Agent Teams' crew run path: compile, placement, ledgers);
 *   pending fires left by a crash are dispatched on start (durable dispatch).
 * - Missed fires (due while no cell ran, found at start): catch_up `once` runs
 *   the definition once however many were missed, `skip` only advances to the
 *   next future time. Either way `next_fire_at` moves past now.
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
 * - Times come from the cell clock (injectable). With a manual clock, tests
 *   call `tick()` after moving the clock.
 */
import type { Cell } from '../context.ts';
import { createRunTx, getRun, setRunFlags } from '../runs/runs.ts';
import { startCrewRun } from '../teams/runs.ts';
import { byteSize, storageRoomRefusal } from '../runs/storage.ts';
import { disableAtFireTx } from './_definitions-store.ts';
import { authorityLapse } from './definition-authority.ts';
import { getDefinition, nextFireAfter, type Definition } from './definitions.ts';
import { startJobDrive } from './runner.ts';

/** How long a cell's lease on a definition lasts after it fires, ms. */
export const LEASE_MS = 60_000;
const MAX_TIMER_MS = 2 ** 31 - 1;
const BATCH = 200;

type DefRow = { schedule_id: string; next_fire_at: number };

export class Scheduler {
  #timer: ReturnType<typeof setTimeout> | null = null;
  #armedFor: number | null = null;
  #running = false;
  #stopped = false;
  #again = false;
  /** Fires done by this scheduler (tests, metrics). */
  fired = 0;
  /** Ticks run (the bench checks that an idle scheduler does not tick). */
  ticks = 0;

  constructor(private readonly cell: Cell) {}

  /** Start: dispatch pending fires, handle fires missed while down, then arm. */
  async start(): Promise<void> {
    await this.#dispatchPending();
    await this.tick(true);
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }

  /** Re-arms the timer for the earliest next fire (after a definition changed). */
  rearm(): void {
    if (this.#stopped) return;
    const row = this.cell.store.get<{ t: number | null }>('SELECT min(next_fire_at) AS t FROM job_definitions WHERE enabled = 1 AND deleted_at IS NULL');
    const t = row?.t ?? null;
    if (this.#timer && this.#armedFor === t) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    this.#armedFor = t;
    if (t === null) return;
    const delay = Math.min(Math.max(0, t - this.cell.clock.now()), MAX_TIMER_MS);
    this.#timer = setTimeout(() => { this.#timer = null; this.#armedFor = null; void this.tick(false); }, delay);
    this.#timer.unref?.();
  }

  /** When the timer would fire next (ms since the epoch), or null. */
  get armedFor(): number | null {
    return this.#armedFor;
  }

  /** Fires every due definition; returns how many fired. `startup` applies the missed-fire policy. */
  async tick(startup = false): Promise<number> {
    if (this.#running) { this.#again = true; return 0; }
    this.#running = true;
    this.ticks++;
    let n = 0;
    try {
      for (let guard = 0; guard < 1000; guard++) {
        const now = this.cell.clock.now();
        const due = this.cell.store.all<DefRow>(
          'SELECT schedule_id, next_fire_at FROM job_definitions WHERE enabled = 1 AND deleted_at IS NULL AND next_fire_at <= ? ORDER BY next_fire_at, schedule_id LIMIT ?',
          [now, BATCH]);
        for (const d of due) {
          try {
            if (await this.#fire(d.schedule_id, d.next_fire_at, now, startup)) n++;
          } catch (err) {
            this.cell.log.error('scheduled fire failed', { schedule_id: d.schedule_id, error: err instanceof Error ? err.message : String(err) });
          }
        }
        if (due.length < BATCH && !this.#again) break;
        this.#again = false;
      }
    } finally {
      this.#running = false;
      this.rearm();
    }
    return n;
  }

  /** One fire of one definition at its scheduled time `at` (compare-and-set). Returns true when it fired. */
  async #fire(id: string, at: number, now: number, startup: boolean): Promise<boolean> {
    const def = getDefinition(this.cell, id);
    if (!def || !def.enabled || def.deleted_at !== null || def.next_fire_at !== at) return false;
    const me = this.cell.config.cellId;
    if (def.lease_owner !== null && def.lease_owner !== me && (def.lease_until ?? 0) > now) return false;
    // Never sooner than the minimum interval after this fire.
    const next = nextFireAfter(def.cron, def.timezone, Math.max(now, at + this.cell.config.scheduleMinIntervalSeconds * 1000 - 1));
    const skip = startup && def.catch_up === 'skip';
    const result = await this.cell.store.write((tx) => {
      // The author, as it is now, in the fire's own transaction.
      const current = getDefinition(tx, id);
      const lapse = current ? authorityLapse(tx, current, this.cell) : null;
      if (current && lapse !== null) {
        return disableAtFireTx(tx, current, at, lapse, now, me) ? { runId: null as string | null, refused: lapse } : null;
      }
      // A workspace (or cell) whose storage has no room for the run: this fire is refused, the next one may run.
      const noRoom = skip ? null : storageRoomRefusal(this.cell, def.workspace_id, byteSize(JSON.stringify(def.spec ?? null)));
      const held = skip || noRoom !== null;
      const cas = tx.run(
        `UPDATE job_definitions SET next_fire_at = ?, lease_owner = ?, lease_until = ?,
           last_fire_at = CASE WHEN ? THEN last_fire_at ELSE ? END,
           fire_count = fire_count + CASE WHEN ? THEN 0 ELSE 1 END,
           skip_count = skip_count + CASE WHEN ? THEN 1 ELSE 0 END
         WHERE schedule_id = ? AND next_fire_at = ? AND enabled = 1 AND deleted_at IS NULL
           AND (lease_owner IS NULL OR lease_owner = ? OR lease_until <= ?)`,
        [next, me, now + LEASE_MS, held ? 1 : 0, now, held ? 1 : 0, held ? 1 : 0, id, at, me, now]);
      if (cas.changes === 0) return null;
      if (held) {
        tx.run('INSERT OR IGNORE INTO job_fires (schedule_id, fire_at, state, run_id, detail, cell_id, created_at) VALUES (?, ?, ?, NULL, ?, ?, ?)',
          [id, at, skip ? 'skipped' : 'refused', noRoom?.reason ?? 'missed while no cell ran; catch_up skip', me, now]);
        return { runId: null as string | null, held: noRoom?.reason ?? 'skipped' };
      }
      let runId: string | null = null;
      if (def.job_type !== 'team') {
        runId = createRunTx(tx, { kind: 'job', job_type: def.job_type, workspace_id: def.workspace_id, requester: current?.author_id ?? def.author_id, spec: def.spec, source: `schedule:${id}`, flags: { schedule_id: id, scheduled_for: at }, at: now });
        tx.run('UPDATE job_definitions SET last_run_id = ? WHERE schedule_id = ?', [runId, id]);
      }
      tx.run('INSERT OR IGNORE INTO job_fires (schedule_id, fire_at, state, run_id, detail, cell_id, created_at) VALUES (?, ?, ?, ?, NULL, ?, ?)',
        [id, at, runId ? 'dispatched' : 'pending', runId, me, now]);
      return { runId };
    });
    if (result === null) return false;
    if ('refused' in result) {
      this.cell.log.warn('scheduled fire refused: definition disabled', { schedule_id: id, reason: result.refused });
      return false;
    }
    if ('held' in result) {
      if (!skip) this.cell.log.warn('scheduled fire refused: no storage room', { schedule_id: id, reason: result.held });
      return false;
    }
    this.fired++;
    if (result.runId) {
      const run = getRun(this.cell, result.runId);
      if (run) void startJobDrive(this.cell, run);
    } else {
      await this.#dispatch(def, at);
    }
    return true;
  }

  /** Dispatches an agent or team fire recorded pending (crew run path). */
  async #dispatch(def: Definition, at: number): Promise<void> {
    let runId: string | null = null;
    let state = 'dispatched';
    let detail: string | null = null;
    try {
      const spec = def.spec as { crew_id?: string; input?: unknown };
      const crewId = spec.crew_id;
      // A pending fire dispatched after a restart: its author is judged again.
      const lapse = authorityLapse(this.cell.store, getDefinition(this.cell, def.schedule_id) ?? def, this.cell);
      if (lapse !== null) {
        state = 'refused';
        detail = lapse;
      } else if (!crewId) {
        state = 'refused';
        detail = 'crew_unknown';
      } else {
        const run = await startCrewRun(this.cell, def.author_id, crewId, { input: spec.input ?? null, workspace_id: def.workspace_id });
        runId = run.run_id;
        await setRunFlags(this.cell, runId, { schedule_id: def.schedule_id, scheduled_for: at });
      }
    } catch (err) {
      // A crew run refused before its first step is still a run (its id is in details).
      const d = (err as { details?: Record<string, unknown> }).details;
      runId = typeof d?.['run_id'] === 'string' ? d['run_id'] : null;
      state = runId ? 'dispatched' : 'refused';
      detail = typeof d?.['reason'] === 'string' ? d['reason'] : 'dispatch_failed';
    }
    await this.cell.store.write((tx) => {
      tx.run('UPDATE job_fires SET state = ?, run_id = ?, detail = ? WHERE schedule_id = ? AND fire_at = ?', [state, runId, detail, def.schedule_id, at]);
      if (runId) tx.run('UPDATE job_definitions SET last_run_id = ? WHERE schedule_id = ?', [runId, def.schedule_id]);
    });
  }

  async #dispatchPending(): Promise<void> {
    const rows = this.cell.store.all<{ schedule_id: string; fire_at: number }>("SELECT schedule_id, fire_at FROM job_fires WHERE state = 'pending' ORDER BY created_at LIMIT 1000");
    for (const r of rows) {
      const def = getDefinition(this.cell, r.schedule_id);
      if (def) await this.#dispatch(def, r.fire_at);
    }
  }
}
