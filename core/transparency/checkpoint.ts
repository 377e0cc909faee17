/**
 * Checkpoints of the run log in the C2SP tlog-checkpoint format
 * (c2sp.org/tlog-checkpoint): a signed note (note.ts) whose text is
 *   <origin>\n<tree size, decimal>\n<root hash, standard base64>\n[extension lines]
 * The origin names the log (`agent-cell/<group id>` for a cell's group,
 * `agent-cell-edge/<device id>` for a device's own log) and is the name of
 * the keys that sign it.
 *
 * `checkCheckpointProof` is what every verifier (the CLI, the edge, the
 * console) runs on an attestation's log material: the checkpoint's signature,
 * the leaf's inclusion in it, and, given a checkpoint seen before, that the
 * newer one extends it.
 */
import { b64std, fromB64std } from '../base64.ts';
import { verifyConsistency, verifyInclusion, type Sha256 } from './merkle.ts';
import { signNote, verifyNote, type NoteSigner, type NoteVerifier } from './note.ts';

/** A checkpoint's body. */
export interface Checkpoint {
  origin: string;
  size: number;
  root: Uint8Array;
  extensions: string[];
}

/** The note text of a checkpoint. */
export function checkpointText(c: Checkpoint): string {
  if (typeof c.origin !== 'string' || c.origin === '' || /[\n\r]/.test(c.origin)) throw new TypeError('checkpoint origin malformed');
  if (!Number.isSafeInteger(c.size) || c.size < 0) throw new TypeError('checkpoint size malformed');
  if (c.root.length !== 32) throw new TypeError('checkpoint root must be 32 bytes');
  return [c.origin, String(c.size), b64std(c.root), ...c.extensions].join('\n') + '\n';
}

/** Parses a checkpoint's text (the note without its signatures); null when malformed. */
export function parseCheckpointText(text: string): Checkpoint | null {
  if (!text.endsWith('\n')) return null;
  const lines = text.slice(0, -1).split('\n');
  if (lines.length < 3) return null;
  const [origin, size, root, ...extensions] = lines as [string, string, string, ...string[]];
  if (origin === '') return null;
  if (!/^(0|[1-9][0-9]{0,15})$/.test(size) || !Number.isSafeInteger(Number(size))) return null;
  let r: Uint8Array;
  try {
    r = fromB64std(root);
  } catch {
    return null;
  }
  if (r.length !== 32 || extensions.some((e) => e === '')) return null;
  return { origin, size: Number(size), root: r, extensions };
}

/** A signed checkpoint note. The signers' names must be the origin. */
export async function signCheckpoint(c: Checkpoint, signers: readonly NoteSigner[]): Promise<string> {
  if (signers.some((s) => s.name !== c.origin)) throw new TypeError('a checkpoint is signed by keys named after its origin');
  return signNote(checkpointText(c), signers);
}

export type CheckpointVerdict = { ok: true; checkpoint: Checkpoint; signers: NoteVerifier[] } | { ok: false; reason: string };

/**
 * Verifies a signed checkpoint: a signature by one of `keys` (each taken as a key named
 * `origin`) and a well-formed body whose origin is `origin`. Never throws on hostile input.
 */
export async function verifyCheckpoint(
  note: string,
  origin: string,
  keys: readonly { kid: string; jwk: JsonWebKey }[],
): Promise<CheckpointVerdict> {
  const v = await verifyNote(
    note,
    keys.map((k) => ({ name: origin, publicJwk: k.jwk, kid: k.kid })),
  );
  if (!v.ok) return { ok: false, reason: `checkpoint: ${v.reason}` };
  const c = parseCheckpointText(v.note.text);
  if (c === null) return { ok: false, reason: 'checkpoint: malformed body' };
  if (c.origin !== origin) return { ok: false, reason: 'checkpoint: another log (origin)' };
  return { ok: true, checkpoint: c, signers: v.note.signers };
}

/** An attestation's log material: the leaf's place, its proof, the checkpoint it is proven in. */
export interface LogProof {
  origin: string;
  leaf_index: number;
  tree_size: number;
  /** Standard base64 hashes, from the leaf's sibling up. */
  inclusion_proof: string[];
  /** The signed checkpoint note of `tree_size`. */
  checkpoint: string;
}

