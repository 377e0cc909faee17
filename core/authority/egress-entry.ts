/**
 * The grammar of an `egress_allowlist` entry, shared by the tools that judge a
 * destination (cell/tools/egress.ts) and the ceiling that judges whether one
 * entry covers another (ceiling.ts), so both read an entry the same way.
 *
 *   entry       = [ methods ":" ] destination
 *   methods     = "*" / method *( "," method )
 *   method      = "GET" / "HEAD" / "POST" / "PUT" / "PATCH" / "DELETE"
 *   destination = an origin, a bare host, `*.<domain>`, `*`, `kv:<workspace>`, `kv:*`
 *
 * An entry without methods allows what it always allowed: reading (`GET` and
 * `HEAD`: `http.get`, and `http.request` with those methods) and, for `kv:`
 * destinations and `*`, workspace storage writes. A write method (`POST`,
 * `PUT`, `PATCH`, `DELETE`) is allowed only by an entry that names it
 * (`POST,PUT:https://api.example.com`), or by `*:` (every method:
 * `*:https://api.example.com`, `*:*`): deny by default, so an allowlist
 * written before methods existed grants no write. Method names are upper case
 * (RFC 9110 §9.1: methods are case-sensitive); an entry whose prefix is not a
 * list of these names is a destination as a whole (and, read as a URL with an
 * unknown scheme, matches nothing).
 */

/** The HTTP methods an entry may name. */
export const EGRESS_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
export type EgressMethod = (typeof EGRESS_METHODS)[number];

/** What an entry without methods allows (the safe methods, RFC 9110 §9.2.1). */
export const READ_METHODS: readonly EgressMethod[] = ['GET', 'HEAD'];

const PREFIX = /^(\*|(?:GET|HEAD|POST|PUT|PATCH|DELETE)(?:,(?:GET|HEAD|POST|PUT|PATCH|DELETE))*):(.+)$/;

/** An entry read: the methods it allows (every method for `*:`), and its destination. */
export interface EgressEntry {
  methods: ReadonlySet<EgressMethod>;
  /** True when the entry named its methods (an entry without them also allows workspace storage writes). */
  named: boolean;
  destination: string;
}

/**
 * Reads an allowlist entry.
 * @example parseEgressEntry('POST,PUT:https://api.example.com') // { methods: {POST, PUT}, named: true, destination: 'https://api.example.com' }
 */
export function parseEgressEntry(entry: string): EgressEntry {
  const m = PREFIX.exec(entry);
  if (m === null) return { methods: new Set(READ_METHODS), named: false, destination: entry };
  const methods = m[1] === '*' ? EGRESS_METHODS : (m[1]!.split(',') as EgressMethod[]);
  return { methods: new Set(methods), named: true, destination: m[2]! };
}

/** True when `parent` allows every method `child` allows. */
export function methodsCovered(parent: EgressEntry, child: EgressEntry): boolean {
  for (const x of child.methods) if (!parent.methods.has(x)) return false;
  return true;
}
