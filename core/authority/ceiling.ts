/**
 * A principal's authority ceiling: the most envelope authority (service spec,
 * "Authority envelope") anything it creates, runs or hands out may carry.
 * Either `'unbounded'` (the bootstrap owner) or an envelope. A credential's
 * ceiling is its owner's ceiling met with the credential's own cap, so a
 * credential only ever narrows, as its scopes do for permissions.
 *
 * Unlike `isSubset`/`intersectAuthority` (where list entries are exact names,
 * as the compiler needs), a ceiling reads the wildcards the tools honour in
 * `egress_allowlist` and `data_grant_ids`: `*` covers every destination,
 * `kv:*` every `kv:<workspace>`, `*.example.com` every sub-domain of it (and
 * narrower wildcards under it). So a ceiling of `egress_allowlist: ["*"]`
 * lets a job ask for `https://api.example.com`, and the job gets exactly what
 * it asked; a ceiling of `["https://api.example.com"]` never lets it ask `*`.
 */
import { EGRESS_METHODS, methodsCovered, parseEgressEntry } from './egress-entry.ts';
import { contractsOf, intersectAuthority, modeRank, normalizeAuthority, type AuthorityEnvelope, type AuthorityField } from './envelope.ts';

export const UNBOUNDED = 'unbounded' as const;

/** The envelope authority a principal or credential holds. */
export type Ceiling = AuthorityEnvelope | typeof UNBOUNDED;

const WILDCARD_FIELDS = ['egress_allowlist', 'data_grant_ids'] as const;
const EXACT_FIELDS = ['allowed_tools', 'compartments'] as const;

/**
 * True when the allowlist entry `parent` grants everything entry `child` grants: every HTTP method
 * the child allows (egress-entry.ts: an entry without methods allows reading), to every destination.
 */
export function entryCovers(parent: string, child: string): boolean {
  if (parent === child) return true;
  const p = parseEgressEntry(parent);
  const c = parseEgressEntry(child);
  if (!methodsCovered(p, c)) return false;
  // A parent naming its methods grants HTTP only: not the workspace storage (or the stdio catalog sources)
  // an entry without methods reaches.
  if (p.named && !c.named && (c.destination === '*' || isNamedDestination(c.destination))) return false;
  return destinationCovers(p.destination, c.destination);
}

/** A destination that is not a URL or a host: workspace storage (`kv:`) or a stdio catalog source (`mcp:`). */
function isNamedDestination(d: string): boolean {
  return d.startsWith('kv:') || d.startsWith('mcp:');
}

/** True when the destination of an entry covers another's (methods aside). */
function destinationCovers(parent: string, child: string): boolean {
  if (parent === child || parent === '*') return true;
  if (child === '*') return false;
  if (parent === 'kv:*') return child.startsWith('kv:');
  if (parent.startsWith('*.') && !child.startsWith('kv:')) {
    const suffix = parent.slice(1).toLowerCase(); // ".example.com"
    let host = child.toLowerCase();
    if (host.includes('://')) {
      try {
        host = new URL(host).hostname;
      } catch {
        return false;
      }
    }
    if (host.startsWith('*.')) host = host.slice(1);
    return host.endsWith(suffix) && host.length > suffix.length;
  }
  return false;
}

function listCovered(child: readonly string[] | undefined, parent: readonly string[] | undefined, wildcards: boolean): boolean {
  if (!child || child.length === 0) return true;
  const p = parent ?? [];
  return child.every((c) => (wildcards ? p.some((x) => entryCovers(x, c)) : p.includes(c)));
}

function listMeet(a: readonly string[], b: readonly string[], wildcards: boolean): string[] {
  if (!wildcards) {
    const right = new Set(b);
    return [...new Set(a)].filter((x) => right.has(x)).sort();
  }
  // The meet: every entry of either side that the other side covers, and what two entries that overlap
  // without one covering the other both allow (`*` and `*:*` both allow reading anywhere: `GET,HEAD:*`).
  const out = new Set<string>();
  for (const x of a) if (b.some((y) => entryCovers(y, x))) out.add(x);
  for (const y of b) if (a.some((x) => entryCovers(x, y))) out.add(y);
  for (const x of a) {
    for (const y of b) {
      const m = overlap(x, y);
      if (m !== null) out.add(m);
    }
  }
  return [...out].sort();
}

