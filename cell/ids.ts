/**
 * Random resource ids: a type prefix and 80 bits of randomness, hex
 * (`run_…`, `sch_…`, `jep_…` and the others). Every id of the cell is made
 * here.
 *
 * The random bytes come from a pool refilled 4 KiB at a time from the
 * system's generator (node:crypto `randomFillSync`), as node:crypto's own
 * `randomUUID` does: one call into the generator for ~400 ids instead of one
 * per id (a crew run makes one per step). The pool is a cache of random
 * bytes: each byte is handed out once, and no id depends on another.
 */
import { randomFillSync } from 'node:crypto';

const ID_BYTES = 10;
const pool = Buffer.alloc(4096 - (4096 % ID_BYTES));
let next = pool.length;

/** `<prefix>_` and 20 hex digits (80 random bits). */
export function newId(prefix: string): string {
  if (next === pool.length) {
    randomFillSync(pool);
    next = 0;
  }
  const at = next;
  next += ID_BYTES;
  return `${prefix}_${pool.toString('hex', at, at + ID_BYTES)}`;
}

/** Bounds-checked id path parameter pattern shared by routes. */
export const ID_PATTERN = /^[a-z]{2,8}_[0-9a-f]{20}$/;
