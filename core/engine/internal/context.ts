/**
 * The per-drive state of a run: memoized steps (journal + recorded outputs),
 * step limits, seat spending, compiled expressions. Internal to the engine.
 */
import { contentHash, isPlainJson } from '../../canonical.ts';
import { compileExpr } from '../../expr/compile.ts';
import { evalBool, evalExpr } from '../../expr/evaluate.ts';
import type { ExprProgram } from '../../expr/program.ts';
import type { JournalKind, JsonObject } from '../../journal/record.ts';
import { fail, refuse, Stop } from './stop.ts';
import type { EnginePorts, Graph, GoverningContract, RunOptions, SeatSpec } from '../types.ts';
import type { RunRequester } from '../approval-rule.ts';

/** Variables visible to each kind of expression. */
export const VARS = {
  data: ['input', 'context'],
  loop: ['input', 'output', 'iteration', 'context'],
  rule: ['tool', 'args', 'authority', 'context'],
} as const;

/** Makes a port's answer plain JSON (undefined -> null; Dates, class instances via JSON). */
export function asJson(v: unknown): unknown {
  if (v === undefined) return null;
  if (isPlainJson(v)) return v;
  try {
    return JSON.parse(JSON.stringify(v)) ?? null;
  } catch {
    return null;
  }
}

/** A call is issued at most this many times: once, and re-issued once after it was found in flight. */
export const MAX_CALL_ATTEMPTS = 2;

export class RunContext {
  readonly runId: string;
  readonly context: JsonObject;
  steps = 0;
  private readonly seatSteps = new Map<string, number>();
  private readonly seatSpent = new Map<string, number>();
  private readonly programs = new Map<string, ExprProgram>();
  private readonly contracts = new Map<string, GoverningContract>();

  constructor(
    readonly graph: Graph,
    readonly graphHash: string,
    readonly ports: EnginePorts,
    readonly opts: RunOptions,
  ) {
    this.runId = opts.run_id;
    this.context = { ...(opts.context ?? {}), run_id: opts.run_id, requester: opts.requester };
  }

  /** Who requested the run: the principal and the actors of its token (two-person approvals exclude them all). */
  get requester(): RunRequester {
    return { id: this.opts.requester, actors: this.opts.requester_actors ?? [] };
  }

  seat(id: string): SeatSpec {
    const s = this.graph.seats[id];
    if (s === undefined) throw refuse('invalid_graph', { problem: `unknown seat ${id}` });
    return s;
  }

  /** The bound agent of a seat that needs one (model calls). */
  agentOf(seatId: string): string {
    const a = this.seat(seatId).agent_id;
    if (a === null) throw refuse('seat_unbound', { seat: seatId });
    return a;
  }

  /** Counts a step against the run's and the seat's limits. */
  count(seat: string | null): void {
    this.steps++;
    if (this.steps > this.graph.limits.max_steps) throw refuse('step_limit_exceeded', { limit: this.graph.limits.max_steps, scope: 'run' });
    if (seat !== null) {
      const n = (this.seatSteps.get(seat) ?? 0) + 1;
      this.seatSteps.set(seat, n);
      if (n > this.graph.limits.max_steps_per_seat)
        throw refuse('step_limit_exceeded', { limit: this.graph.limits.max_steps_per_seat, scope: 'seat', seat });
    }
  }

  spent(seat: string): number {
    return this.seatSpent.get(seat) ?? 0;
  }
  addSpend(seat: string, amount: number): void {
    this.seatSpent.set(seat, this.spent(seat) + amount);
  }

  async checkCancelled(): Promise<void> {
    if (this.ports.isCancelled !== undefined && (await this.ports.isCancelled())) throw new Stop('cancelled', 'cancelled');
  }

  /** Writes one journal record (no-op when journaling is off). Durable before it resolves. */
  async append(kind: JournalKind, stepId: string, input: unknown, output: unknown, data?: JsonObject): Promise<void> {
    const j = this.ports.journal;
    if (j === undefined) return;
    const fields = {
      step_id: stepId,
      kind,
      graph_hash: this.graphHash,
      input_hash: contentHash(input ?? null),
      output_hash: contentHash(output ?? null),
      at: this.ports.clock.now(),
      // data may carry port-supplied details: keep it plain JSON so a refusal is never lost.
      ...(data !== undefined ? { data: asJson(data) as JsonObject } : {}),
    };
    await j.append(fields, { input: input ?? null, output: output ?? null });
  }

  /**
   * Runs `fn` once per step id across drives: a recorded output is reused, otherwise
   * `fn` runs and its output is journaled before this resolves.
   */
  async memo(
    stepId: string,
    kind: 'step' | 'decision',
    seat: string | null,
    input: unknown,
    fn: () => Promise<{ output: unknown; data?: JsonObject }>,
  ): Promise<{ output: unknown; data: JsonObject | undefined; replayed: boolean }> {
    this.count(seat);
    const rec = this.ports.recorded !== undefined ? await this.ports.recorded(stepId) : undefined;
    if (rec !== undefined) return { output: rec.output, data: rec.data, replayed: true };
    await this.checkCancelled();
    const r = await fn();
    const output = asJson(r.output);
    await this.append(kind, stepId, input, output, r.data);
    return { output, data: r.data, replayed: false };
  }

