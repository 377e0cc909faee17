/**
 * Mints access tokens (RFC 9068): `typ: at+jwt`, EdDSA with the active
 * signing key, claims iss, sub, aud, client_id, scope, iat, exp, jti and,
 * for bound tokens, cnf. The caller has already narrowed the scope and
 * resolved the audience.
 */
import { SignJWT } from 'jose';
import { normalize } from '../../core/authority/scopes.ts';
import type { AccessTokenClaims } from '../../core/tokens/access-token.ts';
import type { ActClaim } from '../../core/tokens/delegation.ts';
import type { OAuthContext } from './oauth-context.ts';
import { audienceOf, issuerOf } from './settings.ts';

export interface IssueInput {
  subject: string;
  clientId: string;
  scope: readonly string[];
  cnf?: { jkt?: string; 'x5t#S256'?: string };
  ttlSeconds?: number;
  sat?: boolean;
  /** The root credential (`api_key:<id>` or `token:<jti>`) when the token derives from another credential. */
  root?: string;
  /** `aud`: the cell's API (default) or `edge:<device_id>` (cell/oauth/resource.ts). */
  audience?: string;
  /** RFC 8693: the actor chain of an exchanged token, and every credential it derives from (cell/oauth/exchange.ts). */
  act?: ActClaim;
  links?: string[];
  /** RFC 8693 §4.4: the one principal that may act for the subject with this token. */
  mayAct?: string;
}

export function randomToken(bytes = 32): string {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString('base64url');
}

export async function issueAccessToken(
  ctx: OAuthContext,
  input: IssueInput,
): Promise<{ token: string; claims: AccessTokenClaims; expiresIn: number }> {
  const scope = normalize(input.scope);
  if (scope.length === 0) throw new TypeError('issueAccessToken: empty scope (callers refuse with invalid_scope first)');
  const { config, clock } = ctx.core;
  const ttl = input.ttlSeconds ?? config.accessTokenTtlSeconds;
  const iat = Math.floor(clock.now() / 1000);
  const claims: AccessTokenClaims = {
    iss: issuerOf(config),
    sub: input.subject,
    aud: input.audience ?? audienceOf(config),
    client_id: input.clientId,
    scope: scope.join(' '),
    iat,
    exp: iat + ttl,
    jti: randomToken(16),
    ...(input.cnf && Object.keys(input.cnf).length > 0 ? { cnf: input.cnf } : {}),
    ...(input.sat ? { sat: true } : {}),
    ...(input.root ? { root: input.root } : {}),
    ...(input.act ? { act: input.act } : {}),
    ...(input.links && input.links.length > 0 ? { links: input.links } : {}),
    ...(input.mayAct ? { may_act: { sub: input.mayAct } } : {}),
  };
  const ring = ctx.keys.current();
  const token = await new SignJWT({ ...claims })
    .setProtectedHeader({ alg: 'EdDSA', typ: 'at+jwt', kid: ring.active.kid })
    .sign(ring.active.key);
  return { token, claims, expiresIn: ttl };
}
