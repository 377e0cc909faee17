/**
 * `attestation verify`, the same command in both programs (`node dist/cell.mjs attestation verify`,
 * `dist/edge attestation verify`): checks an attestation file offline with core's one verifier
 * (core/attestation/bundle.ts) against published keys, and a SCITT signed statement (COSE_Sign1)
 * with core's COSE verifier.
 *
 *   attestation verify FILE --keys KEYS.json [--previous CHECKPOINT --consistency PROOF.json]
 *                           [--save-checkpoint FILE]
 *
 * KEYS.json: a cell's /.well-known/cell-keys.json, or any `{ "keys": [{ "kid", "jwk" }] }` (a device's
 * public key: `edge attestation keys`). CHECKPOINT: a checkpoint note seen before (the run log's
 * checkpoint route, or one saved by --save-checkpoint); PROOF.json: the log's consistency proof from
 * its size to the attestation's (the run log's consistency route). Exit 0 verified, 3 refused (the
 * programs' statuses, runtime/cli.ts EXIT: 2 a wrong command line, 1 a file that cannot be read).
 */
import { existsSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { verifyAttestation } from '../core/attestation/bundle.ts';
import { verifyStatement } from '../core/attestation/cose-sign1.ts';
import type { ConsistencyProof } from '../core/transparency/checkpoint.ts';
import { nativeSha256 } from './native-hash.ts';
import { writeFileDurable } from './write-durable.ts';
import { SetupError } from './setup-error.ts';
import { EXIT, UsageError, type CommandHelp } from './cli.ts';

export const ATTESTATION_VERIFY_USAGE =
  'attestation verify FILE --keys KEYS.json [--previous CHECKPOINT --consistency PROOF.json] [--save-checkpoint FILE]';

/** The help of `attestation verify` (both programs' command tables). */
export const ATTESTATION_HELP: CommandHelp = {
  summary: "check a run's attestation (or SCITT signed statement) offline (exit 0 verified, 3 refused)",
  usage: 'FILE --keys KEYS.json [--previous CHECKPOINT --consistency PROOF.json] [--save-checkpoint FILE]',
  details: `    against the published keys (a cell's /.well-known/cell-keys.json, or \`edge attestation keys\`), its
    place in the run log, and that the log extends a checkpoint seen before (docs/receipts.md)
`,
};

function readJson(path: string, what: string): unknown {
  if (!existsSync(path)) throw new SetupError(`${what} missing: ${path}`);
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    throw new SetupError(`${what} is not JSON: ${path}`);
  }
}

/** The keys of a keys file: `{ keys: [{ kid, jwk }] }` (a cell's cell-keys.json, a device's key). */
export function readKeysFile(path: string): { kid: string; jwk: JsonWebKey }[] {
  const doc = readJson(path, 'keys file') as { keys?: unknown };
  if (!Array.isArray(doc?.keys)) throw new SetupError(`${path} is not a keys file ({ "keys": [{ "kid", "jwk" }] })`);
  return (doc.keys as { kid?: unknown; jwk?: unknown }[])
    .filter((k) => typeof k?.kid === 'string' && typeof k.jwk === 'object' && k.jwk !== null)
    .map((k) => ({ kid: k.kid as string, jwk: k.jwk as JsonWebKey }));
}

/** Verifies one file; writes what it found to stdout and returns the exit code (0 verified, 3 refused). */
export async function verifyAttestationFile(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      keys: { type: 'string' },
      previous: { type: 'string' },
      consistency: { type: 'string' },
      'save-checkpoint': { type: 'string' },
    },
    allowPositionals: true,
    strict: true,
  });
  const file = positionals[0];
  if (!file || positionals.length !== 1 || !values.keys) throw new UsageError('attestation verify needs one FILE and --keys KEYS.json');
  if (values.consistency !== undefined && values.previous === undefined) throw new UsageError('--consistency goes with --previous');
  const keys = readKeysFile(values.keys);
  if (!existsSync(file)) throw new SetupError(`attestation file missing: ${file}`);
  const bytes = readFileSync(file);
  if (bytes[0] === 0xd2) {
    // A SCITT signed statement (COSE_Sign1, tag 18).
    const byKid = new Map(keys.map((k) => [k.kid, k.jwk]));
    const v = await verifyStatement(new Uint8Array(bytes), (kid) => byKid.get(kid));
    if (!v.ok) {
      process.stdout.write(`refused: ${v.reason}\n`);
      return EXIT.refused;
    }
    process.stdout.write(`verified: signed statement of ${v.header.sub} by ${v.kid} (issuer ${v.header.iss}, ${v.header.contentType})\n`);
    return 0;
  }
  let doc: unknown;
  try {
    doc = JSON.parse(bytes.toString('utf8'));
  } catch {
    process.stdout.write('refused: the file is neither an attestation (JSON) nor a signed statement (COSE_Sign1)\n');
    return EXIT.refused;
  }
  let previous: string | undefined;
  if (values.previous !== undefined) {
    if (!existsSync(values.previous)) throw new SetupError(`previous checkpoint missing: ${values.previous}`);
    previous = readFileSync(values.previous, 'utf8');
  }
  const consistency =
    values.consistency !== undefined ? (readJson(values.consistency, 'consistency proof') as ConsistencyProof) : undefined;
  const v = await verifyAttestation(doc, keys, {
    sha256: nativeSha256,
    ...(previous !== undefined ? { previous } : {}),
    ...(consistency !== undefined ? { consistency } : {}),
  });
  if (!v.ok) {
    process.stdout.write(`refused: ${v.reason}\n`);
    return EXIT.refused;
  }
  const a = v.attestation;
  const p = a.statement.predicate as { journal?: { records?: number }; outcome?: { state?: string } };
  process.stdout.write(
    `verified: run ${a.run_id} (${p.journal?.records ?? '?'} records, ${p.outcome?.state ?? '?'}) signed by ${a.keyid}\n` +
      (a.log ? `  in the log ${a.log.origin} at leaf ${a.log.leaf_index} of ${a.log.tree_size}\n` : '') +
      (previous !== undefined ? '  the log extends the checkpoint seen before\n' : ''),
  );
  if (values['save-checkpoint'] !== undefined && a.log) writeFileDurable(values['save-checkpoint'], a.log.checkpoint);
  return 0;
}
