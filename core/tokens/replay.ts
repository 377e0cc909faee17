/**
 * The DPoP replay cache: remembers each proof's `jti` until the proof could
 * no longer pass the freshness check, so its size is bounded by the rate of
 * proofs times the freshness window. An implementation must be atomic per
 * key: `remember` returns false when the key was already there. A durable
 * implementation (the edge's, which survives a restart) decides synchronously
 * and may resolve later, once what a restart needs is on disk; a failed
 * write rejects, and the request is refused (fail closed). It is told when
 * the proof was issued (`issuedAt`), so it may refuse every proof issued
 * before a restart instead of remembering each one on disk.
 */
export interface ReplayCache {
  /** Records `key` until `expiresAt` (ms) for a proof issued at `issuedAt` (ms); false when it is already recorded (a replay). */
  remember(key: string, expiresAt: number, now: number, issuedAt: number): boolean | Promise<boolean>;
}

/**
 * In-memory replay cache. When it holds `maxEntries` unexpired entries it
 * refuses new ones (fails closed) rather than forgetting live ones.
 */
export class MemoryReplayCache implements ReplayCache {
  readonly #entries = new Map<string, number>();
  #nextSweep = 0;
  constructor(private readonly maxEntries = 200_000) {}

  get size(): number {
    return this.#entries.size;
  }

  remember(key: string, expiresAt: number, now: number): boolean {
    const seen = this.#entries.get(key);
    if (seen !== undefined && seen > now) return false;
    if (now >= this.#nextSweep || this.#entries.size >= this.maxEntries) this.#sweep(now);
    if (this.#entries.size >= this.maxEntries) return false;
    this.#entries.set(key, expiresAt);
    return true;
  }

  /** Every unexpired entry, `[key, expiresAt]` (for persisting the cache). */
  live(now: number): [string, number][] {
    const out: [string, number][] = [];
    for (const [k, exp] of this.#entries) if (exp > now) out.push([k, exp]);
    return out;
  }

  #sweep(now: number): void {
    for (const [k, exp] of this.#entries) if (exp <= now) this.#entries.delete(k);
    this.#nextSweep = now + 1000;
  }
}
