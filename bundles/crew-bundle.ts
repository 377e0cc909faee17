/**
 * Crew bundle: everything a device needs to run one crew offline, signed by
 * the issuing cell for one device.
 *
 * Payload (type `crew`):
 *   crew: { crew_id, name, formation_id, graph, graph_hash, agents, blueprints,
 *           skills, contracts, tool_grants, budgets, workspace_id?, mcp_tools? }
 *   model: { sha256, publisher_kid, name } | null   (the model manifest reference)
 * The bundle also carries the compiler's input (formation projection, billets,
 * seat bindings): a verifier recompiles it with the same pure compiler
 * (passed in as `checkGraph`) and refuses the bundle unless it yields exactly
 * the carried graph and graph hash.
 *
 * `mcp_tools` (optional, added without a format bump: a verifier that does
 * not know it reads the rest as before, and a device of such a release
 * refuses an imported tool as outside its catalog): the catalog entries of
 * the imported MCP tools the crew can call, each with the reviewed definition
 * and its pin. A verifier refuses a bundle whose entry's pin is not the
 * content hash of its definition, whose name is not `mcp.<source>.<tool>`, or
 * whose pin is not the graph's pin of that tool (`graph.tool_pins`: the
 * graph hash covers it).
 */
import { definitionPin, pinnedDefinition, type PinnedDefinition } from '../core/catalog/pin.ts';
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
  /** Budget ceilings by agent id (tokens): what the device may spend in all, across bundles, held for it on the cell's ledger. */
  budgets: Record<string, number>;
  /**
   * The crew's workspace: whose storage the kv tools use on the device (edge/tools.ts), as at the cell.
   * Absent in bundles issued before devices ran tools: such a crew's kv tools are not honoured offline.
   */
  workspace_id?: string;
  /**
   * The catalog entries of the imported (MCP) tools the crew can call, by catalog name: what a device needs
   * to offer each to a model and to hold its server to the pin (edge/mcp-tools.ts). Absent in bundles issued
   * before devices ran MCP tools, and when the crew calls none.
   */
  mcp_tools?: CrewMcpTool[];
}

/** An imported tool as a crew bundle carries it: its catalog name, its source, and its pinned definition. */
export interface CrewMcpTool {
  /** The catalog name, `mcp.<source>.<tool>`. */
  name: string;
  /** The catalog source's name: a device runs the stdio server of its configuration named so. */
  source: string;
  /** The server's name of the tool. */
  tool: string;
  /** The content hash of `definition` (core/catalog/pin.ts), and the graph's pin of the tool. */
  pin: string;
  /** The reviewed definition (description, input schema, annotations: side effects and idempotency follow them). */
  definition: PinnedDefinition;
}

/** The first problem with a bundle's `mcp_tools`, or null (see the header). */
export function mcpToolsProblem(tools: unknown, graph: unknown): string | null {
  if (tools === undefined) return null;
  if (!Array.isArray(tools)) return 'mcp_tools is not a list';
  const pins = isObject(graph) && isObject(graph['tool_pins']) ? graph['tool_pins'] : {};
  const seen = new Set<string>();
  for (const [i, t] of tools.entries()) {
    const at = `mcp_tools[${i}]`;
    if (!isObject(t) || typeof t['name'] !== 'string' || typeof t['source'] !== 'string' || typeof t['tool'] !== 'string')
      return `${at} needs name, source and tool`;
    if (t['name'] !== `mcp.${t['source']}.${t['tool']}`) return `${at}.name is not mcp.<source>.<tool>`;
    if (seen.has(t['name'])) return `${at}.name appears twice`;
    seen.add(t['name']);
    const d = pinnedDefinition(t['definition']);
    if (!d.ok || d.definition.name !== t['tool']) return `${at}.definition is not the tool's definition`;
    if (typeof t['pin'] !== 'string' || definitionPin(d.definition) !== t['pin']) return `${at}.pin is not its definition's hash`;
    if (pins[t['name']] !== t['pin']) return `${at}.pin is not the graph's pin of ${t['name']}`;
  }
  return null;
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
  const tools = mcpToolsProblem(c['mcp_tools'], c['graph']);
  if (tools !== null) throw refused('malformed', `the crew bundle is malformed: ${tools}`, 'invalid_request');
  const m = p.model;
  if (!(m === null || (isObject(m) && typeof m['sha256'] === 'string' && typeof m['publisher_kid'] === 'string'))) {
    throw refused('malformed', 'the crew bundle model reference is malformed', 'invalid_request');
  }
  if (checkGraph && !(await checkGraph(c as unknown as CrewContent))) {
    throw refused('graph_hash_mismatch', 'the crew bundle graph does not match its graph hash', 'forbidden');
  }
  return opened as OpenedEnvelope<CrewBundle>;
}
