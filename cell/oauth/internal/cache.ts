/**
 * A bounded map that refuses to keep a value read before the last
 * invalidation (the same rule as the IAM caches, cell/iam/iam.ts): read the
 * generation, read the store, then `set` with that generation; if a write
 * invalidated the cache in between, the older value is dropped.
 */
export class Cache<K, V> {
  readonly #map = new Map<K, V>();
  #generation = 0;
  constructor(private readonly max: number) {}
  get generation(): number {
    return this.#generation;
  }
  get(k: K): V | undefined {
    return this.#map.get(k);
  }
  /** Keeps `v` only when nothing was invalidated since `generation` was read. */
  set(k: K, v: V, generation: number): void {
    if (generation !== this.#generation) return;
    if (this.#map.size >= this.max) this.#map.clear();
    this.#map.set(k, v);
  }
  clear(): void {
    this.#generation++;
    this.#map.clear();
  }
}
