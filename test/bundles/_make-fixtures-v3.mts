// Writes the recorded format 3 key bundle under test/bundles/fixtures/ (run once; the files are committed
// and verified by fixtures.test.ts): keys.v3.bundle with a token section listing the live clients, the
// access tokens it judges (tokens.v3.json: one good, one revoked before the bundle, one of an archived
// subject, one of a client deleted before the bundle) and the public keys (public-keys.v3.json).
// Usage: node --import tsx test/bundles/_make-fixtures-v3.mts
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { importJWK, SignJWT } from 'jose';
import { generateEd25519, signerFromJwk } from '../../bundles/codec.ts';
import { buildKeyBundle } from '../../bundles/key-bundle.ts';
import { hashSecret } from '../../core/apikey/hash.ts';

const T0 = Date.UTC(2026, 0, 1);
const dir = join(import.meta.dirname, 'fixtures');
const cell = await generateEd25519();
const dev = await generateEd25519();
const oauth = await generateEd25519();
const aud = `edge:${dev.kid}`;
const exp = T0 / 1000 + 600;
const keys = await buildKeyBundle({
  issuer: 'cell-fixture',
  signer: signerFromJwk(cell.kid, cell.privateJwk),
  audience: dev.kid,
  version: 9,
  issuedAt: T0,
  expiresAt: T0 + 86_400_000,
  records: [
    {
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
    },
  ],
  tombstones: [],
  subjects: {
    svc_00000000000000000002: { status: 'active', permissions: ['edge', 'catalog.read'] },
    svc_00000000000000000003: { status: 'archived', permissions: [] },
  },
  tokens: {
    issuer: 'service://cell-fixture',
    keys: [{ kid: oauth.kid, kty: 'OKP', crv: 'Ed25519', x: oauth.publicJwk.x!, alg: 'EdDSA' }],
    revoked: [['jti-revoked-0000000000', exp]],
    clients: ['ocl_fixture'],
  },
});
const key = await importJWK(oauth.privateJwk, 'EdDSA');
const token = (jti: string, sub: string, clientId = 'ocl_fixture') =>
  new SignJWT({
    iss: 'service://cell-fixture',
    sub,
    aud,
    client_id: clientId,
    scope: 'edge.read catalog.read',
    iat: T0 / 1000,
    exp,
    jti,
  })
    .setProtectedHeader({ alg: 'EdDSA', typ: 'at+jwt', kid: oauth.kid })
    .sign(key);
writeFileSync(join(dir, 'keys.v3.bundle'), keys);
writeFileSync(
  join(dir, 'tokens.v3.json'),
  JSON.stringify(
    {
      good: await token('jti-good-000000000000', 'svc_00000000000000000002'),
      revoked: await token('jti-revoked-0000000000', 'svc_00000000000000000002'),
      archived_subject: await token('jti-archived-00000000', 'svc_00000000000000000003'),
      deleted_client: await token('jti-deleted-000000000', 'svc_00000000000000000002', 'ocl_deleted'),
    },
    null,
    1,
  ) + '\n',
);
writeFileSync(
  join(dir, 'public-keys.v3.json'),
  JSON.stringify({ cell: { kid: cell.kid, jwk: cell.publicJwk }, device: { kid: dev.kid, jwk: dev.publicJwk } }, null, 1) + '\n',
);
console.log('wrote format 3 fixtures to', dir);
