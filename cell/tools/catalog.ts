/**
 * The governed tool catalog: the named, real tools an agent may be granted
 * through `allowed_tools`. Each tool declares whether it has side effects
 * (the permission mode `ask` holds side-effecting calls for a human
 * approval), its JSON-schema parameters (sent to the model as a function),
 * and what it reads or where it writes, so the security floor (grant,
 * value gate, egress, data grants, clearance) can judge a call before it runs.
 *
 * | tool      | side effects | reads / writes                         |
 * |-----------|--------------|----------------------------------------|
 * | calc      | no           | nothing                                |
 * | clock.now | no           | the cell clock (a device's own)      |
 * | http.get  | no           | a URL (aborted by the call's signal: a step timeout, a cancel); the URL must be on egress_allowlist, and resolve to a public address (runtime/ssrf.ts) |
 * | http.request | yes (idempotent for GET, HEAD, PUT, DELETE) | a URL with a method; the method must be allowed by egress_allowlist (runtime/http-request.ts) |
 * | kv.get    | no           | workspace storage; needs data grant `kv:<workspace>` or `kv:*`, clearance >= the entry's classification, and every compartment of the entry |
 * | kv.put    | yes (idempotent) | workspace storage; needs egress `kv:<workspace>` or `kv:*`; labels an entry only with compartments the writer holds |
 *
 * Compartments: an entry may carry compartment labels (`kv.put` argument
 * `compartments`, each one held by the writing seat). A reader must hold every
 * label of the entry (need-to-know, on top of clearance); otherwise the read
 * is refused with reason `compartment_not_granted`.
 */
import { CALC, CLOCK_NOW, KV_GET, KV_PUT, type BuiltinTool, type KvStorage } from '../../core/catalog/builtin.ts';
import { HTTP_GET } from '../../runtime/http-call.ts';
import { HTTP_REQUEST } from '../../runtime/http-request.ts';
import { kvCompartments, kvEntry, upsertKv } from './repository.ts';
import type { ToolDef, ToolsContext } from './tool-def.ts';

export { toolRefusal, type ToolAuthority, type ToolCaller, type ToolDef, type ToolsContext } from './tool-def.ts';

/** The workspace storage of the cell: the `tool_kv` table, an overwrite checked in the transaction that writes it. */
function cellKv(ctx: ToolsContext): KvStorage {
  return {
    read: (ws, key) => kvEntry(ctx.store, ws, key),
    write: (ws, key, check, e) =>
      ctx.store.write(async (tx) => {
        check(await kvCompartments(tx, ws, key));
        await upsertKv(tx, { workspaceId: ws, key, ...e });
      }),
  };
}

/** A built-in tool (core/catalog/builtin.ts: the same definitions and floor as a device's) on the cell's clock and storage. */
function builtin(t: BuiltinTool): ToolDef {
  const { run, ...def } = t;
  return { ...def, run: (ctx, caller, args) => run({ clock: ctx.clock, kv: cellKv(ctx) }, caller, args) };
}

export const TOOLS: readonly ToolDef[] = [builtin(CALC), builtin(CLOCK_NOW), HTTP_GET, builtin(KV_GET), HTTP_REQUEST, builtin(KV_PUT)];

const BY_NAME = new Map(TOOLS.map((t) => [t.name, t]));

/** The catalog entry named `name` (the definitions are static: the same on every cell). */
export function catalogEntry(name: string): ToolDef | undefined {
  return BY_NAME.get(name);
}

/** A catalog tool as GET /admin/ai/tool-registry shows it; an imported tool also names its source and its pin. */
export interface ToolRegistryEntry {
  name: string;
  description: string;
  side_effects: boolean;
  read_only: boolean;
  /** Which calls are issued again with their effect key after a lost outcome: all, none, or those with an argument among values. */
  idempotent: boolean | { argument: string; values: string[] };
  parameters: Record<string, unknown>;
  source?: string;
  pin?: string;
}

/** The catalog's public view (GET /admin/ai/tool-registry). */
export function toolRegistryView(): ToolRegistryEntry[] {
  return TOOLS.map((t) => ({
    name: t.name,
    description: t.description,
    side_effects: t.side_effects,
    read_only: !t.side_effects,
    idempotent: t.idempotent ?? false,
    parameters: t.parameters,
  }));
}
