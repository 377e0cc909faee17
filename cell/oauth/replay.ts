/**
 * The DPoP replay cache of a group of cells (RFC 9449 §11.1): a proof's `jti`
 * (with its key's thumbprint) is recorded in the store until the proof could
 * no longer pass the freshness check, so a proof replayed on another cell of
 * the group is refused as it is on the cell that saw it first.
 *
 * One insert per DPoP request (`INSERT … ON CONFLICT DO UPDATE … WHERE
 * expired`: the row count says whether the proof is new), in a transaction
 * that notifies no other cell (no cell caches the table). A replay to the
 * cell that saw the proof is refused by an in-memory cache first, with no
 * round trip. Whether a record has expired (taken over by a new proof, or
 * pruned) is judged on the database's clock, never a cell's: a member whose
 * clock runs ahead would otherwise drop records the others still need, and
 * proofs used on one cell would pass again on another (issue 36, finding
 * 13). Records are pruned every minute by each member that stands (not one
 * whose clock is beyond the bound: cell/oauth/module.ts). The key is
 * stored as its SHA-256 (the `jti` is the client's choice, of any length).
 * A store that cannot take the write refuses the request (fail closed).
 *
 * Only the PostgreSQL engine needs it: an embedded store is one cell, and
 * keeps core's in-memory cache (cell/oauth/module.ts chooses).
 */
import { createHash } from 'node:crypto';
import { MemoryReplayCache, type ReplayCache } from '../../core/tokens/replay.ts';
import { sharedNow, type CellCore } from '../context.ts';
import * as repo from './repository.ts';

export class GroupReplayCache implements ReplayCache {
  readonly #local = new MemoryReplayCache();

  constructor(private readonly core: Pick<CellCore, 'store' | 'clock'>) {}

  async remember(key: string, expiresAt: number, now: number): Promise<boolean> {
    if (!this.#local.remember(key, expiresAt, now)) return false;
    const hashed = createHash('sha256').update(key, 'utf8').digest('hex');
    // One upsert, atomic with row locks (a concurrent insert of the same proof waits, then finds it):
    // no serializable read of the table to conflict with other proofs' records (issue 21).
    return this.core.store.write((tx) => repo.rememberProof(tx, hashed, expiresAt, sharedNow(this.core)), {
      notify: false,
      isolation: 'row-locks',
    });
  }

  /** Drops the group's records that can no longer matter (by the database's clock); returns how many. */
  prune(): Promise<number> {
    // One DELETE: with row locks it re-checks expires_at on a record a replay check has just renewed.
    return this.core.store.write((tx) => repo.pruneProofs(tx, sharedNow(this.core)), { notify: false, isolation: 'row-locks' });
  }
}
