/**
 * Resource indicators (RFC 8707): who a token is for. A token request may
 * name one `resource`; the token's `aud` is then that resource:
 *   - the cell's own API (`<public URL>/api/public/v1`), also the default;
 *   - `edge:<device_id>` of a device registered with this cell: the token is
 *     honoured offline by that device only (docs/edge.md), and refused here
 *     (`bad_audience`), since the cell judges tokens addressed to itself.
 * Anything else, or several `resource` parameters, is `invalid_target`.
 */
import type { Context } from 'hono';
import type { AppEnv, Cell } from '../context.ts';
import { getDevice } from '../edge/devices.ts';
import { OAuthError } from './oauth-error.ts';
import { audienceOf } from './settings.ts';

const EDGE_RESOURCE = /^edge:([A-Za-z0-9_-]{43})$/;

/** The audience of a token for `resource`, or null when this cell does not issue tokens for it. */
export function audienceFor(cell: Cell, resource: string): string | null {
  if (resource === audienceOf(cell)) return resource;
  const m = EDGE_RESOURCE.exec(resource);
  return m && getDevice(cell.store, m[1]!) ? resource : null;
}

/** True for every audience this cell issues tokens for (its own API and its registered devices). */
export function isOwnAudience(cell: Cell, aud: string): boolean {
  return audienceFor(cell, aud) !== null;
}

/** The audience a token request asks for with `resource` (after readForm); the cell's own by default. */
export async function requestedAudience(cell: Cell, c: Context<AppEnv>): Promise<string> {
  const ct = c.req.header('content-type') ?? '';
  const values = /^application\/x-www-form-urlencoded\b/i.test(ct) ? (await c.req.parseBody({ all: true }))['resource'] : undefined;
  if (values === undefined) return audienceOf(cell);
  if (typeof values !== 'string') throw new OAuthError('invalid_target', 'one resource per token request');
  const aud = audienceFor(cell, values);
  if (aud === null) throw new OAuthError('invalid_target', 'this cell issues tokens for its own API or for a registered device (edge:<device_id>)');
  return aud;
}
