/**
 * A bounded in-process cache of rows that follows the store: every committed
 * change to one of its tables empties it, this cell's at once and, on
 * PostgreSQL, every other cell's of the group when its notification arrives
 * (`store.onChange`, well under a second). So a key revoked or a principal
 * archived on one cell is refused by every cell's next request that reads
 * through the cache.
 *
 * Two rules keep it from serving a stale row:
 * - a value read before the last invalidation is never kept: read
 *   `generation`, read the store, then `set` with that generation; if a write
 *   emptied the cache in between, the older value is dropped;
 * - while the store cannot hear other cells (the notification connection
 *   lost: a change with `gap: 'lost'`), the cache answers nothing and keeps
 *   nothing, so every lookup reads the store, until the connection is back
 *   (`gap: 'resumed'`, which empties it once more).
 */
import type { Change, Store } from './types.ts';

export class ChangeCache<K, V> {
  readonly #map = new Map<K, V>();
  readonly #tables: ReadonlySet<string>;
  #generation = 0;
  #following = true;
  readonly #unsubscribe: () => void;

  constructor(
    store: Pick<Store, 'onChange'>,
    tables: Iterable<string>,
    private readonly max: number,
  ) {
    this.#tables = new Set(tables);
    this.#unsubscribe = store.onChange((c) => this.#heard(c));
  }

  #heard(c: Change): void {
    if (c.gap) {
      this.#following = c.gap === 'resumed';
      this.clear();
      return;
    }
    for (const t of c.tables) {
      if (this.#tables.has(t)) {
        this.clear();
        return;
      }
    }
  }

  /** Changes each time the cache is emptied; pass the value read before a store read to `set`. */
  get generation(): number {
    return this.#generation;
  }

  /** False while other cells' changes cannot be heard: the cache then holds nothing. */
  get following(): boolean {
    return this.#following;
  }

  get(k: K): V | undefined {
    return this.#following ? this.#map.get(k) : undefined;
  }

  /** Keeps `v` only when nothing was invalidated since `generation` was read, and changes are heard. */
  set(k: K, v: V, generation: number): void {
    if (generation !== this.#generation || !this.#following) return;
    if (this.#map.size >= this.max) this.#map.clear();
    this.#map.set(k, v);
  }

  /**
   * The cached value of `k`, or `load()`'s, kept under the rules above (a
   * value read across an invalidation is returned, not kept). A caller that
   * caches absence loads `null` for it (`undefined` is never a hit).
   */
  async read(k: K, load: () => Promise<V>): Promise<V> {
    const hit = this.get(k);
    if (hit !== undefined) return hit;
    const gen = this.#generation;
    const v = await load();
    this.set(k, v, gen);
    return v;
  }

  clear(): void {
    this.#generation++;
    this.#map.clear();
  }

  /** Stops following the store. */
  close(): void {
    this.#unsubscribe();
  }
}
