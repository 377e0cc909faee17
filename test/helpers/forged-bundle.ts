/**
 * The key bundle of issue 36's finding 4, as an attacker signs it with a key of their own: version 999999, a
 * year long, one key holding every permission (`*`) whose secret they know, issued in the group's name.
 */
import { buildKeyBundle } from '../../bundles/key-bundle.ts';
import { signerFromJwk } from '../../bundles/codec.ts';
import { hashSecret } from '../../core/apikey/hash.ts';

export function forgedKeyBundle(opts: {
  issuer: string;
  audience: string;
  key: { kid: string; privateJwk: JsonWebKey };
  secret: string;
}): Promise<string> {
  const now = Date.now();
  return buildKeyBundle({
    issuer: opts.issuer,
    signer: signerFromJwk(opts.key.kid, opts.key.privateJwk),
    audience: opts.audience,
    version: 999_999,
    issuedAt: now,
    expiresAt: now + 365 * 86_400_000,
    records: [
      {
        key_id: 'key_forged',
        owner_id: 'usr_forged',
        owner_status: 'active',
        status: 'active',
        hashes: [{ hash: hashSecret(opts.secret), not_after: null }],
        expires_at: null,
        owner_permissions: ['*'],
        scopes: ['*'],
        rate_limit_rpm: null,
        allowed_ips: [],
        allowed_regions: [],
      },
    ],
    tombstones: [],
  });
}
