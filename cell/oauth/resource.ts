/**
 * Resource indicators (RFC 8707): who a token is for. A token request may
 * name one `resource`; the token's `aud` is then that resource:
 *   - the cell's own API (`<public URL>/api/public/v1`), also the default, or
 *     the API of another cell of its group (cell/oauth/audiences.ts);
 *   - `edge:<device_id>` of a device registered with this cell: the token is
 *     honoured offline by that device only (docs/edge.md), and refused here
 *     (`bad_audience`), since the cell judges tokens addressed to itself;
 *   - an external protected resource the operator named
 *     (`--protected-resource`, exact string): a service that verifies the
 *     cell's tokens itself, offline against /oauth/jwks.json.
 *   - the cell's MCP endpoint (`<public URL>/mcp`, or a member's): a token
 *     honoured at `/mcp` only (cell/oauth/authenticator.ts), as MCP clients
 *     ask for it (RFC 9728 metadata names it).
 * The API and MCP resources are taken in the forms clients write them: with
 * or without a trailing slash, scheme and host in any case, the default port
 * spelled or not; the token's `aud` is the canonical form (no trailing
 * slash). Anything else, or several `resource` parameters, is `invalid_target`.
 * Whether a device is registered is the edge module's answer
 * (`ctx.deviceExists`): this module never reads the edge module's tables.
 */
import type { Context } from 'hono';
import type { AppEnv } from '../context.ts';
import { OAuthError } from './oauth-error.ts';
import type { OAuthContext } from './oauth-context.ts';

const EDGE_RESOURCE = /^edge:([A-Za-z0-9_-]{43})$/;

/** The device id an `edge:<device_id>` audience names (by its form only), or null. */
export function edgeDeviceOf(aud: string): string | null {
  return EDGE_RESOURCE.exec(aud)?.[1] ?? null;
}

/** True when `aud` is an external protected resource the operator registered. */
export function isProtectedResource(ctx: OAuthContext, aud: string): boolean {
  return ctx.core.config.protectedResources.includes(aud);
}

/**
 * A URL resource as the group's audiences spell it: scheme and host as URL parsing gives them, the
 * default port dropped, one trailing slash of the path dropped; null for anything with a query,
 * fragment or credentials, or not http(s).
 */
export function canonicalResource(resource: string): string | null {
  const u = URL.parse(resource);
  if (!u || (u.protocol !== 'https:' && u.protocol !== 'http:') || u.search || u.hash || u.username || u.password) return null;
  if (resource.includes('?') || resource.includes('#')) return null;
  const path = u.pathname.length > 1 && u.pathname.endsWith('/') ? u.pathname.slice(0, -1) : u.pathname;
  return `${u.origin}${path === '/' ? '' : path}`;
}

/** The audience of a token for `resource`, or null when this cell does not issue tokens for it. */
export async function audienceFor(ctx: OAuthContext, resource: string): Promise<string | null> {
  if (ctx.audiences.accepts(resource) || isProtectedResource(ctx, resource)) return resource;
  const canonical = canonicalResource(resource);
  if (canonical !== null && (ctx.audiences.accepts(canonical) || ctx.audiences.acceptsMcp(canonical))) return canonical;
  const device = edgeDeviceOf(resource);
  return device !== null && (await ctx.deviceExists(device)) ? resource : null;
}

/** The audience a token request names with `resource` (after readForm); null when it names none. */
export async function requestedResource(ctx: OAuthContext, c: Context<AppEnv>): Promise<string | null> {
  const ct = c.req.header('content-type') ?? '';
  const values = /^application\/x-www-form-urlencoded\b/i.test(ct) ? (await c.req.parseBody({ all: true }))['resource'] : undefined;
  if (values === undefined) return null;
  if (typeof values !== 'string') throw new OAuthError('invalid_target', 'one resource per token request');
  return resourceOrRefusal(ctx, values);
}

/** The audience of a token for `resource`, or the `invalid_target` refusal. */
export async function resourceOrRefusal(ctx: OAuthContext, resource: string): Promise<string> {
  const aud = await audienceFor(ctx, resource);
  if (aud === null)
    throw new OAuthError(
      'invalid_target',
      'this cell issues tokens for its own API, its MCP endpoint, a registered device (edge:<device_id>) or a registered protected resource',
    );
  return aud;
}
