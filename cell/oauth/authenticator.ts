/**
 * The JWT authenticator of the bearer path. Recognises compact JWTs and hands
 * them to core's one token judge (core/tokens/judge.ts), the same function
 * the edge runs offline and introspection runs without the request:
 * signature, alg, typ, iss, aud, exp, the denylist, the DPoP proof (expected
 * URI = the configured public URL + the route, never Host or X-Forwarded-*),
 * the certificate binding (the CA-verified TLS client leaf), the subject's
 * status now, the root credential (a key-derived token lives with its key; a
 * SAT of a token dies with that token) and the client. Authority = the
 * subject's role permissions now ∩ the token's scope; envelope = the subject's
 * ceiling ∩ the root key's cap. What the cell supplies are the lookups, all
 * from the module instance: the verified-token cache, the DPoP replay cache,
 * the denylist mirror, the client cache, and IAM's principals and keys.
 *
 * Every lookup but the signature reads state that other cells of a group may
 * change: the denylist mirror, the IAM caches and the client cache all follow
 * `store.onChange`, and the root key is read from the store, so a verdict
 * taken from the verified-token cache is as current as a fresh one.
 */
import type { Context } from 'hono';
import { meetCeilings, toCeiling, type Ceiling } from '../../core/authority/ceiling.ts';
import { looksLikeJwt } from '../../core/tokens/access-token.ts';
import type { VerifiedTokenCache } from '../../core/tokens/cache.ts';
import { DpopKeyCache } from '../../core/tokens/dpop.ts';
import {
  judgeAccessToken,
  type NoRequestFacts,
  type TokenJudgeConfig,
  type TokenKeyInfo,
  type TokenRequestFacts,
  type TokenSubject,
  type TokenVerdict,
} from '../../core/tokens/judge.ts';
import { tokenRefusal } from '../../core/tokens/refusal.ts';
import { dpopHeaderOf } from '../../core/tokens/request.ts';
import { nodeProofSignatures } from '../../runtime/proof-signature.ts';
import { verifiedLeafThumbprint } from '../../runtime/peer-certificate.ts';
import type { AppEnv, AuthContext, Authenticator } from '../context.ts';
import type { Principal } from '../iam/api.ts';
import { getClient } from './clients.ts';
import type { OAuthContext } from './oauth-context.ts';
import { isDenied, TABLES } from './repository.ts';
import { MCP_PATH, OAUTH, publicBase } from './settings.ts';
import { resourceMetadataUrl } from './protected-resource.ts';

/** A token subject as the cell knows it: the judge's view plus the principal itself. */
export interface CellTokenSubject extends TokenSubject {
  principal: Principal;
}

export type CellTokenVerdict = TokenVerdict<CellTokenSubject>;

/** Core's judgement with this cell's lookups: with request facts, the bearer path's; with `{ now }` only, introspection's. */
export type CellTokenJudge = (token: string, facts: TokenRequestFacts | NoRequestFacts) => Promise<CellTokenVerdict>;

/** The cell's token judgement for its own API, sharing the module's verified-token cache. */
export function cellTokenJudge(ctx: OAuthContext): CellTokenJudge {
  const accepts = (aud: string) => ctx.audiences.accepts(aud);
  return judgeFor(ctx, () => accepts, ctx.verified);
}

/**
 * The same judgement for a token presented at the cell's MCP endpoint: its audience must be the
 * endpoint (RFC 8707, as MCP requires of a server: a token for the API is not one for /mcp, nor the
 * reverse), with a verified-token cache of its own.
 */
export function cellMcpTokenJudge(ctx: OAuthContext): CellTokenJudge {
  const accepts = (aud: string) => ctx.audiences.acceptsMcp(aud);
  return judgeFor(ctx, () => accepts, ctx.verifiedMcp);
}

/**
 * The same judgement for a token addressed to another audience this cell
 * issues for (one of its devices, `edge:<device_id>`): introspection. No
 * verified-token cache: one cache belongs to one audience.
 */
export function cellTokenJudgeFor(ctx: OAuthContext, audience: string): CellTokenJudge {
  return judgeFor(ctx, () => audience);
}

