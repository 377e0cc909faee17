/**
 * The verified-token cache: a token whose signature and claims verified once
 * is not verified again until it expires. Tokens are immutable, so the cache
 * holds nothing that can go stale except time, and the judge re-checks `exp`,
 * the denylist, the accepted issuers (a group may retire an issuer URL), the
 * bindings and the subject on every hit (core/tokens/judge.ts). One cache
 * belongs to one verifier configuration (audience, key set): the cell and the
 * edge each keep their own.
 */
import type { AccessTokenClaims } from './access-token.ts';

export class VerifiedTokenCache {
  readonly #entries = new Map<string, { claims: AccessTokenClaims; ath?: string }>();
  constructor(private readonly maxEntries = 20_000) {}

  get size(): number {
    return this.#entries.size;
  }

  get(token: string): AccessTokenClaims | undefined {
    return this.#entries.get(token)?.claims;
  }

  /** Remembers verified claims; when full, starts over (cheaper than LRU; a miss only costs one verification). */
  set(token: string, claims: AccessTokenClaims): void {
    if (this.#entries.size >= this.maxEntries) this.#entries.clear();
    this.#entries.set(token, { claims });
  }

  /** The DPoP `ath` of a cached token (core/tokens/ath.ts), once `setAth` kept it: a bound token is hashed once, not on every request. */
  ath(token: string): string | undefined {
    return this.#entries.get(token)?.ath;
  }

  /** Keeps the `ath` of a token already cached (nothing for another). */
  setAth(token: string, ath: string): void {
    const e = this.#entries.get(token);
    if (e) e.ath = ath;
  }

  delete(token: string): void {
    this.#entries.delete(token);
  }
}