/**
 * What two entries both allow when neither covers the other but their methods and destinations
 * overlap: the methods of both, to the narrower destination, as an entry naming its methods (so it
 * reaches no workspace storage: an entry naming methods never does); null when they do not overlap.
 */
function overlap(a: string, b: string): string | null {
  if (entryCovers(a, b) || entryCovers(b, a)) return null;
  const x = parseEgressEntry(a);
  const y = parseEgressEntry(b);
  const methods = EGRESS_METHODS.filter((m) => x.methods.has(m) && y.methods.has(m));
  if (methods.length === 0) return null;
  const dest = destinationCovers(y.destination, x.destination)
    ? x.destination
    : destinationCovers(x.destination, y.destination)
      ? y.destination
      : null;
  if (dest === null || isNamedDestination(dest)) return null;
  return `${methods.length === EGRESS_METHODS.length ? '*' : methods.join(',')}:${dest}`;
}

/**
 * Whether `env` stays inside `ceiling` on every field; when not, every
 * offending field is named.
 */
export function withinCeiling(
  env: AuthorityEnvelope | Ceiling,
  ceiling: Ceiling,
): { ok: true } | { ok: false; fields: (AuthorityField | 'unbounded')[] } {
  if (ceiling === UNBOUNDED) return { ok: true };
  if (env === UNBOUNDED) return { ok: false, fields: ['unbounded'] };
  const fields: AuthorityField[] = [];
  for (const f of EXACT_FIELDS) if (!listCovered(env[f], ceiling[f], false)) fields.push(f);
  for (const f of WILDCARD_FIELDS) if (!listCovered(env[f], ceiling[f], true)) fields.push(f);
  if ((env.clearance_level ?? 0) > (ceiling.clearance_level ?? 0)) fields.push('clearance_level');
  if (modeRank(env.permission_mode) > modeRank(ceiling.permission_mode)) fields.push('permission_mode');
  const envContracts = new Set(contractsOf(env));
  if (!contractsOf(ceiling).every((c) => envContracts.has(c))) fields.push('governing_contract_id');
  if ((env.budget_ceiling ?? Infinity) > (ceiling.budget_ceiling ?? Infinity)) fields.push('budget_ceiling');
  return fields.length === 0 ? { ok: true } : { ok: false, fields };
}

/** `env` narrowed to what `ceiling` allows: never wider than either. */
export function capToCeiling(env: AuthorityEnvelope, ceiling: Ceiling): AuthorityEnvelope {
  if (ceiling === UNBOUNDED) return normalizeAuthority(env);
  const out = intersectAuthority(env, ceiling);
  for (const f of WILDCARD_FIELDS) {
    if (env[f] === undefined && ceiling[f] === undefined) continue;
    out[f] = listMeet(env[f] ?? [], ceiling[f] ?? [], true);
  }
  return out;
}

/** What both ceilings allow. */
export function meetCeilings(a: Ceiling, b: Ceiling): Ceiling {
  if (a === UNBOUNDED) return b === UNBOUNDED ? UNBOUNDED : normalizeAuthority(b);
  if (b === UNBOUNDED) return normalizeAuthority(a);
  return capToCeiling(a, b);
}

/** A ceiling from a parsed JSON value; anything else is the least authority (fail closed). */
export function toCeiling(v: unknown): Ceiling {
  if (v === UNBOUNDED) return UNBOUNDED;
  if (v !== null && typeof v === 'object' && !Array.isArray(v)) return v as AuthorityEnvelope;
  return {};
}

/** Parses a stored ceiling (JSON text); anything unreadable is the least authority. */
export function parseCeiling(text: string | null | undefined): Ceiling {
  if (text === null || text === undefined || text === '') return {};
  try {
    return toCeiling(JSON.parse(text) as unknown);
  } catch {
    return {};
  }
}
