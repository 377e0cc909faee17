/**
 * The built-in tools a cell and a device both run: `calc`, `clock.now`,
 * `kv.get`, `kv.put`. Their definitions (name, description, side effects,
 * parameters) and their security floor (data grant, egress to workspace
 * storage, clearance, compartments) live here once, so the cell's catalog
 * (cell/tools/catalog.ts) and a device's (edge/tools.ts) judge a call with
 * the same code; each supplies only its clock and its storage (`KvStorage`:
 * the cell's `tool_kv` table, a device's own file).
 *
 * Refusals are ServiceErrors `forbidden` with a machine reason (the engine's
 * tools port turns them into EngineRefusals); bad arguments are
 * `invalid_request` with reason `tool_bad_arguments` (they go back to the
 * model). Pure: no I/O of its own.
 */
import { ServiceError, invalid, isServiceError } from '../errors.ts';
import type { JsonObject } from '../journal/record.ts';
import { relayedReason, type Reason } from '../reasons.ts';
import { EngineRefusal } from '../engine/refusal.ts';
import type { SeatAuthority } from '../engine/types.ts';
import { egressAllowed } from '../authority/egress.ts';
import { evaluateArithmetic } from './calc.ts';

/** The slice of an authority envelope tools look at. */
export interface ToolAuthority {
  egress_allowlist?: string[] | undefined;
  data_grant_ids?: string[] | undefined;
  clearance_level?: number | undefined;
  /** Compartments the seat holds (need-to-know labels); none when absent. */
  compartments?: string[] | undefined;
}

/** Who calls a built-in tool: the workspace whose storage it uses, the calling agent, its authority. */
export interface BuiltinCaller {
  workspaceId: string;
  agentId: string;
  authority: ToolAuthority;
}

/** A stored kv entry: its value, classification and compartment labels. */
export interface KvEntry {
  value: unknown;
  classification: number;
  compartments: string[];
}

/** Workspace storage as the kv tools use it. */
export interface KvStorage {
  read(workspaceId: string, key: string): Promise<KvEntry | undefined>;
  /**
   * In one atomic step: `check` the labels of the entry there now (undefined: none), which throws to refuse,
   * then write the entry (`value` as JSON text).
   */
  write(
    workspaceId: string,
    key: string,
    check: (prior: readonly string[] | undefined) => void,
    entry: { value: string; classification: number; compartments: string[]; at: number; by: string },
  ): Promise<void>;
}

/** What a built-in tool is given: a clock and workspace storage. */
export interface BuiltinContext {
  clock: { now(): number };
  kv: KvStorage;
}

export interface BuiltinTool {
  name: string;
  description: string;
  side_effects: boolean;
  idempotent?: boolean;
  parameters: JsonObject;
  run(ctx: BuiltinContext, caller: BuiltinCaller, args: Record<string, unknown>): Promise<unknown>;
}

/** The slice of a seat's authority (the engine's ToolCallContext.authority) a tool judges; none when absent. */
export function toolAuthorityOf(a: SeatAuthority | null): ToolAuthority {
  return {
    egress_allowlist: a?.egress_allowlist ?? [],
    data_grant_ids: a?.data_grant_ids ?? [],
    clearance_level: a?.clearance_level ?? 0,
    compartments: a?.compartments ?? [],
  };
}

/**
 * A tool's failure as an engine tools port answers it: a refusal of the floor (`forbidden`) is the engine's
 * refusal with the tool's reason; bad arguments go back to the model as the tool's answer, so it can
 * correct itself; anything else is thrown as it is (the run fails tool_error).
 */
export function toolFailureAnswer(e: unknown): { error: 'invalid_request'; message: string } {
  if (isServiceError(e) && e.code === 'forbidden')
    throw new EngineRefusal(relayedReason(e, 'tool_refused'), e.message, { ...(e.details ?? {}) } as JsonObject);
  if (isServiceError(e) && e.code === 'invalid_request') return { error: 'invalid_request', message: e.message };
  throw e;
}

/** A refusal of the security floor inside a tool, with a machine reason. */
export function toolRefusal(reason: Reason, message: string, extra: Record<string, unknown> = {}): ServiceError {
  return new ServiceError('forbidden', message, { details: { reason, ...extra } });
}

/** A string argument of 1 to `max` characters, else invalid_request (`tool_bad_arguments`). */
export function stringArg(args: Record<string, unknown>, k: string, max = 2048): string {
  const v = args[k];
  if (typeof v !== 'string' || v.length === 0 || v.length > max)
    throw invalid(`argument '${k}' must be a string of 1 to ${max} characters`, { reason: 'tool_bad_arguments', argument: k });
  return v;
}

const KEY = /^[A-Za-z0-9_.:/-]{1,200}$/;
const COMPARTMENT = /^[A-Za-z0-9_.:-]{1,64}$/;
const MAX_COMPARTMENTS = 16;
const MAX_VALUE = 64 * 1024;

function keyArg(args: Record<string, unknown>): string {
  const key = stringArg(args, 'key', 200);
  if (!KEY.test(key))
    throw invalid("argument 'key' has characters outside [A-Za-z0-9_.:/-]", { reason: 'tool_bad_arguments', argument: 'key' });
  return key;
}

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

export const CALC: BuiltinTool = {
  name: 'calc',
  description: 'Evaluate an arithmetic expression (+ - * / % ^, parentheses).',
  side_effects: false,
  parameters: { type: 'object', properties: { expression: { type: 'string' } }, required: ['expression'] },
  async run(_ctx, _caller, args) {
    return { value: evaluateArithmetic(stringArg(args, 'expression', 256)) };
  },
};

export const CLOCK_NOW: BuiltinTool = {
  name: 'clock.now',
  description: "The cell's current time.",
  side_effects: false,
  parameters: { type: 'object', properties: {} },
  async run(ctx) {
    const now = ctx.clock.now();
    return { epoch_ms: now, iso: new Date(now).toISOString() };
  },
};

export const KV_GET: BuiltinTool = {
  name: 'kv.get',
  description: "Read a value from the run's workspace storage.",
  side_effects: false,
  parameters: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'] },
  async run(ctx, caller, args) {
    const key = keyArg(args);
    if (!dataGranted(caller.authority.data_grant_ids, caller.workspaceId)) {
      throw toolRefusal('data_not_granted', `no data grant covers workspace storage of ${caller.workspaceId}`, {
        data: `kv:${caller.workspaceId}`,
      });
    }
    const entry = await ctx.kv.read(caller.workspaceId, key);
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
};

export const KV_PUT: BuiltinTool = {
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
    const key = keyArg(args);
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
    if (value.length > MAX_VALUE) throw invalid('value larger than 64 KiB', { reason: 'tool_bad_arguments', argument: 'value' });
    // Overwriting a labelled entry needs its labels too (else a writer could erase or relabel data it may not read).
    const check = (prior: readonly string[] | undefined) => {
      const priorLacking = prior ? missingCompartments(prior, caller.authority.compartments) : [];
      if (priorLacking.length) {
        throw toolRefusal('compartment_not_granted', 'the existing entry is labelled with compartments the agent does not hold', {
          key,
          missing_compartments: priorLacking,
        });
      }
    };
    await ctx.kv.write(ws, key, check, { value, classification: cls, compartments: labels, at: ctx.clock.now(), by: caller.agentId });
    return labels.length ? { ok: true, key, compartments: labels } : { ok: true, key };
  },
};

/** The built-in tools, by name. */
export const BUILTIN_TOOLS: ReadonlyMap<string, BuiltinTool> = new Map([CALC, CLOCK_NOW, KV_GET, KV_PUT].map((t) => [t.name, t]));
