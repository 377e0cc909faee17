/**
 * The requests-per-minute buckets a group of cells shares, in the store: a
 * key's `rate_limit_rpm` (and a published endpoint's) holds for the group,
 * not for each cell. The gateway's one limiter (runtime/gateway.ts
 * `CredentialLimits`) takes from them; the rule is core's `takeToken`.
 *
 * One take is one write transaction: lock the bucket's row (created full when
 * there is none), apply the rule, write it back. It takes row locks, not
 * SERIALIZABLE: two cells taking from one bucket at once are ordered by the
 * row's lock (the second waits, then reads the first's bucket), with no
 * serialization failure to retry; a serializable take read the table, which
 * the planner scans whole once it has statistics, so takes of different
 * buckets failed each other too (issue 21). It notifies
 * no other cell (no cell caches the table). Only requests of a credential
 * that has an rpm pay it. A row whose bucket has refilled completely carries
 * nothing (a missing row is a full bucket): each cell prunes rows untouched
 * for longer than the longest refill (capacity / refill = 60 s). A store that
 * cannot take the write refuses the request (fail closed).
 *
 * The per-client-IP gateway bucket stays in each cell's memory
 * (docs/configuration.md, "Rate limits").
 */
import { takeToken, type TakeResult } from '../../core/ratelimit.ts';
import type { SharedBuckets } from '../../runtime/gateway.ts';
import { sharedNow, type CellCore } from '../context.ts';
import * as repo from './repository.ts';

/** A bucket refills completely within a minute (capacity rpm, refill rpm/60 per second); a second of margin. */
const FULL_AFTER_MS = 61_000;

export class StoreBuckets implements SharedBuckets {
  constructor(private readonly core: Pick<CellCore, 'store' | 'clock'>) {}

  take(key: string, capacity: number, refillPerMs: number, now: number): Promise<TakeResult> {
    return this.core.store.write(
      async (tx) => {
        // A missing row is a full bucket as of now: created so, it is the same bucket to takeToken.
        const locked = await repo.lockRateBucket(tx, key, { tokens: capacity, at: now });
        const { bucket, result } = takeToken(locked, capacity, refillPerMs, now);
        await repo.putRateBucket(tx, key, bucket);
        return result;
      },
      { notify: false, isolation: 'row-locks' },
    );
  }

  /** Drops buckets that have refilled completely by now, judged on the database's clock; returns how many. */
  prune(): Promise<number> {
    // One DELETE: with row locks it re-checks `at` on a row a take has just locked and written, so a
    // bucket in use is never dropped.
    return this.core.store.write((tx) => repo.pruneRateBuckets(tx, sharedNow(this.core), FULL_AFTER_MS), {
      notify: false,
      isolation: 'row-locks',
    });
  }
}
