// Wrote the recorded format 3 journal export under test/bundles/fixtures/ (journal.v3.export, with the
// device's run log: a log of three runs, this one at leaf 1) and the device key it was signed with
// (public-keys.journal-v3.json). Run once; the files are committed and verified by fixtures.test.ts.
// Usage (historical): node --import tsx test/bundles/_make-fixtures-journal-v3.mts
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateEd25519, signerFromJwk } from '../../bundles/codec.ts';
import { buildJournalExport, deviceLogOrigin } from '../../bundles/journal-export.ts';
import { edgeRunId } from '../../bundles/run-id.ts';
import { b64std } from '../../core/base64.ts';
import { contentHash } from '../../core/canonical.ts';
import { recordHash } from '../../core/journal/hash.ts';
import { GENESIS_HASH, type JournalRecord } from '../../core/journal/record.ts';
import { sealRecord } from '../../core/journal/seal.ts';
import { signCheckpoint } from '../../core/transparency/checkpoint.ts';
import { inclusionRanges, rangeHash, rootOf } from '../../core/transparency/merkle.ts';
import { runLeafHash } from '../../core/transparency/run-leaf.ts';

const T0 = Date.UTC(2026, 0, 1);
const dir = join(import.meta.dirname, 'fixtures');
const dev = await generateEd25519();
const signer = signerFromJwk(dev.kid, dev.privateJwk);
const nonce = '3'.repeat(32);
const runId = await edgeRunId(dev.kid, nonce);
const graph = contentHash({ g: 3 });
const values: Record<string, unknown> = { [contentHash('task')]: 'task', [contentHash({ answer: 42 })]: { answer: 42 } };
const records: JournalRecord[] = [];
let prev = GENESIS_HASH;
for (const [i, kind] of (['run_started', 'step', 'run_finished'] as const).entries()) {
  const r = await sealRecord(
    {
      run_id: runId,
      seq: i + 1,
      step_id: i === 1 ? 'agent:a' : 'run',
      kind,
      graph_hash: graph,
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
const origin = deviceLogOrigin(dev.kid);
const leaves = [
  runLeafHash({ run_id: 'run_other_0', journal_head: contentHash(0), graph_hash: graph }),
  runLeafHash({ run_id: runId, journal_head: prev, graph_hash: graph }),
  runLeafHash({ run_id: 'run_other_2', journal_head: contentHash(2), graph_hash: graph }),
];
const node = (n: { level: number; index: number }) => rootOf(leaves.slice(n.index * 2 ** n.level, (n.index + 1) * 2 ** n.level));
const checkpoint = await signCheckpoint({ origin, size: 3, root: rootOf(leaves), extensions: [] }, [
  { name: origin, publicJwk: dev.publicJwk, sign: (b) => signer.sign(b) },
]);
const text = await buildJournalExport({
  deviceId: dev.kid,
  signer,
  audience: 'cell-fixture',
  exportedAt: T0 + 10,
  run: { run_id: runId, run_nonce: nonce, crew_id: 'crw_1', graph_hash: graph, outcome: 'completed' },
  records,
  values,
  log: { origin, leaf_index: 1, tree_size: 3, inclusion_proof: inclusionRanges(1, 3).map((r) => b64std(rangeHash(r, node))), checkpoint },
});
writeFileSync(join(dir, 'journal.v3.export'), text);
writeFileSync(join(dir, 'public-keys.journal-v3.json'), JSON.stringify({ device: { kid: dev.kid, jwk: dev.publicJwk } }, null, 1) + '\n');
