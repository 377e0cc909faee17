/**
 * Whether a source's server trusts this cell as its authorization server, so
 * that its calls may carry the cell's per-call tokens (`auth.type: cell`,
 * docs/tools.md): its RFC 9728 protected-resource metadata names the cell, or
 * the operator registered it as a protected resource (`--protected-resource`).
 */
import type { SourcesContext } from '../sources/context.ts';
import { smallRequest } from './small-request.ts';

/**
 * The audience of a server that trusts this cell: its RFC 9728 protected-resource metadata names this
 * cell among its `authorization_servers` (the audience is its `resource`, which must be the source's
 * URL), or the URL falls under a `--protected-resource` (the audience is that resource). Null: neither.
 */
export async function trustedAudience(ctx: SourcesContext, url: URL): Promise<string | null> {
  const meta = await protectedResourceMetadata(ctx, url);
  if (meta !== null) {
    const ours = new Set(ctx.trust.issuers().map((i) => i.replace(/\/$/, '')));
    const names = meta.authorization_servers.some((a) => ours.has(a.replace(/\/$/, '')));
    if (names && sameResource(meta.resource, url)) return meta.resource;
  }
  return ctx.trust.protectedResourceOf(url.href);
}

const sameResource = (a: string, u: URL) => a.replace(/\/$/, '') === `${u.origin}${u.pathname}`.replace(/\/$/, '');

/** The server's RFC 9728 metadata (`/.well-known/oauth-protected-resource` + the URL's path), or null when it has none. */
async function protectedResourceMetadata(
  ctx: SourcesContext,
  url: URL,
): Promise<{ resource: string; authorization_servers: string[] } | null> {
  const path = url.pathname === '/' ? '' : url.pathname;
  const where = `${url.origin}/.well-known/oauth-protected-resource${path}`;
  try {
    const res = await smallRequest(ctx.dispatcher, new URL(where), { method: 'GET', headers: { accept: 'application/json' } });
    if (res.status !== 200) return null;
    const m = JSON.parse(res.text) as { resource?: unknown; authorization_servers?: unknown };
    if (typeof m.resource !== 'string' || !Array.isArray(m.authorization_servers)) return null;
    return { resource: m.resource, authorization_servers: m.authorization_servers.filter((x): x is string => typeof x === 'string') };
  } catch {
    return null;
  }
}
