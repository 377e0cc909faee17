/**
 * The device's own run log (docs/edge.md, "The device's run log"): the same
 * append-only Merkle log as the cell's (core/transparency, RFC 9162 hashing),
 * of the heads of the runs this device finished, kept in DATA/run-log.json
 * (rewritten durably, temp file and rename, after each append). Its origin is
 * `agent-cell-edge/<device id>` and its checkpoints are signed notes by the
 * device key. A journal export carries the run's inclusion proof and a
 * checkpoint (bundles/journal-export.ts format 3), and so does an attestation
 * the device exports: a device that later shows another journal for a run
 * cannot make both agree with one log.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { b64std } from '../core/base64.ts';
import { recordHash } from '../core/journal/hash.ts';
import type { JournalRecord } from '../core/journal/record.ts';
import { signCheckpoint, type LogProof } from '../core/transparency/checkpoint.ts';
import { inclusionRanges, rangeHash, rootOf } from '../core/transparency/merkle.ts';
import { runLeafHash, type RunHead } from '../core/transparency/run-leaf.ts';
import { signerFromJwk } from '../bundles/codec.ts';
import { deviceLogOrigin } from '../bundles/journal-export.ts';
import { nativeSha256 } from '../runtime/native-hash.ts';
import { EdgeSetupError, writeFileDurable, type DeviceFile } from './files.ts';

interface RunLogFile {
  format_version: 1;
  origin: string;
  leaves: RunHead[];
}

const file = (dir: string) => join(dir, 'run-log.json');

function read(dir: string, deviceId: string): RunLogFile {
  const p = file(dir);
  if (!existsSync(p)) return { format_version: 1, origin: deviceLogOrigin(deviceId), leaves: [] };
  try {
    const f = JSON.parse(readFileSync(p, 'utf8')) as RunLogFile;
    if (f.format_version !== 1 || f.origin !== deviceLogOrigin(deviceId) || !Array.isArray(f.leaves)) throw new TypeError('malformed');
    return f;
  } catch {
    // Fail closed: a device that cannot read its log must not start another one over it.
    throw new EdgeSetupError(`${p} is unreadable; refusing to write a new run log over it`);
  }
}

/** Appends a finished run's head to the device's log (once per run id); returns its leaf index. */
export function appendRunHead(dir: string, deviceId: string, runId: string, records: readonly JournalRecord[], graphHash: string): number {
  const log = read(dir, deviceId);
  const at = log.leaves.findIndex((l) => l.run_id === runId);
  if (at >= 0) return at;
  const last = records[records.length - 1];
  if (last === undefined) throw new TypeError('appendRunHead: an empty journal');
  log.leaves.push({ run_id: runId, journal_head: recordHash(last), graph_hash: graphHash });
  writeFileDurable(file(dir), JSON.stringify(log) + '\n');
  return log.leaves.length - 1;
}

/** The run's place in the device's log with its proof and a checkpoint signed by the device key; undefined when not in it. */
export async function deviceLogProof(dir: string, device: DeviceFile, runId: string): Promise<LogProof | undefined> {
  const log = read(dir, device.device_id);
  const index = log.leaves.findIndex((l) => l.run_id === runId);
  if (index < 0) return undefined;
  const hashes = log.leaves.map((l) => runLeafHash(l, nativeSha256));
  const size = hashes.length;
  const node = (n: { level: number; index: number }) =>
    rootOf(hashes.slice(n.index * 2 ** n.level, (n.index + 1) * 2 ** n.level), nativeSha256);
  const signer = signerFromJwk(device.device_id, device.private_jwk);
  const checkpoint = await signCheckpoint({ origin: log.origin, size, root: rootOf(hashes, nativeSha256), extensions: [] }, [
    { name: log.origin, publicJwk: device.public_jwk, sign: (b) => signer.sign(b) },
  ]);
  return {
    origin: log.origin,
    leaf_index: index,
    tree_size: size,
    inclusion_proof: inclusionRanges(index, size).map((r) => b64std(rangeHash(r, node, nativeSha256))),
    checkpoint,
  };
}
