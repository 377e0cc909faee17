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
 * | clock.now | no           | the cell clock                         |
 * | http.get  | no           | a URL (aborted by the call's signal: a step timeout, a cancel); the URL must be on egress_allowlist, and resolve to a public address (cell/tools/ssrf.ts) |
 * | http.request | yes (idempotent for GET, HEAD, PUT, DELETE) | a URL with a method; the method must be allowed by egress_allowlist (http-request.ts) |
 * | kv.get    | no           | workspace storage; needs data grant `kv:<workspace>` or `kv:*`, clearance >= the entry's classification, and every compartment of the entry |
 * | kv.put    | yes (idempotent) | workspace storage; needs egress `kv:<workspace>` or `kv:*`; labels an entry only with compartments the writer holds |
 *
 * Compartments: an entry may carry compartment labels (`kv.put` argument
 * `compartments`, each one held by the writing seat). A reader must hold every
 * label of the entry (need-to-know, on top of clearance); otherwise the read
 * is refused with reason `compartment_not_granted`.
 */
import { invalid } from '../../core/errors.ts';
import { evaluateArithmetic } from './calc.ts';
import { egressAllowed } from './egress.ts';
import { answerOf, assertEgress, delegationFor, requestFailure, send, urlArg } from './http-call.ts';
import { HTTP_REQUEST } from './http-request.ts';
import { kvCompartments, kvEntry, upsertKv } from './repository.ts';
import { stringArg as str, toolRefusal, type ToolDef } from './tool-def.ts';

export { toolRefusal, type ToolAuthority, type ToolCaller, type ToolDef, type ToolsContext } from './tool-def.ts';

const KEY = /^[A-Za-z0-9_.:/-]{1,200}$/;

const COMPARTMENT = /^[A-Za-z0-9_.:-]{1,64}$/;
const MAX_COMPARTMENTS = 16;

/** The `compartments` argument of kv.put: a list of labels, sorted and deduplicated. */
function compartmentsArg(args: Record<string, unknown>): string[] {
  const v = args['compartments'];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.length > MAX_COMPARTMENTS || !v.every((x) => typeof x === 'string' && COMPARTMENT.test(x))) {
    throw invalid(`argument 'compartments' must be a list of at most ${MAX_COMPARTMENTS} labels ([A-Za-z0-9_.:-], 1 to 64 characters)`, {
      reason: 'tool_bad_arguments',
      argument: 'compartments',
    });
  }
  return [...new Set(v as string[])].sort();
}

/** Labels of `needed` the holder lacks (sorted). */
function missingCompartments(needed: readonly string[], held: readonly string[] | undefined): string[] {
  const have = new Set(held ?? []);
  return needed.filter((c) => !have.has(c));
}

function dataGranted(grants: readonly string[] | undefined, workspaceId: string): boolean {
  return (grants ?? []).some((g) => g === 'kv:*' || g === `kv:${workspaceId}` || g === '*');
}

