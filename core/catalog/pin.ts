/**
 * The pin of an imported tool: the part of an MCP server's tool definition
 * that an operator reviews (name, title, description, input and output
 * schema, annotations) and its content hash, `sha256:` + hex SHA-256 of its
 * RFC 8785 canonical JSON. Fields the server sends beside these (`_meta`,
 * `icons`, `execution`) are not part of the pin; a field the server leaves
 * out is absent from the pinned definition (never `null`), so one definition
 * has exactly one pin whatever order or spacing the server used.
 *
 * The side-effect flag follows the definition's annotations: only a tool
 * declared `readOnlyHint: true` is read-only; any other tool is
 * side-effecting (MCP's own default), so `permission_mode: ask` and
 * `auto-read` hold its calls for a human approval. A side-effecting tool
 * declared `idempotentHint: true` is idempotent: a call whose outcome was
 * lost in a crash is issued again with its effect key; any other one is not
 * (MCP's default is `false`; the hint means something only for a tool that is
 * not read-only). Both hints are annotations, so both are pinned: a server
 * that changes either is refused until an operator re-pins.
 *
 * @example definitionPin({ name: 'echo', inputSchema: { type: 'object' } }) // 'sha256:…'
 */
import { contentHash } from '../canonical.ts';
import type { ToolDescriptor } from '../engine/types.ts';
import type { JsonObject } from '../journal/record.ts';

/** A tool definition as pinned (MCP's field names). */
export interface PinnedDefinition {
  name: string;
  title?: string;
  description?: string;
  inputSchema: JsonObject;
  outputSchema?: JsonObject;
  annotations?: JsonObject;
}

const isObj = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The reviewed part of a definition as a server listed it, or a problem: a
 * tool without a string name or an object input schema is not a tool.
 */
export function pinnedDefinition(tool: unknown): { ok: true; definition: PinnedDefinition } | { ok: false; problem: string } {
  if (!isObj(tool) || typeof tool['name'] !== 'string' || tool['name'].length === 0) return { ok: false, problem: 'no name' };
  if (!isObj(tool['inputSchema'])) return { ok: false, problem: 'inputSchema is not an object' };
  const d: PinnedDefinition = { name: tool['name'], inputSchema: tool['inputSchema'] };
  for (const f of ['title', 'description'] as const) {
    const v = tool[f];
    if (v === undefined) continue;
    if (typeof v !== 'string') return { ok: false, problem: `${f} is not a string` };
    d[f] = v;
  }
  for (const f of ['outputSchema', 'annotations'] as const) {
    const v = tool[f];
    if (v === undefined) continue;
    if (!isObj(v)) return { ok: false, problem: `${f} is not an object` };
    d[f] = v;
  }
  return { ok: true, definition: d };
}

/** The pin: the content hash of the pinned definition. */
export function definitionPin(d: PinnedDefinition): string {
  return contentHash(d);
}

/** True when the definition changes something outside the run: unless it is declared `readOnlyHint: true`. */
export function sideEffecting(d: PinnedDefinition): boolean {
  return d.annotations?.['readOnlyHint'] !== true;
}

/**
 * True when the definition is side-effecting and declared `idempotentHint: true` (calling it again with
 * the same arguments has no further effect): a call of it whose outcome was lost may be issued again.
 */
export function declaredIdempotent(d: PinnedDefinition): boolean {
  return sideEffecting(d) && d.annotations?.['idempotentHint'] === true;
}

/**
 * The engine's view of a pinned definition, under its catalog name: its description (or title), side
 * effects and idempotency from its annotations, its input schema. The cell's catalog and a device's
 * (the crew bundle's entries, edge/mcp-tools.ts) describe an imported tool by it.
 */
export function pinnedDescriptor(name: string, d: PinnedDefinition): ToolDescriptor {
  return {
    name,
    description: d.description ?? d.title ?? '',
    side_effects: sideEffecting(d),
    ...(declaredIdempotent(d) ? { idempotent: true } : {}),
    parameters: d.inputSchema,
  };
}
