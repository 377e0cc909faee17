/**
 * The per-credential requests-per-minute ceiling (`rate_limit_rpm`): one
 * token bucket per root credential (a key and every token or SAT derived
 * from it share one), sized by the credential's own rpm. One instance per
 * cell, built in cell/server.ts and handed to the gateway.
 */
import { TokenBuckets, type TakeResult } from '../../core/ratelimit.ts';
import type { Clock } from '../context.ts';

export class CredentialLimits {
  readonly #byRpm = new Map<number, TokenBuckets>();
  constructor(private readonly clock: Clock) {}

  /** Takes one request from `root`'s bucket of `rpm` per minute. */
  take(root: string, rpm: number): TakeResult {
    let b = this.#byRpm.get(rpm);
    if (!b) { b = new TokenBuckets(rpm, rpm / 60, this.clock); this.#byRpm.set(rpm, b); }
    return b.take(root);
  }
}
