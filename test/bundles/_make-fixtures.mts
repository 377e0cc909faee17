// Wrote the recorded v1 artifacts under test/bundles/fixtures/ (run once; the files are committed and
// verified by fixtures.test.ts, so a change that breaks artifacts already in the field fails loudly).
// Do not run it again: the key bundle builder now writes format 3 and the journal export builder format
// 2 (with a run nonce), so this would replace the recorded format 1 artifacts with newer ones; the later
// fixtures come from _make-fixtures-v2.mts and _make-fixtures-v3.mts.
// Usage (historical): node --import tsx test/bundles/_make-fixtures.mts
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateEd25519, signerFromJwk } from '../../bundles/codec.ts';
import { buildKeyBundle } from '../../bundles/key-bundle.ts';
import { buildModelManifest } from '../../bundles/model-manifest.ts';
import { buildJournalExport } from '../../bundles/journal-export.ts';
import { hashSecret } from '../../core/apikey/hash.ts';
import { contentHash } from '../../core/canonical.ts';
import { sealRecord } from '../../core/journal/seal.ts';
import { recordHash } from '../../core/journal/hash.ts';
import { GENESIS_HASH, type JournalRecord } from '../../core/journal/record.ts';

const T0 = Date.UTC(2026, 0, 1);
const dir = join(import.meta.dirname, 'fixtures');
const cell = await generateEd25519();
const dev = await generateEd25519();
const pub = await generateEd25519();
const keys = await buildKeyBundle({
  issuer: 'cell-fixture',
  signer: signerFromJwk(cell.kid, cell.privateJwk),
  audience: dev.kid,
  version: 7,
  issuedAt: T0,
  expiresAt: T0 + 86_400_000,
  records: [
    {
      key_id: 'key_00000000000000000001',
      owner_id: 'usr_00000000000000000001',
      owner_status: 'active',
      status: 'active',
      hashes: [
        { hash: hashSecret('svck_live_' + 'F'.repeat(43)), not_after: null },
        { hash: hashSecret('svck_live_' + 'G'.repeat(43)), not_after: T0 + 3600_000 },
      ],
      expires_at: null,
      owner_permissions: ['agent_teams', 'edge.read'],
      scopes: ['agent_teams.read'],
      rate_limit_rpm: 60,
      allowed_ips: ['10.0.0.0/8'],
      allowed_regions: ['local'],
    },
  ],
  tombstones: [{ key_id: 'key_00000000000000000002', at: T0 }],
});
const manifest = await buildModelManifest({
  publisher: 'fixture-publisher',
  signer: signerFromJwk(pub.kid, pub.privateJwk),
  issuedAt: T0,
  model: { name: 'tiny', format: 'gguf', size: 469984, sha256: 'c7d166504041737c2a7304bf3fc3175284874b5b99041ff4f53eaa5a27224a14' },
});
const signer = signerFromJwk(dev.kid, dev.privateJwk);
const records: JournalRecord[] = [];
const values: Record<string, unknown> = { [contentHash('task')]: 'task', [contentHash({ answer: 42 })]: { answer: 42 } };
let prev = GENESIS_HASH;
for (const [i, kind] of (['run_started', 'step', 'run_finished'] as const).entries()) {
  const r = await sealRecord(
    {
      run_id: 'run_00000000000000000001',
      seq: i + 1,
      step_id: i === 1 ? 'agent:a' : 'run',
      kind,
      graph_hash: contentHash({ g: 1 }),
      input_hash: contentHash('task'),
      output_hash: contentHash({ answer: 42 }),
      at: T0 + i,
      cell_id: dev.kid,
      epoch: 0,
    },
    prev,
    signer,
  );
  records.push(r);
  prev = recordHash(r);
}
const journal = await buildJournalExport({
  deviceId: dev.kid,
  signer,
  audience: 'cell-fixture',
  exportedAt: T0 + 10,
  // (historical: format 1 had no run nonce; the builder now needs one)
  run: {
    run_id: 'run_00000000000000000001',
    run_nonce: '0'.repeat(32),
    crew_id: 'crw_1',
    graph_hash: contentHash({ g: 1 }),
    outcome: 'completed',
  },
  records,
  values,
});
writeFileSync(join(dir, 'keys.v1.bundle'), keys);
writeFileSync(join(dir, 'model.v1.manifest'), manifest);
writeFileSync(join(dir, 'journal.v1.export'), journal);
writeFileSync(
  join(dir, 'public-keys.json'),
  JSON.stringify(
    {
      cell: { kid: cell.kid, jwk: cell.publicJwk },
      device: { kid: dev.kid, jwk: dev.publicJwk },
      publisher: { kid: pub.kid, jwk: pub.publicJwk },
    },
    null,
    1,
  ) + '\n',
);
console.log('wrote fixtures to', dir);
