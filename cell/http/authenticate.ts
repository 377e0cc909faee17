/**
 * Second gate: authentication (401). Reads `Authorization: Bearer <token>`
 * (or `DPoP <token>` for DPoP-bound access tokens) and asks each registered
 * authenticator in turn; the first that recognises the credential decides.
 */
import type { MiddlewareHandler } from 'hono';
import { unauthorized } from '../../core/errors.ts';
import type { AppEnv, Authenticator } from '../context.ts';

const AUTH_HEADER = /^(Bearer|DPoP) +([A-Za-z0-9\-._~+/]+=*)$/i;

export function authenticate(authenticators: readonly Authenticator[]): MiddlewareHandler<AppEnv> {
  return async function authenticate(c, next) {
    const header = c.req.header('authorization');
    if (!header) throw unauthorized('missing bearer credential');
    const m = AUTH_HEADER.exec(header.trim());
    if (!m) throw unauthorized('malformed Authorization header');
    const scheme = m[1]!.toLowerCase() === 'dpop' ? 'dpop' : 'bearer';
    const token = m[2]!;
    for (const a of authenticators) {
      const auth = await a.authenticate({ scheme, token }, c);
      if (auth) {
        c.set('auth', auth);
        await next();
        return;
      }
    }
    throw unauthorized('credential not recognised');
  };
}
