/**
 * Permission selectors: the scope language of keys, tokens and roles.
 *
 * A selector is `*` (everything) or a dotted name `a.b.c`. A dotted selector
 * grants exactly itself and every name below it (`a.b` covers `a.b` and
 * `a.b.c`, never `a.bc`). A credential with no scopes, or with `*`, carries
 * its owner's full authority; otherwise effective authority is the owner's
 * role permissions intersected with the credential's scopes: a credential
 * only ever narrows.
 */

const SELECTOR = /^(\*|[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*)$/;

/** True when `s` is a well-formed selector. */
export function isSelector(s: string): boolean {
  return s.length <= 200 && SELECTOR.test(s);
}

/** True when selector `a` grants everything selector `b` grants. */
export function covers(a: string, b: string): boolean {
  if (a === '*') return true;
  if (b === '*') return false;
  return b === a || b.startsWith(a + '.');
}

/** True when the selector set grants the concrete permission `perm`. */
export function grants(selectors: readonly string[], perm: string): boolean {
  for (const s of selectors) if (covers(s, perm)) return true;
  return false;
}

/** Removes selectors covered by another one and sorts: the canonical form of a set. */
export function normalize(selectors: readonly string[]): string[] {
  const uniq = [...new Set(selectors)];
  const kept = uniq.filter((s) => !uniq.some((o) => o !== s && covers(o, s)));
  return kept.sort();
}

/** Intersection of two selector sets: what both grant. Commutative and idempotent. */
export function intersectSelectors(a: readonly string[], b: readonly string[]): string[] {
  const out: string[] = [];
  for (const x of a) {
    for (const y of b) {
      if (covers(x, y)) out.push(y);
      else if (covers(y, x)) out.push(x);
    }
  }
  return normalize(out);
}

/** True when every grant of `child` is granted by `parent`. */
export function selectorsSubset(child: readonly string[], parent: readonly string[]): boolean {
  return child.every((c) => parent.some((p) => covers(p, c)));
}

/**
 * Effective authority of a credential: the owner's role permissions narrowed
 * by the credential's scopes. Empty scopes or `*` mean the owner's full authority.
 */
export function effectiveAuthority(ownerPermissions: readonly string[], scopes: readonly string[]): string[] {
  if (scopes.length === 0 || scopes.includes('*')) return normalize(ownerPermissions);
  return intersectSelectors(ownerPermissions, scopes);
}
