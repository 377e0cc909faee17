// Fixtures for edge tests: a simulated issuing cell (key pair), a device data dir, bundles, the tiny model.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateEd25519, sha256Hex, signerFromJwk } from '../../bundles/codec.ts';
import { buildCrewBundle, type CrewContent } from '../../bundles/crew-bundle.ts';
import { buildModelManifest } from '../../bundles/model-manifest.ts';
import { buildKeyBundle } from '../../bundles/key-bundle.ts';
import { hashSecret } from '../../core/apikey/hash.ts';
import { compileFormation } from '../../core/compiler/compile.ts';
import type { BilletInput } from '../../core/compiler/types.ts';
import { makeTinyGguf } from '../../scripts/make-tiny-gguf.ts';
import { initialState, writeFileDurable, writeState, type DeviceFile, type TrustFile } from '../../edge/files.ts';

export const T0 = Date.UTC(2026, 0, 1);
export const SECRET = 'svck_live_' + 'E'.repeat(43);

/** A step policy of a billet (core/engine/policy.ts), its tool_choice, and its cap (default: none). */
export type BilletPolicy = Pick<BilletInput, 'timeout_ms' | 'retry' | 'tool_choice'> & Partial<Pick<BilletInput, 'authority_cap'>>;

/** A two-seat sequential crew compiled by core's compiler, with short answers; `policies` by billet id (a, b). */
export function compiledCrew(maxTokens = 16, policies: { a?: BilletPolicy; b?: BilletPolicy } = {}) {
  const formation = { name: 'field', coordination_policy: 'sequential' as const, limits: { default_max_tokens: maxTokens } };
  const billets = [
    { id: 'a', role_label: 'inspector', authority_cap: {}, position: 0, ...policies.a },
    { id: 'b', role_label: 'reviewer', authority_cap: {}, position: 1, ...policies.b },
  ];
  const bindings = { a: { agent_id: 'agt_a', system_prompt: 'You inspect.' }, b: { agent_id: 'agt_b', system_prompt: 'You review.' } };
  const r = compileFormation(formation, billets, bindings);
  if (!r.ok) throw new Error(r.message);
  return { graph: r.graph, graph_hash: r.graphHash, compiler_input: { formation, billets, bindings } };
}

export async function edgeWorld(
  opts: {
    budgets?: Record<string, number>;
    maxTokens?: number;
    policies?: { a?: BilletPolicy; b?: BilletPolicy };
    /** The crew's workspace (the kv tools' storage on the device); absent as in bundles before device tools. */
    workspaceId?: string;
  } = {},
) {
  const dir = mkdtempSync(join(tmpdir(), 'edge-dev-'));
  const cellKey = await generateEd25519();
  const cellSigner = signerFromJwk(cellKey.kid, cellKey.privateJwk);
  const dev = await generateEd25519();
  const device: DeviceFile = { format_version: 1, device_id: dev.kid, public_jwk: dev.publicJwk, private_jwk: dev.privateJwk };
  writeState(dir, initialState(device.device_id), device);
  writeFileDurable(join(dir, 'device.json'), JSON.stringify(device), 0o600);
  const pub = await generateEd25519();
  const trust: TrustFile = {
    format_version: 1,
    cell_id: 'cell-a',
    keys: [{ kid: cellKey.kid, jwk: cellKey.publicJwk }],
    publishers: [{ kid: pub.kid, jwk: pub.publicJwk }],
  };
  writeFileDurable(join(dir, 'trust.json'), JSON.stringify(trust));
  const bytes = makeTinyGguf(42);
  const modelPath = join(dir, 'tiny.gguf');
  writeFileSync(modelPath, bytes);
  const sha256 = await sha256Hex(bytes);
  const manifestPath = join(dir, 'tiny.manifest.json');
  writeFileSync(
    manifestPath,
    await buildModelManifest({
      publisher: 'pub',
      signer: signerFromJwk(pub.kid, pub.privateJwk),
      issuedAt: T0,
      model: { name: 'tiny', format: 'gguf', size: bytes.length, sha256 },
    }),
  );
  const compiled = compiledCrew(opts.maxTokens, opts.policies);
  const crew: CrewContent = {
    crew_id: 'crw_1',
    name: 'field crew',
    formation_id: 'frm_1',
    ...compiled,
    agents: [],
    blueprints: [],
    skills: [],
    contracts: [],
    tool_grants: {},
    budgets: opts.budgets ?? { agt_a: 100_000, agt_b: 100_000 },
    ...(opts.workspaceId !== undefined ? { workspace_id: opts.workspaceId } : {}),
  };
  const crewPath = join(dir, 'crew.bundle.json');
  writeFileSync(
    crewPath,
    await buildCrewBundle({
      issuer: 'cell-a',
      signer: cellSigner,
      audience: dev.kid,
      version: 1,
      issuedAt: T0,
      expiresAt: null,
      crew,
      model: { name: 'tiny', sha256, publisher_kid: pub.kid },
    }),
  );
  const keysPath = join(dir, 'keys.bundle.json');
  writeFileSync(
    keysPath,
    await buildKeyBundle({
      issuer: 'cell-a',
      signer: cellSigner,
      audience: dev.kid,
      version: 1,
      issuedAt: T0,
      expiresAt: T0 + 86_400_000,
      records: [
        {
          key_id: 'key_1',
          owner_id: 'usr_1',
          owner_status: 'active',
          status: 'active',
          hashes: [{ hash: hashSecret(SECRET), not_after: null }],
          expires_at: null,
          owner_permissions: ['*'],
          scopes: ['agent_teams', 'system.orchestration.admin.read', 'edge.read'],
          rate_limit_rpm: null,
          allowed_ips: [],
          allowed_regions: [],
        },
      ],
      tombstones: [],
    }),
  );
  return {
    dir,
    device,
    trust,
    cellSigner,
    pubSigner: signerFromJwk(pub.kid, pub.privateJwk),
    modelPath,
    manifestPath,
    crewPath,
    keysPath,
    crew,
    devKid: dev.kid,
  };
}
