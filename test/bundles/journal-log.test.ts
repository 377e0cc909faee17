// The device's run log in a journal export (bundles/journal-export.ts format 3): the run's head must be
// included in a checkpoint of the device's own log, signed by the device key; every other log is refused
// with device_log_invalid, and a format 2 export carries none.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildJournalExport, deviceLogOrigin, openJournalExport } from '../../bundles/journal-export.ts';
import { sealEnvelope } from '../../bundles/envelope.ts';
import { edgeRunId } from '../../bundles/run-id.ts';
import { b64std } from '../../core/base64.ts';
import { contentHash } from '../../core/canonical.ts';
import { signEd25519 } from '../../core/crypto/ed25519.ts';
import { recordHash } from '../../core/journal/hash.ts';
import { GENESIS_HASH, type JournalRecord } from '../../core/journal/record.ts';
import { sealRecord } from '../../core/journal/seal.ts';
import { signCheckpoint, type LogProof } from '../../core/transparency/checkpoint.ts';
import { inclusionRanges, rangeHash, rootOf } from '../../core/transparency/merkle.ts';
import { runLeafHash } from '../../core/transparency/run-leaf.ts';
import { T0, keyPair } from './_fixtures.ts';

async function fixture() {
  const dev = await keyPair();
  const other = await keyPair();
  const nonce = '5'.repeat(32);
  const runId = await edgeRunId(dev.trusted.kid, nonce);
  const graph = contentHash({ g: 5 });
  const records: JournalRecord[] = [];
  let prev = GENESIS_HASH;
  for (const [i, kind] of (['run_started', 'run_finished'] as const).entries()) {
    const r = await sealRecord(
      {
        run_id: runId,
        seq: i + 1,
        step_id: 'run',
        kind,
        graph_hash: graph,
        input_hash: contentHash(null),
        output_hash: contentHash(null),
        at: T0 + i,
        cell_id: dev.trusted.kid,
        epoch: 0,
      },
      prev,
      dev.signer,
    );
    records.push(r);
    prev = recordHash(r);
  }
  const origin = deviceLogOrigin(dev.trusted.kid);
  const leaves = [
    runLeafHash({ run_id: 'run_a', journal_head: contentHash(1), graph_hash: graph }),
    runLeafHash({ run_id: runId, journal_head: prev, graph_hash: graph }),
  ];
  const node = (n: { level: number; index: number }) => rootOf(leaves.slice(n.index * 2 ** n.level, (n.index + 1) * 2 ** n.level));
  const sign = (k: typeof dev, name = origin) => ({
    name,
    publicJwk: k.trusted.jwk,
    sign: (b: Uint8Array) => signEd25519(k.privateJwk, b),
  });
  const checkpoint = await signCheckpoint({ origin, size: 2, root: rootOf(leaves), extensions: [] }, [sign(dev)]);
  const log: LogProof = {
    origin,
    leaf_index: 1,
    tree_size: 2,
    inclusion_proof: inclusionRanges(1, 2).map((r) => b64std(rangeHash(r, node))),
    checkpoint,
  };
  const base = {
    deviceId: dev.trusted.kid,
    signer: dev.signer,
    audience: 'cell-x',
    exportedAt: T0,
    run: { run_id: runId, run_nonce: nonce, crew_id: 'crw_1', graph_hash: graph, outcome: 'completed' },
    records,
    values: {},
  };
  return { dev, other, log, base, origin, leaves, sign };
}

test("a format 3 export verifies with the run included in the device's log", async () => {
  const f = await fixture();
  const j = await openJournalExport(await buildJournalExport({ ...f.base, log: f.log }), f.dev.trusted, 'cell-x');
  assert.equal(j.payload.format_version, 3);
  // Without a log the builder writes format 2, which still verifies.
  assert.equal((await openJournalExport(await buildJournalExport(f.base), f.dev.trusted, 'cell-x')).payload.format_version, 2);
});

test("a log that does not hold the run, or is not the device's own, is refused device_log_invalid", async () => {
  const f = await fixture();
  const otherCheckpoint = await signCheckpoint({ origin: f.origin, size: 2, root: rootOf(f.leaves), extensions: [] }, [f.sign(f.other)]);
  const cases: [string, LogProof][] = [
    ['another leaf index', { ...f.log, leaf_index: 0 }],
    ['a bent proof', { ...f.log, inclusion_proof: [b64std(new Uint8Array(32))] }],
    ['another origin', { ...f.log, origin: deviceLogOrigin(f.other.trusted.kid) }],
    ['a checkpoint signed by another key', { ...f.log, checkpoint: otherCheckpoint }],
    ['a checkpoint of another size', { ...f.log, tree_size: 3 }],
  ];
  for (const [what, log] of cases) {
    await assert.rejects(openJournalExport(await buildJournalExport({ ...f.base, log }), f.dev.trusted, 'cell-x'), (e: any) => {
      assert.equal(e.details?.reason, 'device_log_invalid', what);
      return true;
    });
  }
  // Format 3 without a log; format 2 with one.
  const text = await buildJournalExport({ ...f.base, log: f.log });
  const payload = JSON.parse(text.slice(text.indexOf('\n') + 1));
  const { log: _l, ...noLog } = payload;
  await assert.rejects(
    openJournalExport(await sealEnvelope(noLog, f.dev.signer), f.dev.trusted, 'cell-x'),
    (e: any) => e.details?.reason === 'device_log_invalid',
  );
  await assert.rejects(
    openJournalExport(await sealEnvelope({ ...payload, format_version: 2 }, f.dev.signer), f.dev.trusted, 'cell-x'),
    (e: any) => e.details?.reason === 'malformed',
  );
});
