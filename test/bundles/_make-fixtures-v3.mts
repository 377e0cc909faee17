// Writes the recorded format 3 key bundle under test/bundles/fixtures/ (run once; the files are committed
// and verified by fixtures.test.ts): keys.v3.bundle with a token section listing the live clients, the
// access tokens it judges (tokens.v3.json: one good, one revoked before the bundle, one of an archived
// subject, one of a client deleted before the bundle) and the public keys (public-keys.v3.json).
// Usage: node --import tsx test/bundles/_make-fixtures-v3.mts
import { buildKeyBundle } from '../../bundles/key-bundle.ts';
import { fixtureKeyRecord, fixtureKeys } from './_make-fixtures-tokens.mts';

const { exp, header, trust, token, write } = await fixtureKeys(3);
const keys = await buildKeyBundle({
  ...header,
  version: 9,
  records: [fixtureKeyRecord()],
  tombstones: [],
  subjects: {
    svc_00000000000000000002: { status: 'active', permissions: ['edge', 'catalog.read'] },
    svc_00000000000000000003: { status: 'archived', permissions: [] },
  },
  tokens: { ...trust, revoked: [['jti-revoked-0000000000', exp]], clients: ['ocl_fixture'] },
});
const client_id = 'ocl_fixture';
write(keys, {
  good: await token({ sub: 'svc_00000000000000000002', client_id, jti: 'jti-good-000000000000' }),
  revoked: await token({ sub: 'svc_00000000000000000002', client_id, jti: 'jti-revoked-0000000000' }),
  archived_subject: await token({ sub: 'svc_00000000000000000003', client_id, jti: 'jti-archived-00000000' }),
  deleted_client: await token({ sub: 'svc_00000000000000000002', client_id: 'ocl_deleted', jti: 'jti-deleted-000000000' }),
});
