/**
 * What differs between a pinned tool definition and the one a server lists
 * now, as the review of a source shows it: each difference at its JSON
 * Pointer (RFC 6901) with the pinned and the live value (absent on the side
 * that lacks it). Objects are compared member by member (in code-unit order
 * of their keys), arrays element by element; a value of another type is one
 * difference. At most `limit` differences are listed.
 *
 * @example definitionDiff({ description: 'a' }, { description: 'b' }) // [{ path: '/description', pinned: 'a', live: 'b' }]
 */

/** One difference; `pinned` or `live` is absent where that side has nothing. */
export interface DefinitionChange {
  path: string;
  pinned?: unknown;
  live?: unknown;
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const pointer = (k: string) => k.replace(/~/g, '~0').replace(/\//g, '~1');

/** The differences of `live` from `pinned`, in document order. */
export function definitionDiff(pinned: unknown, live: unknown, limit = 100): DefinitionChange[] {
  const out: DefinitionChange[] = [];
  const walk = (a: unknown, b: unknown, path: string): void => {
    if (out.length >= limit) return;
    if (isObj(a) && isObj(b)) {
      const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
      for (const k of keys) {
        const p = `${path}/${pointer(k)}`;
        if (!Object.hasOwn(b, k)) out.push({ path: p, pinned: a[k] });
        else if (!Object.hasOwn(a, k)) out.push({ path: p, live: b[k] });
        else walk(a[k], b[k], p);
        if (out.length >= limit) return;
      }
      return;
    }
    if (Array.isArray(a) && Array.isArray(b)) {
      for (let i = 0; i < Math.max(a.length, b.length); i++) {
        const p = `${path}/${i}`;
        if (i >= b.length) out.push({ path: p, pinned: a[i] });
        else if (i >= a.length) out.push({ path: p, live: b[i] });
        else walk(a[i], b[i], p);
        if (out.length >= limit) return;
      }
      return;
    }
    if (a !== b) out.push({ path, pinned: a, live: b });
  };
  walk(pinned, live, '');
  return out;
}
