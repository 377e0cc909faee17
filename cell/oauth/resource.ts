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
 * Anything else, or several `resource` parameters, is `invalid_target`.
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

/** The audience of a token for `resource`, or null when this cell does not issue tokens for it. */
export async function audienceFor(ctx: OAuthContext, resource: string): Promise<string | null> {
  if (ctx.audiences.accepts(resource) || isProtectedResource(ctx, resource)) return resource;
  const device = edgeDeviceOf(resource);
  return device !== null && (await ctx.deviceExists(device)) ? resource : null;
}

/** The audience a token request asks for with `resource` (after readForm); the cell's own by default. */
export async function requestedAudience(ctx: OAuthContext, c: Context<AppEnv>): Promise<string> {
  const ct = c.req.header('content-type') ?? '';
  const values = /^application\/x-www-form-urlencoded\b/i.test(ct) ? (await c.req.parseBody({ all: true }))['resource'] : undefined;
  if (values === undefined) return ctx.audiences.own();
  if (typeof values !== 'string') throw new OAuthError('invalid_target', 'one resource per token request');
  const aud = await audienceFor(ctx, values);
  if (aud === null)
    throw new OAuthError(
      'invalid_target',
      'this cell issues tokens for its own API, a registered device (edge:<device_id>) or a registered protected resource',
    );
  return aud;
}
