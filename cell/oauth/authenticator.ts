/**
 * The JWT authenticator of the bearer path. Recognises compact JWTs, takes
 * the one verdict on the token (verdict.ts: signature, claims, denylist,
 * root credential, client, subject; the same verdict introspection gives),
 * then checks the bindings against this request (DPoP proof for cnf.jkt, TLS
 * client certificate for cnf x5t#S256).
 */
import type { Context } from 'hono';
import { ServiceError } from '../../core/errors.ts';
import { looksLikeJwt } from '../../core/tokens/access-token.ts';
import { checkConfirmation, certThumbprint } from '../../core/tokens/cnf.ts';
import { isTokenError, TokenError } from '../../core/tokens/errors.ts';
import type { AppEnv, AuthContext, Authenticator } from '../context.ts';
import { peerCertificate } from './clients.ts';
import { checkRequestProof, dpopHeader } from './dpop-check.ts';
import type { OAuthContext } from './oauth-context.ts';
import { judgeToken } from './verdict.ts';

function refuse(e: TokenError, dpop: boolean): ServiceError {
  const scheme = dpop ? 'DPoP' : 'Bearer';
  const err = e.code.startsWith('dpop_') ? 'invalid_dpop_proof' : 'invalid_token';
  return new ServiceError('unauthorized', `access token refused: ${e.message}`, {
    details: { reason: e.code },
    headers: { 'WWW-Authenticate': `${scheme} realm="cell", error="${err}", algs="EdDSA Ed25519 ES256 ES384 RS256"` },
  });
}

export function jwtAuthenticator(ctx: OAuthContext): Authenticator {
  async function judge(scheme: 'bearer' | 'dpop', token: string, c: Context<AppEnv>): Promise<AuthContext> {
    const v = await judgeToken(ctx, token);
    const { claims } = v;
    const bound = claims.cnf?.jkt !== undefined;
    const proof = dpopHeader(c);
    let dpopJkt: string | null = null;
    if (bound) {
      if (scheme !== 'dpop') throw new TokenError('dpop_required', 'a DPoP-bound token is presented with the DPoP scheme');
      if (proof === null) throw new TokenError('dpop_required', 'a DPoP-bound token needs a DPoP proof');
      dpopJkt = await checkRequestProof(ctx, c, proof, token);
    } else if (scheme === 'dpop') {
      throw new TokenError('dpop_invalid', 'the DPoP scheme needs a DPoP-bound token');
    }
    let certTp: string | null = null;
    if (claims.cnf?.['x5t#S256'] !== undefined) {
      const peer = peerCertificate(c);
      certTp = peer ? await certThumbprint(peer.der) : null;
    }
    checkConfirmation(claims.cnf, { dpopJkt, certThumbprint: certTp });
    const p = v.subject;
    return {
      principal: { id: p.id, kind: p.kind, name: p.name, roles: p.roles },
      permissions: v.permissions, scopes: v.scopes, effective: v.effective, envelope: v.envelope,
      credential: {
        type: claims.sat ? 'sat' : 'oauth', id: claims.jti, root: v.root, clientId: claims.client_id,
        ...(v.rateLimitRpm !== null ? { rateLimitRpm: v.rateLimitRpm } : {}),
      },
    };
  }

  return {
    name: 'oauth_jwt',
    async authenticate({ scheme, token }, c) {
      if (!looksLikeJwt(token)) return null;
      try {
        return await judge(scheme, token, c);
      } catch (e) {
        if (isTokenError(e)) throw refuse(e, scheme === 'dpop');
        throw e;
      }
    },
  };
}
