/**
 * Agents act on behalf of the run's requester (RFC 8693 semantics, issued
 * by the cell itself): when an agent's HTTP tool call reaches an external
 * service the operator registered as a protected resource
 * (`--protected-resource`), the cell issues a token with `sub` = the
 * requester, `act` = the agent principal (with the run and crew as context),
 * `aud` = that resource, `scope` = the tool grant, a lifetime no longer than
 * the call may take, bound (DPoP, `cnf.jkt`) to a key this cell process
 * holds and never shows: the tool presents it with a fresh proof. Nothing
 * else can present it. The service checks it offline against /oauth/jwks.json.
 * A requester that is no longer active gets no token: the call is refused.
 *
 * An imported tool (an MCP server that trusts this cell, docs/tools.md) gets the
 * same token for each of its calls, its audience the server's resource as the
 * source was registered with (`audience`), its scope the tool grant
 * (`tools.mcp.<source>.<tool>`).
 */
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';
import { ServiceError } from '../../core/errors.ts';
import { accessTokenHash } from '../../core/tokens/ath.ts';
import { sha256Hex } from '../../core/canonical.ts';
import { issueAccessToken } from './issue.ts';
import type { OAuthContext } from './oauth-context.ts';
import type { HttpDelegation, HttpDelegationRequest } from '../../runtime/http-call.ts';

/** What the tools module asks for: the call, and who it is for. */
export interface ToolDelegationRequest extends HttpDelegationRequest {
  /**
   * The audience, when the tools module already knows it: an imported tool's source, whose server named
   * this cell as its authorization server (RFC 9728) or is a `--protected-resource`, checked when the
   * source was registered. Absent: the registered protected resource the URL falls under, if any.
   */
  audience?: string;
  /** The token's scope; default the tool grant, `tools.<tool>`. */
  scope?: string;
}

/** A token for one call: the token, its id and SHA-256 (for the journal; never the token), its audience, and its proof maker. */
export interface ToolDelegation extends HttpDelegation {
  audience: string;
}

/** Lifetime of a tool call's token: the HTTP tool's 5 s budget, with room for clock drift at the service. */
export const TOOL_TOKEN_TTL_SECONDS = 60;

/** The registered protected resource a URL falls under (the resource itself, or a path below it), or null. */
export function protectedResourceOf(resources: readonly string[], url: string): string | null {
  for (const r of resources) {
    const base = r.endsWith('/') ? r : `${r}/`;
    if (url === r || url.startsWith(base)) return r;
  }
  return null;
}

export function toolDelegator(ctx: OAuthContext): (req: ToolDelegationRequest) => Promise<ToolDelegation | null> {
  let key: Promise<{ privateKey: CryptoKey; jwk: JWK; jkt: string }> | undefined;
  const cellKey = () =>
    (key ??= (async () => {
      const kp = await generateKeyPair('Ed25519');
      const jwk = await exportJWK(kp.publicKey);
      return { privateKey: kp.privateKey, jwk, jkt: await calculateJwkThumbprint(jwk) };
    })());
  return async (req) => {
    const audience = req.audience ?? protectedResourceOf(ctx.core.config.protectedResources, req.url);
    if (audience === null) return null;
    const requester = await ctx.iam.principal(req.requester);
    if (requester?.status !== 'active')
      throw new ServiceError('forbidden', 'the run requester no longer holds authority to act for', {
        details: { reason: 'requester_inactive' },
      });
    const k = await cellKey();
    const { token, claims } = await issueAccessToken(ctx, {
      subject: requester.id,
      clientId: req.runId !== undefined ? `run:${req.runId}` : 'cell:tools',
      scope: [req.scope ?? `tools.${req.tool}`],
      audience,
      ttlSeconds: TOOL_TOKEN_TTL_SECONDS,
      cnf: { jkt: k.jkt },
      ...(req.agentId !== undefined
        ? {
            act: {
              sub: req.agentId,
              ...(req.runId !== undefined ? { run_id: req.runId } : {}),
              ...(req.crewId ? { crew_id: req.crewId } : {}),
            },
          }
        : {}),
    });
    return {
      token,
      jti: claims.jti,
      tokenSha256: sha256Hex(token),
      audience,
      async proof(htm, htu) {
        return new SignJWT({
          htm,
          htu,
          iat: Math.floor(ctx.core.clock.now() / 1000),
          jti: crypto.randomUUID(),
          ath: await accessTokenHash(token),
        })
          .setProtectedHeader({ alg: 'EdDSA', typ: 'dpop+jwt', jwk: k.jwk })
          .sign(k.privateKey);
      },
    };
  };
}
