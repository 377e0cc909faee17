/**
 * `edge attestation …` (docs/edge.md, "Attestations of device runs"):
 *   attestation export RUN --data DIR --out FILE [--format bundle|scitt] [--crew-bundle FILE] [--values]
 *       the run's in-toto statement signed by the device key (DSSE, with the run's place in the
 *       device's own run log), or as a SCITT signed statement (COSE_Sign1); --crew-bundle names the
 *       crew bundle the run ran (verified against the pinned cell) so the statement carries its graph,
 *       seats and model; --values puts the step values in it
 *   attestation keys --data DIR --out FILE
 *       the device's public key as a keys file ({ "keys": [{ "kid", "jwk" }] }) for `verify`
 *   attestation verify FILE --keys KEYS.json [...]
 *       the same offline check as the cell's command line (runtime/attestation-cli.ts)
 */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { buildAttestation, statementBytes } from '../core/attestation/bundle.ts';
import { signStatement } from '../core/attestation/cose-sign1.ts';
import { IN_TOTO_PAYLOAD_TYPE } from '../core/attestation/dsse.ts';
import { runStatement, type RunEvidence } from '../core/attestation/statement.ts';
import type { Graph } from '../core/engine/types.ts';
import { signerFromJwk } from '../bundles/codec.ts';
import { deviceLogOrigin } from '../bundles/journal-export.ts';
import { ATTESTATION_HELP, verifyAttestationFile } from '../runtime/attestation-cli.ts';
import { Refusal, UsageError, type CommandHelp } from '../runtime/cli.ts';
import { writeFileDurable as writeBytesDurable } from '../runtime/write-durable.ts';
import { readDevice, readState, readTrust, writeFileDurable } from './files.ts';
import { loadCrewBundle } from './load.ts';
import { appendRunHead, deviceLogProof } from './run-log.ts';
import { readRun } from './runs.ts';

/** The help of `attestation export|keys|verify` (edge/main.ts's command table). */
export const ATTESTATION_EDGE_HELP: Record<'export' | 'keys' | 'verify', CommandHelp> = {
  export: {
    summary: "the run's in-toto attestation signed by the device key (DSSE, with its place in the device's run log), or SCITT COSE_Sign1",
    usage: 'RUN --data DIR --out FILE [--format bundle|scitt] [--crew-bundle FILE] [--values]',
    details: `    --crew-bundle: the crew bundle the run ran (verified against the pinned cell), so the statement carries its
    graph, seats and model; --values puts the step values in it
`,
  },
  keys: { summary: "the device's public key as a keys file, for verify", usage: '--data DIR --out FILE' },
  verify: ATTESTATION_HELP,
};

const TERMINAL = ['completed', 'failed', 'refused', 'cancelled'];

async function exportCommand(runId: string | undefined, argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      data: { type: 'string' },
      out: { type: 'string' },
      format: { type: 'string' },
      'crew-bundle': { type: 'string' },
      values: { type: 'boolean' },
    },
    strict: true,
  });
  if (!runId || runId.startsWith('-') || !values.data || !values.out)
    throw new UsageError('attestation export needs the RUN first, then --data DIR and --out FILE');
  const format = values.format ?? 'bundle';
  if (format !== 'bundle' && format !== 'scitt') throw new UsageError('--format is bundle or scitt');
  const dir = resolve(values.data);
  const device = readDevice(dir);
  const r = readRun(dir, runId);
  if (!r) throw new Refusal(`no run ${runId} on this device`);
  if (!TERMINAL.includes(r.run.state)) throw new Refusal(`run ${runId} is ${r.run.state}: its attestation exists once it ends`);
  if (r.journal.records.length === 0) throw new Refusal(`run ${runId} has no journal records`);
  let graph: Graph | null = null;
  let models: RunEvidence['models'];
  if (values['crew-bundle'] !== undefined) {
    const loaded = await loadCrewBundle(values['crew-bundle'], readTrust(dir), readState(dir, device), Date.now());
    const crew = loaded.crew.payload.crew;
    if (crew.crew_id !== r.run.crew_id || crew.graph_hash !== r.run.graph_hash) {
      throw new Refusal(`the crew bundle is not the one run ${runId} ran (crew ${r.run.crew_id}, graph ${r.run.graph_hash})`);
    }
    graph = crew.graph as Graph;
    const m = loaded.crew.payload.model;
    if (m) models = [{ name: m.name, sha256: m.sha256, publisher_kid: m.publisher_kid }];
  }
  const evidence: RunEvidence = {
    run: {
      run_id: r.run.run_id,
      kind: 'edge',
      state: r.run.state,
      reason: r.run.reason,
      requester: r.run.requester,
      created_at: r.run.created_at,
      finished_at: r.run.updated_at,
    },
    crew: { crew_id: r.run.crew_id, formation_id: null, formation_version: null },
    graph_hash: r.run.graph_hash,
    graph,
    records: r.journal.records,
    issuer: { id: device.device_id, kind: 'edge-device' },
    ...(models ? { models } : {}),
    ...(values.values ? { values: r.journal.values } : {}),
  };
  const statement = runStatement(evidence);
  const signer = signerFromJwk(device.device_id, device.private_jwk);
  if (format === 'scitt') {
    const bytes = await signStatement(
      statementBytes(statement),
      { contentType: IN_TOTO_PAYLOAD_TYPE, iss: deviceLogOrigin(device.device_id), sub: runId, iat: Math.floor(Date.now() / 1000) },
      signer,
    );
    writeBytesDurable(values.out, bytes);
  } else {
    appendRunHead(dir, device.device_id, runId, r.journal.records, r.run.graph_hash);
    const log = await deviceLogProof(dir, device, runId);
    writeFileDurable(values.out, JSON.stringify(await buildAttestation(statement, signer, log ?? null), null, 1) + '\n');
  }
  process.stdout.write(`attestation of ${runId} (${r.journal.records.length} records, ${r.run.state}) written to ${values.out}\n`);
}

function keysCommand(argv: string[]): void {
  const { values } = parseArgs({ args: argv, options: { data: { type: 'string' }, out: { type: 'string' } }, strict: true });
  if (!values.data || !values.out) throw new UsageError('attestation keys needs --data DIR and --out FILE');
  const device = readDevice(resolve(values.data));
  writeFileDurable(values.out, JSON.stringify({ keys: [{ kid: device.device_id, jwk: device.public_jwk }] }, null, 1) + '\n');
  process.stdout.write(`the public key of device ${device.device_id} written to ${values.out}\n`);
}

/** `attestation export|keys|verify`: argv[0] is the subcommand (the dispatcher checked it), the rest its operands and options. */
export async function attestationCommand(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  if (sub === 'export') return exportCommand(rest[0], rest.slice(1));
  if (sub === 'keys') return keysCommand(rest);
  if (sub === 'verify') {
    process.exitCode = await verifyAttestationFile(rest);
    return;
  }
  throw new UsageError('attestation takes export, keys or verify');
}
