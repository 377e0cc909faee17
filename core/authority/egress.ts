/**
 * Egress allowlist matching: where a tool's output or request may go, and with
 * which HTTP method.
 *
 * Entries (grammar: core/authority/egress-entry.ts): an origin
 * (`https://api.example.com`, `http://127.0.0.1:8080`) matching that scheme,
 * host and port; a bare host (`api.example.com`) matching it on any scheme and
 * port; a wildcard (`*.example.com`) matching sub-domains only;
 * `kv:<workspace_id>` or `kv:*` for workspace storage writes; `mcp:<source>`
 * or `mcp:*` for a stdio catalog source (a process on this cell,
 * docs/tools.md); `*` for anywhere. An entry may name the HTTP methods it
 * allows (`POST,PUT:https://api.example.com`, `*:` for all six); without them
 * it allows GET and HEAD only, so a write method (POST, PUT, PATCH, DELETE)
 * needs an entry that names it. An empty list allows nothing (deny by default).
 */
import { parseEgressEntry, type EgressMethod } from './egress-entry.ts';

/** Destinations that are not URLs: workspace storage and stdio catalog sources, by their prefix. */
const NAMED = ['kv:', 'mcp:'];

/**
 * True when `destination` (a URL, reached with `method`, default GET; `kv:<workspace>` or
 * `mcp:<source>`) is on the allowlist. Named destinations are reached only through entries that
 * name no methods.
 */
export function egressAllowed(allowlist: readonly string[] | undefined, destination: string, method: EgressMethod = 'GET'): boolean {
  if (!allowlist || allowlist.length === 0) return false;
  const named = NAMED.find((p) => destination.startsWith(p));
  if (named !== undefined) {
    return allowlist.some((e) => e === '*' || e === `${named}*` || e === destination);
  }
  let url: URL;
  try {
    url = new URL(destination);
  } catch {
    return false;
  }
  const host = url.hostname.toLowerCase();
  for (const raw of allowlist) {
    const entry = parseEgressEntry(raw);
    if (!entry.methods.has(method)) continue;
    const e = entry.destination.toLowerCase();
    if (e === '*') return true;
    if (NAMED.some((p) => e.startsWith(p))) continue;
    if (e.includes('://')) {
      try {
        const o = new URL(e);
        if (o.protocol === url.protocol && o.hostname === host && o.port === url.port) return true;
      } catch {
        // An entry that is not a URL matches nothing.
      }
    } else if (e.startsWith('*.')) {
      if (host.endsWith(e.slice(1)) && host.length > e.length - 1) return true;
    } else if (e === host || e === `[${host}]`) {
      return true;
    }
  }
  return false;
}