  /**
   * Just before a model or tool call leaves the engine: journals an `intent` for
   * the call's step id (when the intents port is bound), so a later drive that
   * finds no result knows the call was in flight. A call found in flight once is
   * re-issued (attempt 2, `reissue: true`); found in flight twice it is not issued
   * again: the run fails `call_interrupted` (a call is re-issued at most once).
   * Returns what the call's step record adds to its data: `{ attempt: 2, reissued: true }`
   * for a re-issue, nothing otherwise.
   *
   * `effect`: a side-effecting tool call's effect key, written in the intent (before the call
   * leaves); `resolved` when an operator resolved the lost outcome of the issue before with
   * `retry` (internal/effects.ts): that re-issue is the operator's decision, not counted against
   * the at-most-once rule.
   */
  async beginCall(
    stepId: string,
    call: 'model' | 'tool',
    input: unknown,
    effect?: { key: string; resolved: boolean },
  ): Promise<JsonObject> {
    if (this.ports.intents === undefined) return {};
    const prior = await this.ports.intents(stepId);
    if (prior >= MAX_CALL_ATTEMPTS && effect?.resolved !== true) throw fail('call_interrupted', { step_id: stepId, call, attempts: prior });
    const attempt = prior + 1;
    await this.append('intent', stepId, input, null, {
      call,
      attempt,
      ...(prior > 0 ? { reissue: true } : {}),
      ...(effect !== undefined ? { effect_key: effect.key } : {}),
    });
    return prior > 0 ? { attempt, reissued: true } : {};
  }

  /**
   * Just before a model call leaves when its budget reservation is its intent (BudgetPort.reserve
   * `issued`: the port made the reservation durable before answering, so it stands where an `intent`
   * record would): no record is written. The call's earlier issues without a result are the larger of
   * the journal's open intents (a journal written before reservations stood for intents) and the
   * earlier reservations less the step's `attempt` records (each ends one attempt's reservation). As
   * beginCall: a call found in flight once is re-issued (`{ attempt: 2, reissued: true }` for its step
   * record), twice it fails `call_interrupted`.
   */
  async beginReservedCall(stepId: string, issued: number): Promise<JsonObject> {
    if (this.ports.intents === undefined) return {};
    const open = await this.ports.intents(stepId);
    const ended = this.ports.attempts !== undefined ? (await this.ports.attempts(stepId)).count : 0;
    const prior = Math.max(open, issued - ended);
    if (prior >= MAX_CALL_ATTEMPTS) throw fail('call_interrupted', { step_id: stepId, call: 'model', attempts: prior });
    return prior > 0 ? { attempt: prior + 1, reissued: true } : {};
  }

  program(src: string, vars: readonly string[]): ExprProgram {
    const key = vars.join(',') + '\u0000' + src;
    let p = this.programs.get(key);
    if (p === undefined) {
      const c = compileExpr(src, { variables: vars });
      if (!c.ok) throw refuse('invalid_graph', { problem: `expression: ${c.error.code}`, expr: src.slice(0, 200) });
      p = c.program;
      this.programs.set(key, p);
    }
    return p;
  }

  /** Evaluates a data expression; an evaluation error fails closed as a refusal. */
  value(src: string, bindings: Record<string, unknown>, vars: readonly string[] = VARS.data): unknown {
    const r = evalExpr(this.program(src, vars), { context: this.context, ...bindings });
    if (!r.ok) throw refuse('expression_failed', { code: r.error.code, expr: src.slice(0, 200) });
    return r.value;
  }

  /** Evaluates a condition; errors are reported as `{ ok: false }` for the caller to decide. */
  test(
    src: string,
    bindings: Record<string, unknown>,
    vars: readonly string[] = VARS.data,
  ): { ok: true; value: boolean } | { ok: false; code: string } {
    let program: ExprProgram;
    try {
      program = this.program(src, vars);
    } catch {
      return { ok: false, code: 'invalid_expression' }; // e.g. a contract rule that does not compile: fails closed
    }
    const r = evalBool(program, { context: this.context, ...bindings });
    return r.ok ? r : { ok: false, code: r.error.code };
  }

  async contract(id: string): Promise<GoverningContract> {
    let c = this.contracts.get(id);
    if (c === undefined) {
      if (this.ports.contracts === undefined) throw refuse('contract_unavailable', { contract: id });
      let got: GoverningContract | undefined;
      try {
        got = await this.ports.contracts.get(id);
      } catch (e) {
        throw fail('contract_error', { contract: id }, e);
      }
      if (got === undefined) throw refuse('contract_unavailable', { contract: id });
      c = got;
      this.contracts.set(id, c);
    }
    return c;
  }
}
