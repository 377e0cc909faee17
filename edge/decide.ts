/**
 * The edge's judgement of a presented API key, from the signed bundle alone.
 * The same core code as the cell: `verifyPresentedKey` on the bundled record
 * (via KeyIndex.check) and `grants` on the effective authority. Refusals are
 * the cell's: 401 for unknown/revoked/expired/grace-elapsed keys and inactive
 * owners, 403 for IP and region rules and missing permissions, each with the
 * same details.reason. What only the edge can say: `no_key_bundle` (it cannot
 * resolve a key without one) and `bundle_expired`.
 */
import { ServiceError, forbidden, unauthorized } from '../core/errors.ts';
import { grants } from '../core/authority/scopes.ts';
import type { KeyIndex } from '../bundles/key-bundle.ts';
import { isSecretFormat } from '../core/apikey/secret.ts';

export interface LoadedKeys {
  index: KeyIndex;
  version: number;
  expires_at: number | null;
  hash: string;
}

export interface EdgeAuth {
  key_id: string;
  owner_id: string;
  scopes: string[];
  effective: string[];
  rate_limit_rpm: number | null;
  matched: 'current' | 'previous';
}

export interface DecideContext {
  now: number;
  ip: string | null;
  region: string;
}

/** Authenticates a presented secret offline; throws the refusal. */
export function authenticateOffline(keys: LoadedKeys | null, secret: string, ctx: DecideContext): EdgeAuth {
  if (!keys) {
    throw unauthorized('this device has no key bundle: it cannot resolve a presented key', { reason: 'no_key_bundle' });
  }
  if (keys.expires_at !== null && ctx.now >= keys.expires_at) {
    throw unauthorized('the key bundle on this device has expired: it cannot resolve a presented key', { reason: 'bundle_expired' });
  }
  // Same as the cell: a token that is not even shaped like a key is refused before lookup.
  if (!isSecretFormat(secret)) throw unauthorized('malformed API key');
  const v = keys.index.check(secret, ctx);
  if (!v.ok) {
    // Same code, message and reason as the cell (cell/iam/keys.ts authenticateKeySecret).
    throw new ServiceError(v.code, v.code === 'forbidden' ? 'the key may not be used from here' : 'API key refused', { details: { reason: v.reason } });
  }
  const r = v.record!;
  return { key_id: r.key_id, owner_id: r.owner_id, scopes: r.scopes, effective: v.effective, rate_limit_rpm: r.rate_limit_rpm, matched: v.matched };
}

/** Authorization: the same check and refusal as the cell's `requires(permission)`. */
export function authorizeOffline(auth: EdgeAuth, permission: string): void {
  if (!grants(auth.effective, permission)) {
    throw forbidden(`the credential lacks the permission ${permission}`, { required_permission: permission });
  }
}
