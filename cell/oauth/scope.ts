/** Scope parameters: space-separated permission selectors, narrowed by intersection only. */
import { intersectSelectors, isSelector, normalize } from '../../core/authority/scopes.ts';
import { OAuthError } from './oauth-error.ts';

/** Parses a `scope` parameter; undefined or empty gives null (the caller picks the default). */
export function parseScope(s: string | undefined): string[] | null {
  if (s === undefined) return null;
  const parts = s.split(' ').filter(Boolean);
  if (parts.length === 0) return null;
  if (parts.length > 64 || !parts.every(isSelector))
    throw new OAuthError('invalid_scope', 'scope must be space-separated permission selectors');
  return normalize(parts);
}

/** requested ∩ every cap; refuses an empty result. Never wider than any input. */
export function narrowScope(requested: readonly string[] | null, ...caps: (readonly string[])[]): string[] {
  let out = requested ? [...requested] : null;
  for (const cap of caps) out = out === null ? normalize(cap) : intersectSelectors(out, cap);
  if (!out || out.length === 0) throw new OAuthError('invalid_scope', 'no requested scope is within the authority of the subject');
  return out;
}
