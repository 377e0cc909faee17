// Fixtures for edge tests: a simulated issuing cell (key pair), a device data dir, bundles, the tiny model.
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateEd25519, signerFromJwk } from '../../bundles/codec.ts';
import { buildCrewBundle, type CrewContent, type CrewMcpTool } from '../../bundles/crew-bundle.ts';
import { buildKeyBundle } from '../../bundles/key-bundle.ts';
import { hashSecret } from '../../core/apikey/hash.ts';
import { compileFormation } from '../../core/compiler/compile.ts';
import type { BilletInput, StageSpec } from '../../core/compiler/types.ts';
import type { KeyRecord } from '../../core/apikey/verify.ts';
import { signedTinyModel } from '../fixtures/tiny-model.ts';
import { initialState, readState, writeFileDurable, writeState, type DeviceFile, type TrustFile } from '../../edge/files.ts';
import { emptyDeviceState } from '../../bundles/accept.ts';
import type { EdgeRuntime } from '../../edge/gateway.ts';
import { loadKeyBundle } from '../../edge/load.ts';
import { prepareOffline } from '../../edge/offline.ts';
import type { StdioSourceConfig } from '../../runtime/mcp-client/config.ts';

export const T0 = Date.UTC(2026, 0, 1);
export const SECRET = 'svck_live_' + 'E'.repeat(43);

/** A step policy of a billet (core/engine/policy.ts), its tool_choice, and its cap (default: none). */
export type BilletPolicy = Pick<BilletInput, 'timeout_ms' | 'retry' | 'tool_choice'> & Partial<Pick<BilletInput, 'authority_cap'>>;

/**
 * A two-seat sequential crew compiled by core's compiler, with short answers; `policies` by billet id (a, b);
 * `toolPins`: the catalog's pins of imported tools (the graph and its compiler input carry those it calls).
 */
export function compiledCrew(
  maxTokens = 16,
  policies: { a?: BilletPolicy; b?: BilletPolicy } = {},
  stages: { pre?: StageSpec[]; post?: StageSpec[] } = {},
  toolPins?: Record<string, string>,
) {
  const formation = { name: 'field', coordination_policy: 'sequential' as const, limits: { default_max_tokens: maxTokens }, ...stages };
  const billets = [
    { id: 'a', role_label: 'inspector', authority_cap: {}, position: 0, ...policies.a },
    { id: 'b', role_label: 'reviewer', authority_cap: {}, position: 1, ...policies.b },
  ];
  const bindings = { a: { agent_id: 'agt_a', system_prompt: 'You inspect.' }, b: { agent_id: 'agt_b', system_prompt: 'You review.' } };
  const r = compileFormation(formation, billets, bindings, toolPins ? { toolPins } : {});
  if (!r.ok) throw new Error(r.message);
  const pins = r.graph.tool_pins;
  return {
    graph: r.graph,
    graph_hash: r.graphHash,
    compiler_input: { formation, billets, bindings, ...(pins ? { tool_pins: pins } : {}) },
  };
}

/** A second key of the bundle, narrowed to edge.read (edgeWorld's `narrowKey`). */
export const NARROW_SECRET = 'svck_live_' + 'N'.repeat(43);
/** A key of another principal (usr_2), as wide as the first (edgeWorld's `otherOwnerKey`). */
export const OTHER_SECRET = 'svck_live_' + 'O'.repeat(43);
/** The token issuer of the world's cell (its group id `cell-a`). */
export const TOKEN_ISSUER = 'service://cell-a';

/** A device key pair as `edge init` makes it (no data directory): for the device's files that are sealed with it. */
export async function testDevice(): Promise<DeviceFile> {
  const k = await generateEd25519();
  return { format_version: 1, device_id: k.kid, public_jwk: k.publicJwk, private_jwk: k.privateJwk };
}

