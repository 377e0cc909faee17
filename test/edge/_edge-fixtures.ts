// Fixtures for edge tests: a simulated issuing cell (key pair), a device data dir, bundles, the tiny model.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateEd25519, sha256Hex, signerFromJwk } from '../../bundles/_codec.ts';
import { buildCrewBundle, type CrewContent } from '../../bundles/crew-bundle.ts';
import { buildModelManifest } from '../../bundles/model-manifest.ts';
import { buildKeyBundle } from '../../bundles/key-bundle.ts';
import { hashSecret } from '../../core/apikey/hash.ts';
import { contentHash } from '../../core/canonical.ts';
import type { Graph, SeatSpec } from '../../core/engine/types.ts';
import { makeTinyGguf } from '../../scripts/make-tiny-gguf.ts';
import { writeFileDurable, type DeviceFile, type TrustFile } from '../../edge/files.ts';

export const T0 = Date.UTC(2026, 0, 1);
export const SECRET = 'svck_live_' + 'E'.repeat(43);

export function seat(id: string, budget: number | null = null): SeatSpec {
  return {
    billet_id: id, role_label: `role ${id}`, required_skills: [], reports_to: null, agent_id: `agt_${id}`, model: null, system_prompt: `You are ${id}.`,
    authority: { allowed_tools: [], clearance_level: 0, permission_mode: 'auto', data_grant_ids: [], egress_allowlist: [], compartments: [], governing_contract_ids: [], budget_ceiling: budget },
  } as SeatSpec;
}

export function twoSeatGraph(maxTokens = 16): Graph {
  return {
    v: 1, formation_hash: 'sha256:' + '1'.repeat(64), policy: 'sequential', entry: 'a', exit: 'b',
    nodes: [{ id: 'a', kind: 'agent', seat: 'a', config: { prompt: 'Draft.', max_tokens: maxTokens } }, { id: 'b', kind: 'agent', seat: 'b', config: { prompt: 'Review.', max_tokens: maxTokens } }],
    edges: [{ from: 'a', to: 'b' }],
    seats: { a: seat('a'), b: seat('b') },
    limits: { max_steps: 100, max_steps_per_seat: 20, max_tool_rounds: 2, default_max_tokens: maxTokens },
    placement: { clearance: 0, topology: {} },
  };
}

export async function edgeWorld(opts: { budgets?: Record<string, number>; graph?: Graph } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'edge-dev-'));
  const cellKey = await generateEd25519();
  const cellSigner = signerFromJwk(cellKey.kid, cellKey.privateJwk);
  const dev = await generateEd25519();
  const device: DeviceFile = { format_version: 1, device_id: dev.kid, public_jwk: dev.publicJwk, private_jwk: dev.privateJwk };
  writeFileDurable(join(dir, 'device.json'), JSON.stringify(device), 0o600);
  const pub = await generateEd25519();
  const trust: TrustFile = { format_version: 1, cell_id: 'cell-a', keys: [{ kid: cellKey.kid, jwk: cellKey.publicJwk }], publishers: [{ kid: pub.kid, jwk: pub.publicJwk }] };
  writeFileDurable(join(dir, 'trust.json'), JSON.stringify(trust));
  const bytes = makeTinyGguf(42);
  const modelPath = join(dir, 'tiny.gguf');
  writeFileSync(modelPath, bytes);
  const sha256 = await sha256Hex(bytes);
  const manifestPath = join(dir, 'tiny.manifest.json');
  writeFileSync(manifestPath, await buildModelManifest({ publisher: 'pub', signer: signerFromJwk(pub.kid, pub.privateJwk), issuedAt: T0, model: { name: 'tiny', format: 'gguf', size: bytes.length, sha256 } }));
  const graph = opts.graph ?? twoSeatGraph();
  const crew: CrewContent = {
    crew_id: 'crw_1', name: 'field crew', formation_id: 'frm_1', graph, graph_hash: contentHash(graph),
    agents: [], blueprints: [], skills: [], contracts: [], tool_grants: {}, budgets: opts.budgets ?? { agt_a: 100_000, agt_b: 100_000 },
  };
  const crewPath = join(dir, 'crew.bundle.json');
  writeFileSync(crewPath, await buildCrewBundle({ issuer: 'cell-a', signer: cellSigner, audience: dev.kid, version: 1, issuedAt: T0, expiresAt: null, crew, model: { name: 'tiny', sha256, publisher_kid: pub.kid } }));
  const keysPath = join(dir, 'keys.bundle.json');
  writeFileSync(keysPath, await buildKeyBundle({
    issuer: 'cell-a', signer: cellSigner, audience: dev.kid, version: 1, issuedAt: T0, expiresAt: T0 + 86_400_000,
    records: [{ key_id: 'key_1', owner_id: 'usr_1', owner_status: 'active', status: 'active', hashes: [{ hash: hashSecret(SECRET), not_after: null }], expires_at: null,
      owner_permissions: ['*'], scopes: ['agent_teams', 'system.orchestration.admin.read', 'edge.read'], rate_limit_rpm: null, allowed_ips: [], allowed_regions: [] }],
    tombstones: [],
  }));
  return { dir, device, trust, cellSigner, pubSigner: signerFromJwk(pub.kid, pub.privateJwk), modelPath, manifestPath, crewPath, keysPath, crew, devKid: dev.kid };
}
