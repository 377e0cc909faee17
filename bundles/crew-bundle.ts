/**
 * Crew bundle: everything a device needs to run one crew offline, signed by
 * the issuing cell for one device.
 *
 * Payload (type `crew`):
 *   crew: { crew_id, name, formation_id, graph, graph_hash, agents, blueprints,
 *           skills, contracts, tool_grants, budgets, workspace_id? }
 *   model: { sha256, publisher_kid, name } | null   (the model manifest reference)
 * The bundle also carries the compiler's input (formation projection, billets,
 * seat bindings): a verifier recompiles it with the same pure compiler
 * (passed in as `checkGraph`) and refuses the bundle unless it yields exactly
 * the carried graph and graph hash.
 */
import { PAYLOAD_FORMAT_VERSION } from './format.ts';
import { isObject, openEnvelope, refused, sealEnvelope, type OpenedEnvelope, type PayloadHeader } from './envelope.ts';
import type { Signer, TrustedKey } from './codec.ts';

export interface CrewContent {
  crew_id: string;
  name: string;
  formation_id: string;
  /** The compiled execution graph (core/compiler output). */
  graph: unknown;
  graph_hash: string;
  /** What the cell compiled: { formation, billets, bindings } (core/compiler inputs). */
  compiler_input: { formation: unknown; billets: unknown[]; bindings: unknown };
  agents: unknown[];
  blueprints: unknown[];
  skills: unknown[];
  /** Governing contracts the seats name: the value gate evaluates their rules offline too. */
  contracts: { id: string; rules: { name: string; expr: string }[] }[];
  /** Tool grants by agent id. */
  tool_grants: Record<string, string[]>;
  /** Budget ceilings by agent id (tokens). */
  budgets: Record<string, number>;
  /**
   * The crew's workspace: whose storage the kv tools use on the device (edge/tools.ts), as at the cell.
   * Absent in bundles issued before devices ran tools: such a crew's kv tools are not honoured offline.
   */
  workspace_id?: string;
}

export interface ModelReference {
  name: string;
  sha256: string;
  publisher_kid: string;
}

export interface CrewBundle extends PayloadHeader {
  type: 'crew';
  crew: CrewContent;
  model: ModelReference | null;
}

export async function buildCrewBundle(opts: {
  issuer: string;
  signer: Signer;
  audience: string;
  version: number;
  issuedAt: number;
  expiresAt: number | null;
  crew: CrewContent;
  model: ModelReference | null;
}): Promise<string> {
  const payload: CrewBundle = {
    format_version: PAYLOAD_FORMAT_VERSION,
    type: 'crew',
    issuer: opts.issuer,
    kid: opts.signer.kid,
    audience: opts.audience,
    version: opts.version,
    issued_at: opts.issuedAt,
    expires_at: opts.expiresAt,
    crew: opts.crew,
    model: opts.model,
  };
  return sealEnvelope(payload as unknown as CrewBundle & Record<string, unknown>, opts.signer);
}

/** Verifies signature and shape; with `checkGraph`, also that recompiling gives the carried graph and hash. */
export async function openCrewBundle(
  text: string | Uint8Array,
  trusted: readonly TrustedKey[],
  checkGraph?: (crew: CrewContent) => Promise<boolean> | boolean,
): Promise<OpenedEnvelope<CrewBundle>> {
  const opened = await openEnvelope(text, trusted, 'crew');
  const p = opened.payload as Partial<CrewBundle>;
  const c = p.crew;
  if (
    !isObject(c) ||
    typeof c['crew_id'] !== 'string' ||
    typeof c['graph_hash'] !== 'string' ||
    !('graph' in c) ||
    !isObject(c['compiler_input']) ||
    !Array.isArray(c['agents']) ||
    !Array.isArray(c['contracts']) ||
    !isObject(c['tool_grants']) ||
    !isObject(c['budgets']) ||
    !(c['workspace_id'] === undefined || (typeof c['workspace_id'] === 'string' && c['workspace_id'].length > 0))
  ) {
    throw refused('malformed', 'the crew bundle is malformed', 'invalid_request');
  }
  const m = p.model;
  if (!(m === null || (isObject(m) && typeof m['sha256'] === 'string' && typeof m['publisher_kid'] === 'string'))) {
    throw refused('malformed', 'the crew bundle model reference is malformed', 'invalid_request');
  }
  if (checkGraph && !(await checkGraph(c as unknown as CrewContent))) {
    throw refused('graph_hash_mismatch', 'the crew bundle graph does not match its graph hash', 'forbidden');
  }
  return opened as OpenedEnvelope<CrewBundle>;
}
