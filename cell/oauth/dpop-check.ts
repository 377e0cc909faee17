/**
 * The cell side of DPoP at the token endpoint: the proof check of a request
 * against the module's replay cache, with the expected htu built from the
 * configured public URL and the route path (never from Host or
 * X-Forwarded-* headers). The bearer path's proof check is core's token
 * judge (cell/oauth/authenticator.ts), with the same replay cache.
 */
import type { Context } from 'hono';
import { verifyDpopProof } from '../../core/tokens/dpop.ts';
import { dpopHeaderOf } from '../../core/tokens/request.ts';
import type { AppEnv } from '../context.ts';
import type { OAuthContext } from './oauth-context.ts';
import { OAUTH, publicBase } from './settings.ts';

/** The single DPoP header of the request, or null; several headers are malformed. */
export function dpopHeader(c: Context<AppEnv>): string | null {
  return dpopHeaderOf(c.req.raw.headers);
}

/** Verifies the request's DPoP proof; returns its key thumbprint. Throws TokenError. */
export async function checkRequestProof(ctx: OAuthContext, c: Context<AppEnv>, proof: string, accessToken?: string): Promise<string> {
  const r = await verifyDpopProof(proof, {
    htm: c.req.method,
    htu: publicBase(ctx.core.config) + c.req.path,
    now: ctx.core.clock.now(),
    replay: ctx.replay,
    window: OAUTH.dpopWindow,
    ...(accessToken !== undefined ? { accessToken } : {}),
  });
  return r.jkt;
}
