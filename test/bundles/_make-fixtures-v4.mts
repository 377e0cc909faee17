// Writes the recorded format 4 key bundle under test/bundles/fixtures/ (run once; the files are committed
// and verified by fixtures.test.ts): keys.v4.bundle with a token section naming the longest delegation
// chain the cell honours (max_act_depth 2), the access tokens it judges (tokens.v4.json: an exchanged
// token of two hops, one of three, one whose subject token was revoked before the bundle, one whose
// actor was archived, and, with the optional `issuers` list of the group's accepted issuers, a token
// issued under the group's `--oauth-issuer` URL and one under a URL the group never declared) and the
// public keys (public-keys.v4.json).
// Usage: node --import tsx test/bundles/_make-fixtures-v4.mts
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { importJWK, SignJWT } from 'jose';
import { generateEd25519, signerFromJwk } from '../../bundles/codec.ts';
import { buildKeyBundle } from '../../bundles/key-bundle.ts';

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
  version: 10,
  issuedAt: T0,
  expiresAt: T0 + 86_400_000,
  records: [],
  tombstones: [],
  subjects: {
    usr_00000000000000000001: { status: 'active', permissions: ['edge', 'catalog.read'] },
    svc_0000000000000000000a: { status: 'active', permissions: ['edge.read', 'catalog.read'] },
    svc_0000000000000000000b: { status: 'active', permissions: ['edge.read'] },
    svc_0000000000000000000c: { status: 'active', permissions: ['edge.read'] },
    svc_0000000000000000000d: { status: 'archived', permissions: [] },
  },
  tokens: {
    issuer: 'service://cell-fixture',
    keys: [{ kid: oauth.kid, kty: 'OKP', crv: 'Ed25519', x: oauth.publicJwk.x!, alg: 'EdDSA' }],
    revoked: [['jti-subject-revoked-00', exp]],
    clients: ['ocl_subject', 'ocl_actor'],
    max_act_depth: 2,
    issuers: ['service://cell-fixture', 'https://auth.cell-fixture.test'],
  },
});
const key = await importJWK(oauth.privateJwk, 'EdDSA');
const exchanged = (jti: string, actors: string[], subjectJti: string, iss = 'service://cell-fixture') => {
  let act: Record<string, unknown> | undefined;
  for (const a of [...actors].reverse()) act = act ? { sub: a, act } : { sub: a };
  return new SignJWT({
    iss,
    sub: 'usr_00000000000000000001',
    aud,
    client_id: 'ocl_actor',
    scope: 'edge.read catalog.read',
    iat: T0 / 1000,
    exp,
    jti,
    root: `token:${subjectJti}`,
    act,
    links: [`client:ocl_subject`, `token:${subjectJti}`],
  })
    .setProtectedHeader({ alg: 'EdDSA', typ: 'at+jwt', kid: oauth.kid })
    .sign(key);
};
writeFileSync(join(dir, 'keys.v4.bundle'), keys);
writeFileSync(
  join(dir, 'tokens.v4.json'),
  JSON.stringify(
    {
      two_hops: await exchanged(
        'jti-two-hops-00000000',
        ['svc_0000000000000000000b', 'svc_0000000000000000000a'],
        'jti-subject-good-00000',
      ),
      three_hops: await exchanged(
        'jti-three-hops-000000',
        ['svc_0000000000000000000c', 'svc_0000000000000000000b', 'svc_0000000000000000000a'],
        'jti-subject-good-00000',
      ),
      subject_revoked: await exchanged('jti-subj-revoked-0000', ['svc_0000000000000000000a'], 'jti-subject-revoked-00'),
      actor_archived: await exchanged('jti-actor-archived-00', ['svc_0000000000000000000d'], 'jti-subject-good-00000'),
      url_issuer: await exchanged(
        'jti-url-issuer-000000',
        ['svc_0000000000000000000a'],
        'jti-subject-good-00000',
        'https://auth.cell-fixture.test',
      ),
      undeclared_issuer: await exchanged(
        'jti-undeclared-iss-00',
        ['svc_0000000000000000000a'],
        'jti-subject-good-00000',
        'https://evil.example.test',
      ),
    },
    null,
    1,
  ) + '\n',
);
writeFileSync(
  join(dir, 'public-keys.v4.json'),
  JSON.stringify({ cell: { kid: cell.kid, jwk: cell.publicJwk }, device: { kid: dev.kid, jwk: dev.publicJwk } }, null, 1) + '\n',
);
console.log('wrote format 4 fixtures to', dir);
