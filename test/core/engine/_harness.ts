// Test doubles for the engine's ports: scripted model, tools, budget ledger,
// approvals, manual clock, and a signed in-memory journal.
import { generateEd25519, signEd25519 } from '../../../core/crypto/ed25519.ts';
import { memoryJournal } from '../../../core/journal/memory.ts';
import { verifyJournal } from '../../../core/journal/verify.ts';
import type {
  ApprovalDecision,
  EnginePorts,
  Graph,
  GraphEdge,
  GraphNode,
  ModelRequest,
  ModelResponse,
  SeatSpec,
  ToolDescriptor,
} from '../../../core/engine/types.ts';
import type { JsonObject } from '../../../core/journal/record.ts';

export function seat(id: string, over: Partial<SeatSpec> = {}, auth: Partial<SeatSpec['authority']> = {}): SeatSpec {
  return {
    billet_id: id,
    role_label: `role ${id}`,
    required_skills: [],
    reports_to: null,
    agent_id: `agt_${id}`,
    model: null,
    system_prompt: null,
    ...over,
    authority: {
      allowed_tools: [],
      clearance_level: 0,
      permission_mode: 'auto',
      data_grant_ids: [],
      egress_allowlist: [],
      compartments: [],
      governing_contract_ids: [],
      budget_ceiling: null,
      ...auth,
    },
  };
}

export function graph(nodes: GraphNode[], edges: GraphEdge[] = [], seats: SeatSpec[] = [], limits: Partial<Graph['limits']> = {}): Graph {
  return {
    v: 1,
    formation_hash: 'sha256:' + '1'.repeat(64),
    policy: 'sequential',
    entry: nodes[0]!.id,
    exit: nodes[nodes.length - 1]!.id,
    nodes,
    edges,
    seats: Object.fromEntries(seats.map((s) => [s.billet_id, s])),
    limits: { max_steps: 1000, max_steps_per_seat: 200, max_tool_rounds: 4, default_max_tokens: 100, ...limits },
    placement: { clearance: 0, topology: {} },
  };
}

/** Edges of a chain a -> b -> c. */
export function chain(...ids: string[]): GraphEdge[] {
  return ids.slice(1).map((to, i) => ({ from: ids[i]!, to }));
}

export function answer(content: string, tool_calls?: ModelResponse['tool_calls']): ModelResponse {
  return { content, ...(tool_calls ? { tool_calls } : {}), usage: { input_tokens: 10, output_tokens: 5 } };
}

/** A model answering from a script keyed by seat (a list consumed in order) or by a function. */
export function scriptedModel(script: Record<string, ModelResponse[]> | ((req: ModelRequest) => ModelResponse)) {
  const calls: ModelRequest[] = [];
  const queues = typeof script === 'function' ? null : Object.fromEntries(Object.entries(script).map(([k, v]) => [k, [...v]]));
  return {
    calls,
    port: {
      async complete(req: ModelRequest): Promise<ModelResponse> {
        calls.push(structuredClone(req));
        if (typeof script === 'function') return script(req);
        const next = queues![req.agent.seat]?.shift();
        if (next === undefined) throw new Error(`no scripted answer for ${req.agent.seat}`);
        return next;
      },
    },
  };
}

/**
 * A budget port over in-memory ledgers. `counted`: it answers each reservation's `issued` (the
 * reservations of the step made before it, kept across drives as a store keeps them), so a model
 * call's reservation is its intent (no `intent` record).
 */
export function budget(ledgers: string[], limit = Infinity, opts: { counted?: boolean } = {}) {
  const log: string[] = [];
  let used = 0;
  let n = 0;
  const reserved = new Map<string, number>();
  const byStep = new Map<string, number>();
  return {
    log,
    get used() {
      return used;
    },
    port: {
      async hasLedger(a: string) {
        return ledgers.includes(a);
      },
      async reserve(a: string, amount: number, ref?: { run_id: string; step_id: string }) {
        if (used + amount > limit) return { ok: false as const, reason: 'ledger exhausted' };
        const id = `r${n++}`;
        reserved.set(id, amount);
        log.push(`reserve ${a} ${amount}`);
        if (!opts.counted || ref === undefined) return { ok: true as const, reservation_id: id };
        const issued = byStep.get(ref.step_id) ?? 0;
        byStep.set(ref.step_id, issued + 1);
        return { ok: true as const, reservation_id: id, issued };
      },
      async commit(id: string, actual: number) {
        reserved.delete(id);
        used += actual;
        log.push(`commit ${id} ${actual}`);
      },
    },
  };
}

export function tools(defs: Record<string, { side_effects?: boolean; fn: (args: JsonObject) => unknown }>) {
  const calls: { name: string; args: JsonObject }[] = [];
  return {
    calls,
    port: {
      describe(name: string): ToolDescriptor | undefined {
        const d = defs[name];
        return d ? { name, description: name, side_effects: d.side_effects ?? false, parameters: { type: 'object' } } : undefined;
      },
      async call(name: string, args: JsonObject) {
        calls.push({ name, args });
        return defs[name]!.fn(args);
      },
    },
  };
}

/**
 * An approvals port as the cell keeps one: a decision approves the input digest of the step's
 * pending request (the cell's route binds it so), unless the test names another.
 */
export function approvals() {
  const store = new Map<string, ApprovalDecision[]>();
  const requested: string[] = [];
  const digests = new Map<string, string>();
  return {
    requested,
    digests,
    add(
      step: string,
      principal: string,
      decision: 'approve' | 'reject' = 'approve',
      o: { chain?: string[]; input_hash?: string; comment?: string } = {},
    ) {
      const d: ApprovalDecision = {
        principal,
        decision,
        at: 0,
        input_hash: o.input_hash ?? digests.get(step) ?? null,
        ...(o.chain ? { chain: o.chain } : {}),
        ...(o.comment !== undefined ? { comment: o.comment } : {}),
      };
      store.set(step, [...(store.get(step) ?? []), d]);
    },
    port: {
      async decisions(step: string) {
        return store.get(step) ?? [];
      },
      async request(step: string, ask: { input_hash: string }) {
        requested.push(step);
        digests.set(step, ask.input_hash);
      },
    },
  };
}

export function manualClock(start = 1_700_000_000_000) {
  let t = start;
  return {
    now: () => t,
    advance: (ms: number) => {
      t += ms;
    },
  };
}

export async function signedJournal(runId = 'run_test') {
  const kp = await generateEd25519();
  const j = memoryJournal(runId, { kid: kp.kid, sign: (b) => signEd25519(kp.privateJwk, b) });
  const verify = () => verifyJournal(j.records, (kid) => (kid === kp.kid ? kp.publicJwk : undefined));
  return { ...j, kp, verify };
}

/** Ports with a journal (and its recorded port), a clock and a budget ledger for the given agents. */
export async function ports(extra: Partial<EnginePorts> = {}, agents: string[] = []) {
  const j = await signedJournal();
  const clock = manualClock();
  const b = budget(agents);
  const p: EnginePorts = { clock, budget: b.port, journal: j.port, recorded: j.recorded, ...extra };
  return { p, j, clock, b };
}

export const OPTS = { run_id: 'run_test', requester: 'usr_alice' };
