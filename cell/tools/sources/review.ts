/**
 * The review of a source (`GET /admin/catalog/sources/{id}/review`,
 * `catalog.read`): the server's tools as it lists them now beside the pins,
 * read with the reviewer's identity. Each tool is one of
 *
 * | status    | meaning                                                         |
 * |-----------|-----------------------------------------------------------------|
 * | `pinned`  | the live definition is the pinned one                           |
 * | `changed` | it differs: `diff` names each change (core/catalog/diff.ts)     |
 * | `missing` | pinned, but the server no longer lists it                       |
 * | `new`     | listed, importable, not pinned (a re-pin with its hash imports it) |
 * | `refused` | listed, but the catalog cannot take it (`reason`, `problem`)    |
 *
 * `live_pin` is what a re-pin names to pin what was reviewed. Nothing is
 * written: a review changes no pin.
 */
import { definitionDiff, type DefinitionChange } from '../../../core/catalog/diff.ts';
import type { PinnedDefinition } from '../../../core/catalog/pin.ts';
import { notFound } from '../../../core/errors.ts';
import type { AuthContext } from '../../context.ts';
import type { SourcesContext } from './context.ts';
import { importable, type RefusedTool } from './names.ts';
import { readListing } from '../mcp/read.ts';
import { pinsOf, sourceById } from './repository.ts';
import type { SourceRow } from './types.ts';

export interface ReviewedTool {
  tool: string;
  name: string | null;
  status: 'pinned' | 'changed' | 'missing' | 'new' | 'refused';
  pin: string | null;
  live_pin: string | null;
  pinned: PinnedDefinition | null;
  live: PinnedDefinition | null;
  diff: DefinitionChange[];
  reason?: RefusedTool['reason'];
  problem?: string;
}

export async function reviewSource(
  ctx: SourcesContext,
  auth: AuthContext,
  id: string,
): Promise<{ source: SourceRow; tools: ReviewedTool[] }> {
  const source = await sourceById(ctx.core.store, id);
  if (!source) throw notFound('catalog source');
  const pins = await pinsOf(ctx.core.store, id);
  const listing = await readListing(ctx, source, auth.principal.id);
  const { tools, refused } = importable(source.name, listing);
  const out: ReviewedTool[] = [];
  const seen = new Set<string>();
  for (const p of pins) {
    seen.add(p.tool);
    const l = tools.get(p.tool) ?? listing.tools.get(p.tool);
    const status = l === undefined ? 'missing' : l.pin === p.pin ? 'pinned' : 'changed';
    out.push({
      tool: p.tool,
      name: p.name,
      status,
      pin: p.pin,
      live_pin: l?.pin ?? null,
      pinned: p.definition,
      live: l?.definition ?? null,
      diff: l === undefined ? [] : definitionDiff(p.definition, l.definition),
    });
  }
  for (const [tool, l] of tools) {
    if (seen.has(tool)) continue;
    out.push({ tool, name: l.name, status: 'new', pin: null, live_pin: l.pin, pinned: null, live: l.definition, diff: [] });
  }
  for (const r of refused) {
    if (seen.has(r.tool)) continue;
    const l = listing.tools.get(r.tool);
    out.push({
      tool: r.tool,
      name: null,
      status: 'refused',
      pin: null,
      live_pin: l?.pin ?? null,
      pinned: null,
      live: l?.definition ?? null,
      diff: [],
      reason: r.reason,
      problem: r.problem,
    });
  }
  out.sort((a, b) => (a.tool < b.tool ? -1 : a.tool > b.tool ? 1 : 0));
  return { source, tools: out };
}