/** A consistency proof between two tree sizes, as the log serves it. */
export interface ConsistencyProof {
  first: number;
  second: number;
  proof: string[];
}

function decodeAll(list: unknown): Uint8Array[] | null {
  if (!Array.isArray(list) || list.length > 64) return null;
  const out: Uint8Array[] = [];
  for (const s of list) {
    if (typeof s !== 'string') return null;
    try {
      out.push(fromB64std(s));
    } catch {
      return null;
    }
  }
  return out;
}

export type LogVerdict = { ok: true; checkpoint: Checkpoint } | { ok: false; reason: string };

/**
 * Checks an attestation's log material: the checkpoint verifies with `keys` and names `origin`
 * and `tree_size`, and `leaf` (the leaf hash) is included at `leaf_index`. With `previous` (a
 * checkpoint note seen before, same origin) and `consistency` (the log's proof between the two
 * sizes), also that the newer tree extends the older one: a log rewritten after `previous` fails.
 */
export async function checkLogProof(
  proof: LogProof,
  leaf: Uint8Array,
  keys: readonly { kid: string; jwk: JsonWebKey }[],
  opts: { previous?: string; consistency?: ConsistencyProof; sha256?: Sha256 } = {},
): Promise<LogVerdict> {
  if (typeof proof !== 'object' || proof === null) return { ok: false, reason: 'log: missing' };
  if (typeof proof.origin !== 'string') return { ok: false, reason: 'log: origin missing' };
  const cp = await verifyCheckpoint(proof.checkpoint, proof.origin, keys);
  if (!cp.ok) return cp;
  const c = cp.checkpoint;
  if (c.size !== proof.tree_size) return { ok: false, reason: 'log: the checkpoint is of another tree size' };
  const path = decodeAll(proof.inclusion_proof);
  if (path === null) return { ok: false, reason: 'log: inclusion proof malformed' };
  if (!verifyInclusion(leaf, proof.leaf_index, c.size, path, c.root, opts.sha256)) {
    return { ok: false, reason: 'log: the run is not included in the checkpoint (inclusion proof fails)' };
  }
  if (opts.previous !== undefined) {
    const consistent = await checkConsistent(opts.previous, proof.checkpoint, proof.origin, keys, opts.consistency, opts.sha256);
    if (!consistent.ok) return consistent;
  }
  return { ok: true, checkpoint: c };
}

/**
 * Whether the log of `newer` extends the log of `older` (two signed checkpoint notes of one
 * origin), given the log's consistency proof between their sizes (none needed when the sizes
 * are equal: the roots must then be equal). Fails when either does not verify, when `older` is
 * the larger tree, and when the proof does not hold: the history was rewritten between them.
 */
export async function checkConsistent(
  older: string,
  newer: string,
  origin: string,
  keys: readonly { kid: string; jwk: JsonWebKey }[],
  proof: ConsistencyProof | undefined,
  sha256?: Sha256,
): Promise<LogVerdict> {
  const a = await verifyCheckpoint(older, origin, keys);
  if (!a.ok) return { ok: false, reason: `previous ${a.reason}` };
  const b = await verifyCheckpoint(newer, origin, keys);
  if (!b.ok) return b;
  const [m, n] = [a.checkpoint.size, b.checkpoint.size];
  if (m > n) return { ok: false, reason: `log: the newer checkpoint (${n}) is smaller than the one seen before (${m})` };
  let path: Uint8Array[] = [];
  if (m !== n && m !== 0) {
    if (proof === undefined || proof.first !== m || proof.second !== n) {
      return { ok: false, reason: `log: a consistency proof from ${m} to ${n} is needed` };
    }
    const p = decodeAll(proof.proof);
    if (p === null) return { ok: false, reason: 'log: consistency proof malformed' };
    path = p;
  }
  if (!verifyConsistency(m, n, path, a.checkpoint.root, b.checkpoint.root, sha256)) {
    return { ok: false, reason: `log: the checkpoint of ${n} does not extend the one of ${m} seen before (history rewritten)` };
  }
  return { ok: true, checkpoint: b.checkpoint };
}
