/**
 * Names of imported tools: a source named `crm` imports its server's tool
 * `lookup` as `mcp.crm.lookup`. The name travels to a model with `.` as `__`
 * (core/engine/wire-name.ts), so a tool whose catalog name would not come
 * back as itself (a `__` in it, a `_` before a `.`, a character outside
 * `[A-Za-z0-9_.-]`, more than 64 characters on the wire) is not imported:
 * the registration and the review list it as refused (`tool_name_unmappable`)
 * rather than rename it behind the operator's back. A definition larger than
 * MAX_DEFINITION_BYTES (canonical JSON) is refused too.
 */
import { canonicalJson } from '../../../core/canonical.ts';
import type { Reason } from '../../../core/reasons.ts';
import { wireNameOk } from '../../../core/engine/wire-name.ts';
import type { Listing, LiveTool } from '../../../runtime/mcp-client/connect.ts';

export { SOURCE_NAME } from '../../../runtime/mcp-client/config.ts';

/** The largest definition imported (description and schemas included), in bytes of canonical JSON. */
export const MAX_DEFINITION_BYTES = 64 * 1024;

/** The catalog name of a source's tool. */
export const catalogName = (source: string, tool: string) => `mcp.${source}.${tool}`;

/** True for a catalog name of an imported tool (any source). */
export const isImportedName = (name: string) => name.startsWith('mcp.');

/** A tool the catalog will not take, and why. */
export interface RefusedTool {
  tool: string;
  reason: Extract<Reason, 'tool_name_unmappable' | 'tool_definition_invalid'>;
  problem: string;
}

/** What of a server's list the catalog can import (by MCP name, with catalog names) and what it refuses. */
export function importable(source: string, listing: Listing): { tools: Map<string, LiveTool & { name: string }>; refused: RefusedTool[] } {
  const tools = new Map<string, LiveTool & { name: string }>();
  const refused: RefusedTool[] = listing.invalid.map((i) => ({ tool: i.tool, reason: 'tool_definition_invalid', problem: i.problem }));
  for (const [tool, live] of listing.tools) {
    const name = catalogName(source, tool);
    if (!wireNameOk(name)) {
      refused.push({
        tool,
        reason: 'tool_name_unmappable',
        problem: `${name} does not survive the model's function names (docs/tools.md)`,
      });
      continue;
    }
    if (new TextEncoder().encode(canonicalJson(live.definition)).length > MAX_DEFINITION_BYTES) {
      refused.push({ tool, reason: 'tool_definition_invalid', problem: `the definition is larger than ${MAX_DEFINITION_BYTES} bytes` });
      continue;
    }
    tools.set(tool, { ...live, name });
  }
  return { tools, refused };
}
