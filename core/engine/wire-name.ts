/**
 * How a catalog tool's name travels to a model: function names of the chat
 * protocols allow only `[A-Za-z0-9_-]` and at most 64 characters, so `.` is
 * spelled `__` (`kv.put` → `kv__put`) and an answer in either spelling maps
 * back. The mapping is a bijection only for names that survive the round
 * trip: a name holding `__` (or `_` beside a `.`) comes back as another name,
 * and characters outside `[A-Za-z0-9_.-]` cannot be sent at all. The built-in
 * catalog's names all survive it; an imported tool whose name does not is
 * refused at import (`wireNameOk`; docs/tools.md, "Names").
 */

/** Longest function name the chat protocols accept. */
export const MAX_WIRE_NAME = 64;

const WIRE = /^[A-Za-z0-9_-]+$/;

/** The catalog name as a function name: `.` spelled `__`. */
export function toWireName(name: string): string {
  return name.replace(/\./g, '__');
}

/** A function name back in the catalog's spelling. */
export function fromWireName(name: string): string {
  return name.replace(/__/g, '.');
}

/** True when `name` can go to a model and come back as itself (allowed characters, length, reversible). */
export function wireNameOk(name: string): boolean {
  const w = toWireName(name);
  return w.length <= MAX_WIRE_NAME && WIRE.test(w) && fromWireName(w) === name;
}
