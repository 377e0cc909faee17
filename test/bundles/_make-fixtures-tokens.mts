// What the format 2, 3 and 4 key bundle fixture scripts (_make-fixtures-v2/v3/v4.mts) share: the frozen
// clock, the three key pairs (the cell signing the bundle, the device it is for, the OAuth key signing
// the access tokens), the bundle's fixed header fields, the token section's issuer and key, an access
// token signer, and the writer of keys.vN.bundle, tokens.vN.json and public-keys.vN.json.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { importJWK, SignJWT } from 'jose';
import { generateEd25519, signerFromJwk } from '../../bundles/codec.ts';
import type { TokenSigningKey } from '../../bundles/key-bundle.ts';
import type { KeyRecord } from '../../core/apikey/verify.ts';
import { hashSecret } from '../../core/apikey/hash.ts';

export const T0 = Date.UTC(2026, 0, 1);
export const TOKEN_ISSUER = 'service://cell-fixture';
const dir = join(import.meta.dirname, 'fixtures');

/** The API key record the format 2 and 3 bundles carry (its secret is 'svck_live_' + 43 × 'F'). */
export const fixtureKeyRecord = (): KeyRecord => ({
  key_id: 'key_00000000000000000001',
  owner_id: 'usr_00000000000000000001',
  owner_status: 'active',
  status: 'active',
  hashes: [{ hash: hashSecret('svck_live_' + 'F'.repeat(43)), not_after: null }],
  expires_at: null,
  owner_permissions: ['agent_teams', 'edge.read'],
  scopes: ['agent_teams.read'],
  rate_limit_rpm: 60,
  allowed_ips: [],
  allowed_regions: [],
});

/** Fresh keys for one format's fixtures, and what is built from them. */
export async function fixtureKeys(format: number) {
  const cell = await generateEd25519();
  const dev = await generateEd25519();
  const oauth = await generateEd25519();
  const exp = T0 / 1000 + 600;
  const key = await importJWK(oauth.privateJwk, 'EdDSA');
  const signingKey: TokenSigningKey = { kid: oauth.kid, kty: 'OKP', crv: 'Ed25519', x: oauth.publicJwk.x!, alg: 'EdDSA' };
  return {
    exp,
    /** The bundle's fields every format fixes alike; the caller adds its version and contents. */
    header: {
      issuer: 'cell-fixture',
      signer: signerFromJwk(cell.kid, cell.privateJwk),
      audience: dev.kid,
      issuedAt: T0,
      expiresAt: T0 + 86_400_000,
    },
    /** The token section's issuer and signing key; the caller adds its revocations and the rest. */
    trust: {
      issuer: TOKEN_ISSUER,
      keys: [signingKey],
    },
    /** An access token for the device, valid from T0 for ten minutes; `more` claims follow `jti`. */
    token: (c: { sub: string; client_id: string; jti: string; iss?: string }, more: Record<string, unknown> = {}) =>
      new SignJWT({
        iss: c.iss ?? TOKEN_ISSUER,
        sub: c.sub,
        aud: `edge:${dev.kid}`,
        client_id: c.client_id,
        scope: 'edge.read catalog.read',
        iat: T0 / 1000,
        exp,
        jti: c.jti,
        ...more,
      })
        .setProtectedHeader({ alg: 'EdDSA', typ: 'at+jwt', kid: oauth.kid })
        .sign(key),
    /** Writes keys.vN.bundle, tokens.vN.json and the public keys of the cell and the device. */
    write: (bundle: string, tokens: Record<string, string>) => {
      writeFileSync(join(dir, `keys.v${format}.bundle`), bundle);
      writeFileSync(join(dir, `tokens.v${format}.json`), JSON.stringify(tokens, null, 1) + '\n');
      writeFileSync(
        join(dir, `public-keys.v${format}.json`),
        JSON.stringify({ cell: { kid: cell.kid, jwk: cell.publicJwk }, device: { kid: dev.kid, jwk: dev.publicJwk } }, null, 1) + '\n',
      );
      console.log(`wrote format ${format} fixtures to`, dir);
    },
  };
}
