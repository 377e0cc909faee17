/**
 * The attestation file of a run (media type `ATTESTATION_MEDIA_TYPE`,
 * version 1): the DSSE envelope of the run's in-toto Statement, signed by the
 * cell's (or device's) identity key, beside the run's place in the run log:
 *   { "media_type", "version": 1, "dsse_envelope": {…}, "log": { origin,
 *     leaf_index, tree_size, inclusion_proof, checkpoint } }
 * The log material is outside the signature because it is signed on its own
 * (the checkpoint is a signed note) and proves itself (the inclusion proof).
 *
 * `verifyAttestation` is the one verifier of the CLI, the edge and the
 * console: the envelope's signature by a published key, the statement's type
 * and subjects, the run's leaf in the checkpoint, and, given a checkpoint seen
 * before, that the log still extends it.
 */
import { checkLogProof, type ConsistencyProof, type LogProof } from '../transparency/checkpoint.ts';
import type { Sha256 } from '../transparency/merkle.ts';
import { runLeafHash } from '../transparency/run-leaf.ts';
import { IN_TOTO_PAYLOAD_TYPE, signDsse, verifyDsse, type DsseEnvelope, type EnvelopeSigner } from './dsse.ts';
import { PREDICATE_TYPE, STATEMENT_TYPE, runSubjects } from './statement.ts';

export const ATTESTATION_MEDIA_TYPE = 'application/vnd.agent-cell.attestation+json';
export const ATTESTATION_VERSION = 1;

export interface AttestationBundle {
  media_type: typeof ATTESTATION_MEDIA_TYPE;
  version: 1;
  dsse_envelope: DsseEnvelope;
  /** The run's place in the run log; null for a run not in a log (not finished). */
  log: LogProof | null;
}

/** The statement's bytes as the envelope carries them. */
export function statementBytes(statement: unknown): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(statement));
}

/** Signs a run's statement and puts it beside its log material. */
export async function buildAttestation(statement: unknown, signer: EnvelopeSigner, log: LogProof | null): Promise<AttestationBundle> {
  return {
    media_type: ATTESTATION_MEDIA_TYPE,
    version: ATTESTATION_VERSION,
    dsse_envelope: await signDsse(statementBytes(statement), IN_TOTO_PAYLOAD_TYPE, signer),
    log,
  };
}

/** What a verified attestation says. */
export interface VerifiedAttestation {
  run_id: string;
  journal_head: string;
  graph_hash: string;
  keyid: string;
  statement: { _type: string; subject: unknown; predicateType: string; predicate: Record<string, unknown> };
  /** The verified checkpoint's size and origin; null when the attestation carries no log material. */
  log: { origin: string; tree_size: number; leaf_index: number; checkpoint: string } | null;
}

export type AttestationVerdict = { ok: true; attestation: VerifiedAttestation } | { ok: false; reason: string };

const HASH = /^sha256:[0-9a-f]{64}$/;

function obj(v: unknown): Record<string, unknown> | null {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
}

/**
 * Verifies an attestation file against the issuer's published keys (`keys`: kid and public JWK,
 * as /.well-known/cell-keys.json lists them, or a device's key). Requires the log material unless
 * `requireLog` is false. With `previous` (a checkpoint note of the same log seen before) and
 * `consistency` (the log's proof between the two sizes), also checks the log was not rewritten
 * since. Never throws on hostile input.
 */
export async function verifyAttestation(
  input: unknown,
  keys: readonly { kid: string; jwk: JsonWebKey }[],
  opts: { previous?: string; consistency?: ConsistencyProof; requireLog?: boolean; sha256?: Sha256 } = {},
): Promise<AttestationVerdict> {
  const b = obj(input);
  if (b === null || b['media_type'] !== ATTESTATION_MEDIA_TYPE) return { ok: false, reason: 'not an attestation file' };
  if (b['version'] !== ATTESTATION_VERSION) return { ok: false, reason: `unsupported attestation version ${String(b['version'])}` };
  const byKid = new Map(keys.map((k) => [k.kid, k.jwk]));
  const env = await verifyDsse(b['dsse_envelope'], (kid) => byKid.get(kid));
  if (!env.ok) return env;
  if (env.payloadType !== IN_TOTO_PAYLOAD_TYPE) return { ok: false, reason: 'dsse: payload is not an in-toto statement' };
  let st: Record<string, unknown> | null;
  try {
    st = obj(JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(env.body)));
  } catch {
    return { ok: false, reason: 'statement: not JSON' };
  }
  if (st === null || st['_type'] !== STATEMENT_TYPE) return { ok: false, reason: 'statement: not an in-toto Statement v1' };
  if (st['predicateType'] !== PREDICATE_TYPE) return { ok: false, reason: `statement: predicate type is not ${PREDICATE_TYPE}` };
  const p = obj(st['predicate']);
  const run = obj(p?.['run']);
  const journal = obj(p?.['journal']);
  const graph = obj(p?.['graph']);
  const runId = run?.['run_id'];
  const head = journal?.['head'];
  const graphHash = graph?.['hash'];
  if (typeof runId !== 'string' || typeof head !== 'string' || typeof graphHash !== 'string' || !HASH.test(head) || !HASH.test(graphHash)) {
    return { ok: false, reason: 'statement: the predicate does not name the run, its journal head and its graph' };
  }
  if (JSON.stringify(st['subject']) !== JSON.stringify(runSubjects(runId, head, graphHash))) {
    return { ok: false, reason: "statement: the subjects are not the run's journal head and graph" };
  }
  const statement = st as VerifiedAttestation['statement'];
  const base = { run_id: runId, journal_head: head, graph_hash: graphHash, keyid: env.keyid, statement };
  const log = b['log'];
  if (log === null || log === undefined) {
    if (opts.requireLog === false && opts.previous === undefined) return { ok: true, attestation: { ...base, log: null } };
    return { ok: false, reason: 'log: the attestation carries no inclusion proof' };
  }
  const lp = log as LogProof;
  const leaf = runLeafHash({ run_id: runId, journal_head: head, graph_hash: graphHash }, opts.sha256);
  const lv = await checkLogProof(lp, leaf, keys, {
    ...(opts.previous !== undefined ? { previous: opts.previous } : {}),
    ...(opts.consistency !== undefined ? { consistency: opts.consistency } : {}),
    ...(opts.sha256 !== undefined ? { sha256: opts.sha256 } : {}),
  });
  if (!lv.ok) return lv;
  return {
    ok: true,
    attestation: {
      ...base,
      log: { origin: lp.origin, tree_size: lv.checkpoint.size, leaf_index: lp.leaf_index, checkpoint: lp.checkpoint },
    },
  };
}