export const TOOLS: readonly ToolDef[] = [
  {
    name: 'calc',
    description: 'Evaluate an arithmetic expression (+ - * / % ^, parentheses).',
    side_effects: false,
    parameters: { type: 'object', properties: { expression: { type: 'string' } }, required: ['expression'] },
    async run(_ctx, _caller, args) {
      return { value: evaluateArithmetic(str(args, 'expression', 256)) };
    },
  },
  {
    name: 'clock.now',
    description: "The cell's current time.",
    side_effects: false,
    parameters: { type: 'object', properties: {} },
    async run(ctx) {
      const now = ctx.clock.now();
      return { epoch_ms: now, iso: new Date(now).toISOString() };
    },
  },
  {
    name: 'http.get',
    description: 'Fetch a URL on the egress allowlist (GET, no redirects, 64 KiB, 5 s).',
    side_effects: false,
    parameters: { type: 'object', properties: { url: { type: 'string' } }, required: ['url'] },
    async run(ctx, caller, args, signal) {
      const parsed = urlArg(args);
      assertEgress(ctx, caller, parsed);
      // A registered protected resource gets a token: the requester as subject, this agent as actor.
      const d = await delegationFor(ctx, caller, parsed, 'http.get');
      const headers = d
        ? { authorization: `DPoP ${d.token}`, dpop: await d.proof('GET', `${parsed.origin}${parsed.pathname}`) }
        : undefined;
      try {
        return answerOf(await send(ctx, parsed, { method: 'GET', ...(headers ? { headers } : {}), signal }), d);
      } catch (e) {
        throw requestFailure(e, signal, parsed, 'http.get');
      }
    },
  },
  {
    name: 'kv.get',
    description: "Read a value from the run's workspace storage.",
    side_effects: false,
    parameters: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'] },
    async run(ctx, caller, args) {
      const key = str(args, 'key', 200);
      if (!KEY.test(key))
        throw invalid("argument 'key' has characters outside [A-Za-z0-9_.:/-]", { reason: 'tool_bad_arguments', argument: 'key' });
      if (!dataGranted(caller.authority.data_grant_ids, caller.workspaceId)) {
        throw toolRefusal('data_not_granted', `no data grant covers workspace storage of ${caller.workspaceId}`, {
          data: `kv:${caller.workspaceId}`,
        });
      }
      const entry = await kvEntry(ctx.store, caller.workspaceId, key);
      if (!entry) return { found: false };
      if (entry.classification > (caller.authority.clearance_level ?? 0)) {
        throw toolRefusal('clearance_insufficient', 'the entry is classified above the agent clearance', {
          classification: entry.classification,
        });
      }
      const lacking = missingCompartments(entry.compartments, caller.authority.compartments);
      if (lacking.length) {
        throw toolRefusal('compartment_not_granted', 'the entry is labelled with compartments the agent does not hold', {
          key,
          missing_compartments: lacking,
        });
      }
      return { found: true, value: entry.value };
    },
  },
  HTTP_REQUEST,
  {
    name: 'kv.put',
    description: "Write a value to the run's workspace storage.",
    side_effects: true,
    // Writing the same value under the same key again leaves the same entry.
    idempotent: true,
    parameters: {
      type: 'object',
      properties: {
        key: { type: 'string' },
        value: {},
        classification: { type: 'integer', minimum: 0 },
        compartments: {
          type: 'array',
          items: { type: 'string' },
          maxItems: MAX_COMPARTMENTS,
          description: 'Compartment labels of the entry (each held by the writer); readers must hold all of them',
        },
      },
      required: ['key', 'value'],
    },
    async run(ctx, caller, args) {
      const key = str(args, 'key', 200);
      if (!KEY.test(key))
        throw invalid("argument 'key' has characters outside [A-Za-z0-9_.:/-]", { reason: 'tool_bad_arguments', argument: 'key' });
      const ws = caller.workspaceId;
      if (!egressAllowed(caller.authority.egress_allowlist, `kv:${ws}`)) {
        throw toolRefusal('egress_denied', `egress to workspace storage of ${ws} is not on the allowlist`, { destination: `kv:${ws}` });
      }
      const clearance = caller.authority.clearance_level ?? 0;
      const cls = args['classification'] === undefined ? 0 : args['classification'];
      if (typeof cls !== 'number' || !Number.isInteger(cls) || cls < 0)
        throw invalid("argument 'classification' must be a non-negative integer", {
          reason: 'tool_bad_arguments',
          argument: 'classification',
        });
      if (cls > clearance) throw toolRefusal('clearance_insufficient', 'cannot write above the agent clearance', { classification: cls });
      const labels = compartmentsArg(args);
      const lacking = missingCompartments(labels, caller.authority.compartments);
      if (lacking.length) {
        throw toolRefusal('compartment_not_granted', 'cannot label an entry with compartments the agent does not hold', {
          key,
          missing_compartments: lacking,
        });
      }
      const value = JSON.stringify(args['value'] ?? null);
      if (value.length > 64 * 1024) throw invalid('value larger than 64 KiB', { reason: 'tool_bad_arguments', argument: 'value' });
      const at = ctx.clock.now();
      await ctx.store.write(async (tx) => {
        // Overwriting a labelled entry needs its labels too (else a writer could erase or relabel data it may not read).
        const prior = await kvCompartments(tx, ws, key);
        const priorLacking = prior ? missingCompartments(prior, caller.authority.compartments) : [];
        if (priorLacking.length) {
          throw toolRefusal('compartment_not_granted', 'the existing entry is labelled with compartments the agent does not hold', {
            key,
            missing_compartments: priorLacking,
          });
        }
        await upsertKv(tx, { workspaceId: ws, key, value, classification: cls, compartments: labels, at, by: caller.agentId });
      });
      return labels.length ? { ok: true, key, compartments: labels } : { ok: true, key };
    },
  },
];

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
