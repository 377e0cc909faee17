/**
 * The engine's ports for a crew run: the model (the AI module's port, as it
 * is), the governed tool catalog (through the tools module), approvals (the
 * runs module's), and this module's own: budget ledgers and governing
 * contracts. Journal, clock, cancellation and recorded steps are bound by the
 * runs module's driveRun.
 */
import { EngineRefusal } from '../../../core/engine/refusal.ts';
import { toolAuthorityOf, toolFailureAnswer } from '../../../core/catalog/builtin.ts';
import type { BudgetPort, ContractsPort, ToolsPort } from '../../../core/engine/types.ts';
import { stepDeadline } from '../../../runtime/step-deadline.ts';
import type { DrivePorts } from '../../runs/api.ts';
import { hasLedger, reservationsByStep, reserveBudget, stageBudgetCommit } from '../resources/agents.ts';
import type { TeamsContext } from '../context.ts';
import { getContract } from '../resources/resources.ts';
import { tracedTools } from './tool-span.ts';

/**
 * The tools port of a run: the governed catalog (the tools module). Each call gets a signal that aborts at
 * the step's `timeout_ms` or when this process's driver of the run stops (a cancel): the tool stops its
 * work (http.get aborts its request) and the step fails `step_timeout` at the deadline.
 */
export function toolsPort(
  ctx: TeamsContext,
  workspaceId: string,
  onBehalf?: { requester: string; crewId?: string },
  runId?: string,
): ToolsPort {
  const { tools } = ctx;
  return {
    describe(name) {
      return tools.describe(name);
    },
    async call(name, args, call) {
      if (!tools.has(name)) throw new EngineRefusal('tool_unknown', `no tool ${name}`, { tool: name });
      const a = call.authority;
      const deadline = stepDeadline(call.timeout_ms, runId === undefined ? undefined : ctx.runs.driverSignal(runId));
      try {
        return await deadline.race(
          tools.run(
            name,
            {
              workspaceId,
              agentId: call.agent_id ?? 'none',
              ...(onBehalf ? { onBehalf: { ...onBehalf, runId: call.run_id } } : {}),
              ...(call.effect_key !== undefined ? { effectKey: call.effect_key } : {}),
              authority: toolAuthorityOf(a),
            },
            args,
            deadline.signal,
            call.tool_pin !== undefined ? { pin: call.tool_pin } : undefined,
          ),
        );
      } catch (e) {
        // A refusal is the engine's; bad arguments go back to the model as the tool's answer.
        return toolFailureAnswer(e);
      }
    },
  };
}

/**
 * The budget port of a run: a reservation is a row of the run's, decided
 * and written in one statement that rides in the transaction committing the
 * run's previous step (reserveBudget), its commit a write that rides in the
 * next one; so a model step is one commit. The reservation is the call's
 * intent (core BudgetPort.reserve `issued`): the port counts the run's
 * reservations of each step, read at a drive's first reservation and then
 * kept as it makes them, so a call found in flight by a later drive is known
 * without an `intent` record. The engine asks hasLedger before every drive's
 * first step (core/engine/run.ts preflightBudget): the count is read again
 * then, so a drive of this port after another cell's never counts from an
 * older read.
 */
export function budgetPort(ctx: TeamsContext, runId: string, fresh = false): BudgetPort {
  // `fresh`: the first drive of a run this cell recorded claimed a moment ago (runs/opening.ts
  // recordDrivenRunTx), which has no reservation yet: its count starts empty, without a read.
  let issued: Promise<Map<string, Set<string>>> | null = fresh ? Promise.resolve(new Map()) : null;
  return {
    hasLedger(agentId) {
      if (!fresh) issued = null;
      return hasLedger(ctx, agentId);
    },
    async reserve(agentId, amount, ref, minimum) {
      fresh = false;
      issued ??= reservationsByStep(ctx.core.store, runId);
      const byStep = await issued;
      const before = byStep.get(ref.step_id)?.size ?? 0;
      const r = await reserveBudget(ctx, agentId, amount, { ...ref, run_id: runId }, minimum);
      if (!r.ok) return r;
      const ids = byStep.get(ref.step_id) ?? new Set<string>();
      byStep.set(ref.step_id, ids.add(r.reservation_id));
      return { ...r, issued: before };
    },
    async commit(id, actual) {
      stageBudgetCommit(ctx, runId, id, actual);
    },
  };
}

export function contractsPort(ctx: TeamsContext): ContractsPort {
  return {
    async get(id) {
      const k = await getContract(ctx, id);
      return k ? { id: k.contract_id, rules: k.rules } : undefined;
    },
  };
}

/** Every port a crew run needs except those driveRun binds (approvals are the runs module's). */
export function crewPorts(
  ctx: TeamsContext,
  runId: string,
  workspaceId: string,
  onBehalf?: { requester: string; crewId?: string },
  fresh = false,
): DrivePorts {
  return {
    model: ctx.ai.modelPort(runId),
    tools: tracedTools(ctx.core.traces, toolsPort(ctx, workspaceId, onBehalf, runId)),
    approvals: ctx.runs.approvalsPort(runId),
    budget: budgetPort(ctx, runId, fresh),
    contracts: contractsPort(ctx),
  };
}
