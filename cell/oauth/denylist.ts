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
 */
import type { CellCore } from '../context.ts';
import type { Tx } from '../store/types.ts';
import { SerialLoad } from './internal/serial.ts';
import * as repo from './repository.ts';

export class Denylist {
  /** jti -> exp (seconds). */
  readonly #mirror = new Map<string, number>();
  readonly #load = new SerialLoad(() => this.#reload());

  constructor(private readonly core: CellCore) {}

  isRevoked(jti: string): boolean {
    return this.#mirror.has(jti);
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

  /** Drops entries whose tokens have expired, from the store and the mirror; returns how many rows went. */
  async sweep(): Promise<number> {
    const nowS = this.#nowSeconds();
    const n = await this.core.store.write((tx) => repo.deleteExpiredDenied(tx, nowS));
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
    for (const r of await repo.liveDenied(this.core.store, this.#nowSeconds())) this.#mirror.set(r.jti, r.exp);
  }

  #nowSeconds(): number {
    return Math.floor(this.core.clock.now() / 1000);
  }
}
