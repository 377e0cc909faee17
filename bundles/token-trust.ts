/**
 * Judging the issuing cell's access tokens from a key bundle alone (format
 * 2): core's token judge configured with what the signed bundle carries.
 *   keys       the cell's published token signing keys (signed by the cell
 *              identity key with the rest of the bundle, so they are trusted
 *              exactly as far as the bundle is)
 *   issuer     the cell's token issuer; (format 4) every issuer of its group when the bundle
 *              lists them (`issuers`: `service://<group id>` and the group's `--oauth-issuer` URLs)
 *   audience   given by the device: `edge:<device_id>`; tokens for anyone else
 *              are refused (`bad_audience`)
 *   revoked    the denylist at issue time (`revoked`)
 *   subjects   the bundle's principals with their status and role
 *              permissions (an archived or unknown subject: `revoked`)
 *   apiKey     the bundled key records, for tokens obtained with an API key
 *   clients    (format 3) the registered clients that existed at issue time: a token
 *              of a client deleted before the bundle is refused (`revoked`), as at the
 *              cell; a format 2 bundle cannot tell, and the check is not made
 *   maxActDepth (format 4) the longest delegation chain the cell honours; older bundles: core's default
 * The replay cache, the verified-token cache and the cache of DPoP proof keys are the device's own.
 */
import { createLocalJWKSet } from 'jose';
import { effectiveAuthority } from '../core/authority/scopes.ts';
import type { VerifiedTokenCache } from '../core/tokens/cache.ts';
import type { DpopKeyCache, DpopWindow } from '../core/tokens/dpop.ts';
import type { TokenJudgeConfig, TokenSubject } from '../core/tokens/judge.ts';
import type { ReplayCache } from '../core/tokens/replay.ts';
import type { KeyIndex } from './key-bundle.ts';

/** The audience of tokens a device honours: the RFC 8707 resource `edge:<device_id>`. */
export function edgeAudience(deviceId: string): string {
  return `edge:${deviceId}`;
}

/** The judge configuration of a loaded bundle, or null when it carries no token section (format 1, or issued without). */
export function tokenJudgeFromBundle(
  index: KeyIndex,
  opts: {
    audience: string;
    replay: ReplayCache;
    cache?: VerifiedTokenCache;
    dpopWindow?: DpopWindow;
    /** Public keys of proofs already verified (a client signs every proof with one key). */
    dpopKeys?: DpopKeyCache;
  },
): TokenJudgeConfig<TokenSubject> | null {
  const t = index.tokens;
  if (!t) return null;
  const revoked = new Set(t.revoked.map(([jti]) => jti));
  const clients = t.clients ? new Set(t.clients) : null;
  return {
    keys: createLocalJWKSet({ keys: t.keys.map((k) => ({ ...k })) }),
    issuer: t.issuers ?? t.issuer,
    audience: opts.audience,
    replay: opts.replay,
    ...(opts.cache ? { cache: opts.cache } : {}),
    ...(opts.dpopWindow ? { dpopWindow: opts.dpopWindow } : {}),
    ...(opts.dpopKeys ? { dpopKeys: opts.dpopKeys } : {}),
    isRevoked: (jti) => revoked.has(jti),
    subject(id) {
      const o = index.owner(id);
      return o ? { id, status: o.status, permissions: o.permissions } : null;
    },
    apiKey(keyId) {
      const r = index.byId(keyId);
      // The facts the cell gives the judge too: the key owner's status, and what the key holds now.
      return r
        ? {
            status: r.status,
            expires_at: r.expires_at,
            rate_limit_rpm: r.rate_limit_rpm,
            owner_status: r.owner_status,
            permissions: effectiveAuthority(r.owner_permissions, r.scopes),
          }
        : null;
    },
    ...(clients ? { clientExists: (clientId: string) => clients.has(clientId) } : {}),
    ...(t.max_act_depth !== undefined ? { maxActDepth: t.max_act_depth } : {}),
  };
}
