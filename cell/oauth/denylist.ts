/**
 * Revoked token ids. Kept in the store (survives restarts, shared by the
 * cells of a group) and mirrored in memory so the bearer path checks it on
 * every request at no cost. An entry is kept until the token's own `exp`:
 * after that the token is refused as expired anyway.
 *
 * The mirror only ever grows between sweeps (an entry leaves the store only
 * once its token has expired), so it follows the store by union: this cell's
 * revocations enter it when their transaction commits, and every other
 * cell's when `store.onChange` reports a write to the table (the module
 * wires that) and `reload` reads the live entries again.
 *
 * While the store cannot hear other cells (the notification connection lost,
 * a change with `gap: 'lost'`), the mirror may miss their revocations: each
 * check then also asks the store, until the connection is back and a reload
 * has caught the mirror up.
 */
import { sharedNow, type CellCore } from '../context.ts';
import type { Tx } from '../store/types.ts';
import { SerialLoad } from './internal/serial.ts';
import * as repo from './repository.ts';

export class Denylist {
  /** jti -> exp (seconds). */
  readonly #mirror = new Map<string, number>();
  readonly #load = new SerialLoad(() => this.#reload());
  /** Between a notification gap's `lost` and `resumed`. */
  #deaf = false;
  /** From a gap's `lost` until a reload begun after its `resumed` has completed: the mirror may be behind. */
  #behind = false;
  /** Counts gaps, so a reload knows whether one opened while it ran. */
  #gaps = 0;
  readonly #unsubscribe: () => void;

  constructor(private readonly core: CellCore) {
    this.#unsubscribe = core.store.onChange((c) => {
      if (c.gap === 'lost') {
        this.#deaf = true;
        this.#behind = true;
        this.#gaps++;
      } else if (c.gap === 'resumed') {
        this.#deaf = false;
        // The module's follower also reloads (the change names every table), logs a failure and retries.
        this.reload().catch(() => undefined);
      }
    });
  }

  /** Whether `jti` is revoked: the mirror, and the store too while the mirror may be behind. */
  isRevoked(jti: string): boolean | Promise<boolean> {
    if (this.#mirror.has(jti)) return true;
    if (!this.#behind) return false;
    return repo.isDenied(this.core.store, jti);
  }

  /** The mirror alone (a synchronous check; may lag other cells by a notification). */
  inMirror(jti: string): boolean {
    return this.#mirror.has(jti);
  }

  /** Stops following the store's notification gaps. */
  close(): void {
    this.#unsubscribe();
  }

  /** Denylists `jti` until `expSeconds` inside the caller's transaction; the mirror learns it once committed. */
  async denyTx(tx: Tx, jti: string, expSeconds: number): Promise<void> {
    await repo.insertDenied(tx, jti, expSeconds);
    tx.afterCommit(() => {
      this.#mirror.set(jti, expSeconds);
    });
  }

  async deny(jti: string, expSeconds: number): Promise<void> {
    await this.core.store.write((tx) => this.denyTx(tx, jti, expSeconds));
  }

  /**
   * Adds every live entry of the store to the mirror (other cells'
   * revocations). Loads run one at a time; the promise resolves once a load
   * that began after the call is in.
   */
  reload(): Promise<void> {
    return this.#load.request();
  }

  /**
   * Drops entries whose tokens have expired, from the store (judged on the database's clock: the group's
   * entries are not this cell's to judge by its own) and from the mirror; returns how many rows went.
   */
  async sweep(): Promise<number> {
    const nowS = this.#nowSeconds();
    const n = await this.core.store.write((tx) => repo.deleteExpiredDenied(tx, sharedNow(this.core)));
    for (const [jti, exp] of this.#mirror) if (exp < nowS) this.#mirror.delete(jti);
    return n;
  }

  /** Revoked token ids whose tokens expire after `nowSeconds`, as [jti, exp] sorted by jti (for what is carried to devices). */
  live(nowSeconds: number): [string, number][] {
    const out: [string, number][] = [];
    for (const [jti, exp] of this.#mirror) if (exp > nowSeconds) out.push([jti, exp]);
    return out.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  }

  async #reload(): Promise<void> {
    const gaps = this.#gaps;
    const heard = !this.#deaf;
    for (const r of await repo.liveDenied(this.core.store, this.#nowSeconds())) this.#mirror.set(r.jti, r.exp);
    // Begun while changes were heard, and no gap opened since: the mirror holds every revocation committed before it began.
    if (heard && gaps === this.#gaps) this.#behind = false;
  }

  #nowSeconds(): number {
    return Math.floor(this.core.clock.now() / 1000);
  }
}
