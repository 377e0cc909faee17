// Writes the recorded format 4 key bundle under test/bundles/fixtures/ (run once; the files are committed
// and verified by fixtures.test.ts): keys.v4.bundle with a token section naming the longest delegation
// chain the cell honours (max_act_depth 2), the access tokens it judges (tokens.v4.json: an exchanged
// token of two hops, one of three, one whose subject token was revoked before the bundle, one whose
// actor was archived, and, with the optional `issuers` list of the group's accepted issuers, a token
// issued under the group's `--oauth-issuer` URL and one under a URL the group never declared) and the
// public keys (public-keys.v4.json).
// Usage: node --import tsx test/bundles/_make-fixtures-v4.mts
import { buildKeyBundle } from '../../bundles/key-bundle.ts';
import { fixtureKeys, TOKEN_ISSUER } from './_make-fixtures-tokens.mts';

const { exp, header, trust, token, write } = await fixtureKeys(4);
const keys = await buildKeyBundle({
  ...header,
  version: 10,
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
    ...trust,
    revoked: [['jti-subject-revoked-00', exp]],
    clients: ['ocl_subject', 'ocl_actor'],
    max_act_depth: 2,
    issuers: [TOKEN_ISSUER, 'https://auth.cell-fixture.test'],
  },
});
const exchanged = (jti: string, actors: string[], subjectJti: string, iss = TOKEN_ISSUER) => {
  let act: Record<string, unknown> | undefined;
  for (const a of [...actors].reverse()) act = act ? { sub: a, act } : { sub: a };
  return token(
    { iss, sub: 'usr_00000000000000000001', client_id: 'ocl_actor', jti },
    { root: `token:${subjectJti}`, act, links: [`client:ocl_subject`, `token:${subjectJti}`] },
  );
};
write(keys, {
  two_hops: await exchanged('jti-two-hops-00000000', ['svc_0000000000000000000b', 'svc_0000000000000000000a'], 'jti-subject-good-00000'),
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
});