function judgeFor(
  ctx: OAuthContext,
  audience: () => TokenJudgeConfig['audience'],
  cache?: VerifiedTokenCache,
  isRevoked: (jti: string) => boolean | Promise<boolean> = (jti) => ctx.denylist.isRevoked(jti),
): CellTokenJudge {
  const { core, iam } = ctx;
  const lookups: Omit<TokenJudgeConfig<CellTokenSubject>, 'keys' | 'issuer' | 'audience'> = {
    replay: ctx.replay,
    dpopWindow: OAUTH.dpopWindow,
    dpopKeys: new DpopKeyCache({ native: nodeProofSignatures }),
    ...(cache ? { cache } : {}),
    isRevoked,
    async subject(id) {
      const p = await iam.principal(id);
      if (!p) return null;
      return { id: p.id, status: p.status, permissions: p.status === 'active' ? await iam.permissionsOf(p) : [], principal: p };
    },
    async apiKey(keyId): Promise<TokenKeyInfo | null> {
      const k = await iam.keyRow(keyId);
      if (!k) return null;
      const owner = await iam.principal(k.owner_id);
      return {
        status: k.status,
        expires_at: k.expires_at,
        rate_limit_rpm: k.rate_limit_rpm,
        authority: k.authority,
        owner_status: owner?.status ?? 'purged',
        permissions: (await iam.keyAuthority(k)).permissions ?? [],
      };
    },
    clientExists: async (clientId) => (await getClient(ctx, clientId)) !== undefined,
  };
  // Issuer, audience and keys are read per judgement: the public URL is settled once the cell listens, keys rotate.
  return (token, facts) =>
    judgeAccessToken(token, facts, {
      ...lookups,
      keys: ctx.keys.current().keySet,
      issuer: ctx.issuers.accepted(),
      audience: audience(),
      maxActDepth: core.config.maxDelegationDepth,
    });
}

/**
 * The envelope a token carries: its subject's ceiling, met with its root key's cap and, for an exchanged
 * token, with every actor's ceiling and every linked key's cap (the intersection along the chain).
 */
function tokenEnvelope(
  p: Pick<Principal, 'authority'>,
  rootKey: Pick<TokenKeyInfo, 'authority'> | null,
  actors: readonly CellTokenSubject[] = [],
  linkKeys: readonly Pick<TokenKeyInfo, 'authority'>[] = [],
): Ceiling {
  let env: Ceiling = p.authority;
  for (const k of [rootKey, ...linkKeys]) if (k?.authority) env = meetCeilings(env, toCeiling(k.authority));
  for (const a of actors) env = meetCeilings(env, a.principal.authority);
  return env;
}

/** The request's authority from a token's verdict. */
function authOf(v: Extract<CellTokenVerdict, { ok: true }>): AuthContext {
  const p = v.subject.principal;
  const cred = v.credential;
  return {
    principal: { id: p.id, kind: p.kind, name: p.name, roles: p.roles },
    permissions: [...v.subject.permissions],
    scopes: v.scopes,
    effective: v.effective,
    envelope: tokenEnvelope(p, cred.rootKey, v.actorSubjects, cred.linkKeys),
    credential: {
      type: cred.type,
      id: cred.id,
      root: cred.root,
      clientId: cred.clientId,
      ...(cred.actors.length > 0 ? { actors: cred.actors } : {}),
      ...(cred.rateLimitRpm !== null ? { rateLimitRpm: cred.rateLimitRpm } : {}),
    },
  };
}

export function jwtAuthenticator(ctx: OAuthContext): Authenticator {
  const judgeApi = cellTokenJudge(ctx);
  const judgeMcp = cellMcpTokenJudge(ctx);
  // A stream's recheck (below): no verified-token cache, and the denylist asked of the store too, since
  // the mirror learns another cell's revocation only after the notification that prompts the recheck.
  // Its audience is the one of the path, as when the request was accepted.
  const rejudgeFor = (accepts: (aud: string) => boolean) =>
    judgeFor(
      ctx,
      () => accepts,
      undefined,
      async (jti) => ctx.denylist.inMirror(jti) || (await isDenied(ctx.core.store, jti)),
    );
  const rejudgeApi = rejudgeFor((aud) => ctx.audiences.accepts(aud));
  const rejudgeMcp = rejudgeFor((aud) => ctx.audiences.acceptsMcp(aud));
  const { config, clock } = ctx.core;
  return {
    name: 'oauth_jwt',
    // Its subject, root key and linked credentials are IAM's: their tables are the key authenticator's.
    tables: [TABLES.denylist, TABLES.clients, TABLES.signingKeys],
    async authenticate({ scheme, token }, c: Context<AppEnv>) {
      if (!looksLikeJwt(token)) return null;
      const mcp = c.req.path === MCP_PATH;
      const judge = mcp ? judgeMcp : judgeApi;
      const v = await judge(token, {
        scheme,
        method: c.req.method,
        uri: publicBase(config) + c.req.path,
        dpop: dpopHeaderOf(c.req.raw.headers),
        certThumbprint: () => verifiedLeafThumbprint(c.env?.incoming?.socket),
        now: clock.now(),
      });
      if (!v.ok) throw tokenRefusal(v, scheme, { realm: 'cell', resourceMetadata: resourceMetadataUrl(config, c.req.path) });
      return authOf(v);
    },
    // The proof and the certificate were judged when the request was accepted (a proof is single-use).
    async recheck({ scheme, token }, c: Context<AppEnv>) {
      if (!looksLikeJwt(token)) return null;
      const v = await (c.req.path === MCP_PATH ? rejudgeMcp : rejudgeApi)(token, { now: clock.now() });
      if (!v.ok) throw tokenRefusal(v, scheme, { realm: 'cell', resourceMetadata: resourceMetadataUrl(config, c.req.path) });
      return authOf(v);
    },
  };
}