export async function edgeWorld(
  opts: {
    budgets?: Record<string, number>;
    maxTokens?: number;
    policies?: { a?: BilletPolicy; b?: BilletPolicy };
    /** Also bundle a key of the same owner scoped to edge.read only (NARROW_SECRET). */
    narrowKey?: boolean;
    /** Also bundle a key of another principal, usr_2, with the first key's scopes (OTHER_SECRET). */
    otherOwnerKey?: boolean;
    /** The cell's token trust in the key bundle (issuer `service://cell-a`): the device honours its access tokens. */
    tokens?: { keys: { kid: string; x: string }[]; revoked?: [string, number][] };
    /** The crew's workspace (the kv tools' storage on the device); absent as in bundles before device tools. */
    workspaceId?: string;
    /** The catalog entries of imported tools the crew bundle carries (their pins go into the graph). */
    mcpTools?: CrewMcpTool[];
    /** Stages around the team (a human_approval before it, ...). */
    stages?: { pre?: StageSpec[]; post?: StageSpec[] };
    /** More keys in the bundle: an owner's key with its scopes (all other fields as the first key's). */
    extraKeys?: { key_id: string; owner_id: string; secret: string; scopes: string[] }[];
  } = {},
) {
  const dir = mkdtempSync(join(tmpdir(), 'edge-dev-'));
  const cellKey = await generateEd25519();
  const cellSigner = signerFromJwk(cellKey.kid, cellKey.privateJwk);
  const device = await testDevice();
  writeState(dir, initialState(device.device_id), device);
  writeFileDurable(join(dir, 'device.json'), JSON.stringify(device), 0o600);
  const { modelPath, manifestPath, sha256, publishers, privateJwk } = await signedTinyModel('', { dir, publisher: 'pub', issuedAt: T0 });
  const pub = { kid: publishers[0]!.kid, privateJwk };
  const trust: TrustFile = {
    format_version: 1,
    cell_id: 'cell-a',
    keys: [{ kid: cellKey.kid, jwk: cellKey.publicJwk }],
    publishers,
  };
  writeFileDurable(join(dir, 'trust.json'), JSON.stringify(trust));
  const compiled = compiledCrew(
    opts.maxTokens,
    opts.policies,
    opts.stages,
    opts.mcpTools && Object.fromEntries(opts.mcpTools.map((t) => [t.name, t.pin])),
  );
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
    ...(opts.mcpTools !== undefined ? { mcp_tools: opts.mcpTools } : {}),
  };
  const crewPath = join(dir, 'crew.bundle.json');
  writeFileSync(
    crewPath,
    await buildCrewBundle({
      issuer: 'cell-a',
      signer: cellSigner,
      audience: device.device_id,
      version: 1,
      issuedAt: T0,
      expiresAt: null,
      crew,
      model: { name: 'tiny', sha256, publisher_kid: pub.kid },
    }),
  );
  const keysPath = join(dir, 'keys.bundle.json');
  const WIDE = ['agent_teams', 'system.orchestration.admin.read', 'edge.read'];
  /** The key records of the bundle (an active owner's key with its scopes), also for a test that issues a newer one. */
  const keyRecords: KeyRecord[] = [
    { key_id: 'key_1', owner_id: 'usr_1', secret: SECRET, scopes: WIDE },
    ...(opts.narrowKey ? [{ key_id: 'key_2', owner_id: 'usr_1', secret: NARROW_SECRET, scopes: ['edge.read'] }] : []),
    ...(opts.otherOwnerKey ? [{ key_id: 'key_3', owner_id: 'usr_2', secret: OTHER_SECRET, scopes: WIDE }] : []),
    ...(opts.extraKeys ?? []),
  ].map((k) => ({
    key_id: k.key_id,
    owner_id: k.owner_id,
    owner_status: 'active',
    status: 'active',
    hashes: [{ hash: hashSecret(k.secret), not_after: null }],
    expires_at: null,
    owner_permissions: ['*'],
    scopes: k.scopes,
    rate_limit_rpm: null,
    allowed_ips: [],
    allowed_regions: [],
  }));
  writeFileSync(
    keysPath,
    await buildKeyBundle({
      issuer: 'cell-a',
      signer: cellSigner,
      audience: device.device_id,
      version: 1,
      issuedAt: T0,
      expiresAt: T0 + 86_400_000,
      records: keyRecords,
      tombstones: [],
      ...(opts.tokens
        ? {
            tokens: {
              issuer: TOKEN_ISSUER,
              keys: opts.tokens.keys.map((k) => ({ ...k, kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA' })),
              revoked: opts.tokens.revoked ?? [],
            },
          }
        : {}),
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
    devKid: device.device_id,
    keyRecords,
  };
}

/**
 * What `edge serve` prepares over a world's bundles, at T0 + 1 s: the key bundle loaded, the crew and
 * model accepted, and the runtime of the gateway (mount the offline routes with `setup`). The clock stands
 * still there, or at the time the world's state last saw when a real `edge serve` of the same world ran
 * past T0 + 1 s before (its writes of the state join the file's, clock high-water mark included: a
 * device's clock never reads earlier than that).
 */
export async function offlineRuntime(
  w: Awaited<ReturnType<typeof edgeWorld>>,
  rate: EdgeRuntime['rate'],
  toolSources: StdioSourceConfig[] = [],
) {
  const seen = existsSync(join(w.dir, 'state.json')) ? readState(w.dir, w.device).clock_high_water : 0;
  const at = Math.max(T0 + 1000, seen);
  const clock = { now: () => at };
  const k = await loadKeyBundle(w.keysPath, w.trust, emptyDeviceState(w.device.device_id), clock.now());
  const setup = await prepareOffline({
    dir: w.dir,
    device: w.device,
    trust: w.trust,
    state: k.state,
    clock,
    crewBundle: w.crewPath,
    model: w.modelPath,
    modelManifest: w.manifestPath,
    toolSources,
  });
  const rt: EdgeRuntime = {
    deviceId: w.device.device_id,
    cellId: 'cell-a',
    region: 'local',
    clock,
    keys: k.keys,
    state: setup.state,
    rate,
    info: setup.info,
  };
  return { rt, setup };
}
