/**
 * The edge's judgement of a presented credential, from the signed bundle
 * alone, with the same core code as the cell:
 *   - an API key: `verifyPresentedKey` on the bundled record (via
 *     KeyIndex.check), refusals as the cell's (401 unknown/revoked/expired/
 *     grace-elapsed keys and inactive owners, 403 IP and region rules);
 *   - an OAuth access token or SAT: core's `judgeAccessToken` over the
 *     bundle's token section (bundles/token-trust.ts), refused as the cell
 *     refuses (401 with the TokenError code as details.reason);
 * then `grants` on the effective authority (403 with required_permission).
 * What only the edge can say: `no_key_bundle` (it cannot resolve a
 * credential without one), `bundle_expired`, and `no_token_keys` (its bundle
 * carries no token section: format 1, or issued without one).
 */
import { ServiceError, forbidden, unauthorized } from '../core/errors.ts';
import { grants } from '../core/authority/scopes.ts';
import { looksLikeJwt } from '../core/tokens/access-token.ts';
import { judgeAccessToken, type TokenJudgeConfig, type TokenRequestFacts } from '../core/tokens/judge.ts';
import { tokenRefusal } from '../core/tokens/refusal.ts';
import type { KeyIndex } from '../bundles/key-bundle.ts';
import { isSecretFormat, KEY_PREFIX } from '../core/apikey/secret.ts';

export interface LoadedKeys {
  index: KeyIndex;
  version: number;
  expires_at: number | null;
  hash: string;
}

export interface EdgeAuth {
  /** `root`: the credential everything derives from (the key a token was obtained with); rpm is counted against it. */
  credential: { type: 'api_key' | 'oauth' | 'sat'; id: string; root: string; client_id?: string };
  /** The acting principal: the key's owner, or the token's subject. */
  owner_id: string;
  scopes: string[];
  effective: string[];
  rate_limit_rpm: number | null;
  /** The actors of an exchanged token (RFC 8693 `act`, current first); absent for API keys and plain tokens. */
  actors?: string[];
  /** API keys: the key id and which of its secrets matched; null for tokens. */
  key_id: string | null;
  matched: 'current' | 'previous' | null;
}

export interface DecideContext {
  now: number;
  ip: string | null;
  region: string;
}

/** Fails unless the device holds a key bundle that has not expired. */
function requireBundle(keys: LoadedKeys | null, now: number): LoadedKeys {
  if (!keys) {
    throw unauthorized('this device has no key bundle: it cannot resolve a presented credential', { reason: 'no_key_bundle' });
  }
  if (keys.expires_at !== null && now >= keys.expires_at) {
    throw unauthorized('the key bundle on this device has expired: it cannot resolve a presented credential', { reason: 'bundle_expired' });
  }
  return keys;
}

/** Authenticates a presented API key secret offline; throws the refusal. */
export function authenticateOffline(keys: LoadedKeys | null, secret: string, ctx: DecideContext): EdgeAuth {
  const k = requireBundle(keys, ctx.now);
  // Same as the cell: a token that is not even shaped like a key is refused before lookup.
  if (!isSecretFormat(secret)) throw unauthorized('malformed API key');
  const v = k.index.check(secret, ctx);
  if (!v.ok) {
    // Same code, message and reason as the cell (cell/iam/keys.ts authenticateKeySecret).
    throw new ServiceError(v.code, v.code === 'forbidden' ? 'the key may not be used from here' : 'API key refused', {
      details: { reason: v.reason },
    });
  }
  const r = v.record!;
  return {
    credential: { type: 'api_key', id: r.key_id, root: `api_key:${r.key_id}` },
    owner_id: r.owner_id,
    scopes: r.scopes,
    effective: v.effective,
    rate_limit_rpm: r.rate_limit_rpm,
    key_id: r.key_id,
    matched: v.matched,
  };
}

export interface PresentedCredential {
  scheme: 'bearer' | 'dpop';
  token: string;
}

/**
 * Authenticates whatever the Authorization header carried, as the cell's
 * authenticators do in turn: an API key (Bearer only), an access token (core's
 * judge), or nothing recognisable.
 */
export async function authenticateCredential(
  keys: LoadedKeys | null,
  tokens: TokenJudgeConfig | null,
  cred: PresentedCredential,
  ctx: DecideContext,
  facts: Omit<TokenRequestFacts, 'scheme' | 'now'>,
  challenge: () => { realm: string; resourceMetadata?: string },
): Promise<EdgeAuth> {
  const k = requireBundle(keys, ctx.now);
  if (cred.token.startsWith(KEY_PREFIX)) {
    if (cred.scheme !== 'bearer') throw unauthorized('API keys are presented with the Bearer scheme');
    return authenticateOffline(k, cred.token, ctx);
  }
  if (!looksLikeJwt(cred.token)) throw unauthorized('credential not recognised');
  if (!tokens) {
    throw unauthorized('the key bundle on this device carries no token keys: issue a newer bundle to honour access tokens', {
      reason: 'no_token_keys',
    });
  }
  const v = await judgeAccessToken(cred.token, { ...facts, scheme: cred.scheme, now: ctx.now }, tokens);
  if (!v.ok) throw tokenRefusal(v, cred.scheme, challenge());
  return {
    credential: { type: v.credential.type, id: v.credential.id, root: v.credential.root, client_id: v.credential.clientId },
    owner_id: v.subject.id,
    scopes: v.scopes,
    effective: v.effective,
    rate_limit_rpm: v.credential.rateLimitRpm,
    ...(v.credential.actors.length > 0 ? { actors: v.credential.actors } : {}),
    key_id: null,
    matched: null,
  };
}

/** Authorization: the same check and refusal as the cell's `requires(permission)`. */
export function authorizeOffline(auth: EdgeAuth, permission: string): void {
  if (!grants(auth.effective, permission)) {
    throw forbidden(`the credential lacks the permission ${permission}`, { required_permission: permission });
  }
}
