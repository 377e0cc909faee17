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
 * | kv.get    | no           | workspace storage; needs data grant `kv:<workspace>` or `kv:*`, clearance >= the entry's classification, and every compartment of the entry |
 * | kv.put    | yes          | workspace storage; needs egress `kv:<workspace>` or `kv:*`; labels an entry only with compartments the writer holds |
 *
 * Compartments: an entry may carry compartment labels (`kv.put` argument
 * `compartments`, each one held by the writing seat). A reader must hold every
 * label of the entry (need-to-know, on top of clearance); otherwise the read
 * is refused with reason `compartment_not_granted`.
 */
import { request, type Dispatcher } from 'undici';
import { ServiceError, invalid } from '../../core/errors.ts';
import type { JsonObject } from '../../core/journal/record.ts';
import type { Reason } from '../../core/reasons.ts';
import type { Clock } from '../context.ts';
import type { ToolDelegation, ToolDelegationRequest } from '../oauth/api.ts';
import type { Store } from '../store/types.ts';
import { evaluateArithmetic } from './calc.ts';
import { egressAllowed } from './egress.ts';
import { kvCompartments, kvEntry, upsertKv } from './repository.ts';
import { isPrivateRefusal, literalHostAllowed } from './ssrf.ts';

/** The slice of an authority envelope tools look at. */
export interface ToolAuthority {
  egress_allowlist?: string[] | undefined;
  data_grant_ids?: string[] | undefined;
  clearance_level?: number | undefined;
  /** Compartments the seat holds (need-to-know labels); none when absent. */
  compartments?: string[] | undefined;
}

/** What the tools module gives every tool: its store, the cell clock, and the network floor. */
export interface ToolsContext {
  store: Store;
  clock: Clock;
  /** CIDR ranges the operator allow-listed for the whole cell (`--egress-allow-private`). */
  allowPrivate: readonly string[];
  /** The dispatcher whose connections pass the floor (cell/tools/ssrf.ts). */
  dispatcher: Dispatcher;
  /**
   * A token for a call to a registered protected resource on behalf of the run's requester (the OAuth
   * module's, cell/oauth/tool-delegation.ts); null when the URL is no such resource.
   */
  delegation?: ((req: ToolDelegationRequest) => Promise<ToolDelegation | null>) | undefined;
}

/** Who calls a tool, where, and with what authority. */
export interface ToolCaller {
  workspaceId: string;
  /** Principal id of the calling agent (or the requester of a `single` job). */
  agentId: string;
  authority: ToolAuthority;
  /** The run this call is part of and whom it acts for: a call to a protected resource carries a token for them. */
  onBehalf?: { requester: string; runId: string; crewId?: string };
}

export interface ToolDef {
  name: string;
  description: string;
  side_effects: boolean;
  /** JSON Schema of the arguments (sent to the model as a function). */
  parameters: JsonObject;
  /**
   * Runs the tool. `signal` stops the call (a step's timeout, a cancel of the run): a tool that waits
   * on something outside (http.get) aborts it and fails with reason `cancelled`; the others are instant.
   */
  run(ctx: ToolsContext, caller: ToolCaller, args: Record<string, unknown>, signal?: AbortSignal): Promise<unknown>;
}

/** A refusal of the security floor inside a tool, with a machine reason. */
export function toolRefusal(reason: Reason, message: string, extra: Record<string, unknown> = {}): ServiceError {
  return new ServiceError('forbidden', message, { details: { reason, ...extra } });
}

const str = (args: Record<string, unknown>, k: string, max = 2048): string => {
  const v = args[k];
  if (typeof v !== 'string' || v.length === 0 || v.length > max)
    throw invalid(`argument '${k}' must be a string of 1 to ${max} characters`, { reason: 'tool_bad_arguments', argument: k });
  return v;
};

const KEY = /^[A-Za-z0-9_.:/-]{1,200}$/;
const HTTP_BODY_LIMIT = 64 * 1024;

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
      const url = str(args, 'url');
      let parsed: URL;
      try {
        parsed = new URL(url);
      } catch {
        throw invalid("argument 'url' is not a URL", { reason: 'tool_bad_arguments', argument: 'url' });
      }
      if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
        throw invalid('only http and https URLs', { reason: 'tool_bad_arguments', argument: 'url' });
      if (!egressAllowed(caller.authority.egress_allowlist, parsed.href)) {
        throw toolRefusal('egress_denied', `egress to ${parsed.host} is not on the allowlist`, { destination: parsed.origin });
      }
      if (!literalHostAllowed(parsed.hostname, ctx.allowPrivate)) {
        throw toolRefusal('egress_private_address', 'egress to a loopback, private or link-local address is refused', {
          destination: parsed.origin,
        });
      }
      // A registered protected resource gets a token: the requester as subject, this agent as actor.
      const d =
        caller.onBehalf && ctx.delegation
          ? await ctx.delegation({
              url: parsed.href,
              tool: 'http.get',
              requester: caller.onBehalf.requester,
              agentId: caller.agentId,
              runId: caller.onBehalf.runId,
              ...(caller.onBehalf.crewId ? { crewId: caller.onBehalf.crewId } : {}),
            })
          : null;
      const headers = d
        ? { authorization: `DPoP ${d.token}`, dpop: await d.proof('GET', `${parsed.origin}${parsed.pathname}`) }
        : undefined;
      try {
        const res = await request(parsed.href, {
          method: 'GET',
          ...(headers ? { headers } : {}),
          headersTimeout: 5000,
          bodyTimeout: 5000,
          maxRedirections: 0,
          dispatcher: ctx.dispatcher,
          // A step's timeout or a cancel aborts the request: the server sees its connection closed.
          ...(signal ? { signal } : {}),
        } as Parameters<typeof request>[1]);
        const chunks: Buffer[] = [];
        let size = 0;
        let truncated = false;
        for await (const c of res.body) {
          const b = c as Buffer;
          if (size + b.length > HTTP_BODY_LIMIT) {
            chunks.push(b.subarray(0, HTTP_BODY_LIMIT - size));
            truncated = true;
            res.body.destroy();
            break;
          }
          chunks.push(b);
          size += b.length;
        }
        return {
          status: res.statusCode,
          content_type: String(res.headers['content-type'] ?? ''),
          body: Buffer.concat(chunks).toString('utf8'),
          truncated,
          // The journal keeps which token went where, never the token.
          ...(d ? { on_behalf: { jti: d.jti, token_sha256: d.tokenSha256 } } : {}),
        };
      } catch (e) {
        if (e instanceof ServiceError) throw e;
        if (signal?.aborted)
          throw new ServiceError('service_unavailable', 'http.get was stopped before the URL answered', {
            details: { reason: 'cancelled' },
          });
        if (isPrivateRefusal(e))
          throw toolRefusal('egress_private_address', 'egress to a loopback, private or link-local address is refused', {
            destination: parsed.origin,
          });
        throw new ServiceError('service_unavailable', 'http.get failed to reach the URL', {
          details: { reason: 'tool_unreachable' },
          retryable: true,
        });
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
  {
    name: 'kv.put',
    description: "Write a value to the run's workspace storage.",
    side_effects: true,
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
    parameters: t.parameters,
  }));
}
