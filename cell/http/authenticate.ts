/**
 * Second gate: authentication (401), runtime/gateway.ts `authGate`: the
 * registered authenticators (API keys, OAuth access tokens) are asked in
 * turn; the first that recognises the credential decides.
 */
import type { MiddlewareHandler } from 'hono';
import { authGate } from '../../runtime/gateway.ts';
import type { AppEnv, AuthContext, Authenticator } from '../context.ts';

export function authenticate(authenticators: readonly Authenticator[]): MiddlewareHandler<AppEnv> {
  return authGate<AuthContext, AppEnv>(async (cred, c) => {
    for (const a of authenticators) {
      const auth = await a.authenticate(cred, c);
      if (auth) return auth;
    }
    return null;
  });
}
