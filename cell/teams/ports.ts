/**
 * The cell's implementations of the engine's ports for a crew run: the model
 * (the agent's provider, through the AI module), the governed tool catalog
 * (through the tools module), approvals (the runs module's), budget ledgers,
 * and governing contracts. Journal, clock, cancellation and recorded steps
 * are bound by the runs module's driveRun.
 *
 * Tool names travel to the model with `.` spelled `__` (function names of the
 * Chat Completions protocol allow only [A-Za-z0-9_-]); answers in either
 * spelling map back to the catalog name.
 */
import { EngineRefusal } from '../../core/engine/refusal.ts';
import { StepTimeout } from '../../core/engine/timeout.ts';
import type {
  BudgetPort,
  ContractsPort,
  ModelCallOptions,
  ModelPort,
  ModelRequest,
  ModelResponse,
  ToolsPort,
} from '../../core/engine/types.ts';
import type { JsonObject } from '../../core/journal/record.ts';
import { isServiceError } from '../../core/errors.ts';
import { relayedReason } from '../../core/reasons.ts';
import { stepDeadline } from '../../runtime/step-deadline.ts';
import type { ChatDelta, ChatMessage as WireMessage, ToolSpec } from '../ai/openai-client.ts';
import type { DrivePorts } from '../runs/drive.ts';
import { getAgent, hasLedger, providerFor, reserveBudget, stageBudgetCommit } from './agents.ts';
import type { TeamsContext } from './context.ts';
import { getContract } from './resources.ts';
import { tracedTools } from './tool-span.ts';

export const toWireName = (n: string) => n.replace(/\./g, '__');
export const fromWireName = (n: string) => n.replace(/__/g, '.');

/**
 * The model port of a run: the agent's provider over the OpenAI-compatible
 * client (or the local runtime). With `runId`, each call carries the abort
 * signal of this process's driver of the run, so a cancel interrupts a slow
 * provider at once (the engine then ends the run `cancelled`).
 */
export function modelPort(ctx: TeamsContext, runId?: string): ModelPort {
  return {
    async complete(req: ModelRequest, opts?: ModelCallOptions): Promise<ModelResponse> {
      // Every store read of the call comes before its request leaves (ai.call reads the provider and
      // its secret first): a store outage meanwhile is waited out here, not taken for a call in flight.
      return runId === undefined ? call(req, opts) : ctx.runs.beforeItLeaves(runId, () => call(req, opts));
    },
  };
  async function call(req: ModelRequest, opts?: ModelCallOptions): Promise<ModelResponse> {
    const agent = await getAgent(ctx, req.agent.id);
    if (!agent) throw new EngineRefusal('agent_unknown', 'the seat has no agent', { agent_id: req.agent.id });
    const chosen = await providerFor(ctx, agent);
    if (!chosen) throw new EngineRefusal('no_provider', 'no model provider is registered', { agent_id: agent.agent_id });
    const messages: WireMessage[] = req.messages.map((m) => {
      const w: WireMessage = { role: m.role, content: m.content };
      if (m.tool_call_id !== undefined) w.tool_call_id = m.tool_call_id;
      if (m.tool_calls?.length) {
        w.tool_calls = m.tool_calls.map((c) => ({
          id: c.id,
          type: 'function' as const,
          function: { name: toWireName(c.name), arguments: JSON.stringify(c.arguments) },
        }));
      }
      return w;
    });
    const tools: ToolSpec[] = req.tools.map((t) => ({
      type: 'function',
      function: { name: toWireName(t.name), description: t.description, parameters: t.parameters },
    }));
    // The step's timeout cancels the call in flight (the provider sees its connection closed).
    const driver = runId === undefined ? undefined : ctx.runs.driverSignal(runId);
    const deadline = req.timeout_ms !== undefined ? AbortSignal.timeout(req.timeout_ms) : undefined;
    const signal = deadline && driver ? AbortSignal.any([driver, deadline]) : (deadline ?? driver);
    try {
      const r = await ctx.ai.call(
        chosen.id,
        {
          ...(req.agent.model ? { model: req.agent.model } : {}),
          messages,
          ...(tools.length ? { tools } : {}),
          max_tokens: req.max_tokens,
        },
        {
          signal,
          onDelta: liveDeltas(opts?.onDelta),
          agent: { id: agent.agent_id, name: agent.name },
          ...(chosen.row ? { provider: chosen.row } : {}),
        },
      );
      const out: ModelResponse = {
        content: r.content ?? '',
        usage: { input_tokens: r.usage.prompt_tokens, output_tokens: r.usage.completion_tokens },
      };
      if (r.tool_calls.length) {
        out.tool_calls = r.tool_calls.map((c) => {
          let args: unknown;
          try {
            args = JSON.parse(c.function.arguments);
          } catch {
            args = undefined;
          }
          return {
            id: c.id,
            name: fromWireName(c.function.name),
            arguments: (typeof args === 'object' && args !== null && !Array.isArray(args)
              ? args
              : { _unparsed: c.function.arguments }) as JsonObject,
          };
        });
      }
      return out;
    } catch (e) {
      if (deadline?.aborted && !driver?.aborted) throw new StepTimeout(req.timeout_ms!);
      if (isServiceError(e) && e.code === 'forbidden')
        throw new EngineRefusal(relayedReason(e, 'posture_forbidden'), e.message, { ...(e.details ?? {}) } as JsonObject);
      throw e;
    }
  }
}

/** The provider's fragments as the engine's (tool names back in the catalog's spelling). */
function liveDeltas(onDelta: ModelCallOptions['onDelta']): ((d: ChatDelta) => void) | undefined {
  if (onDelta === undefined) return undefined;
  return (d) => {
    const call = d.tool_call;
    onDelta({
      text: d.text,
      ...(call ? { tool_call: { ...call, ...(call.name !== undefined ? { name: fromWireName(call.name) } : {}) } } : {}),
      ...(d.restart ? { restart: true } : {}),
    });
  };
}

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
              authority: {
                egress_allowlist: a?.egress_allowlist ?? [],
                data_grant_ids: a?.data_grant_ids ?? [],
                clearance_level: a?.clearance_level ?? 0,
                compartments: a?.compartments ?? [],
              },
            },
            args,
            deadline.signal,
          ),
        );
      } catch (e) {
        if (isServiceError(e) && e.code === 'forbidden')
          throw new EngineRefusal(relayedReason(e, 'tool_refused'), e.message, { ...(e.details ?? {}) } as JsonObject);
        // Bad arguments go back to the model as the tool's answer, so it can correct itself.
        if (isServiceError(e) && e.code === 'invalid_request') return { error: 'invalid_request', message: e.message };
        throw e;
      }
    },
  };
}

/**
 * The budget port of a run: a reservation and its commit are rows of the run
 * that ride in its journal appends (the intent before the call, the step
 * record after it), so a model step is one commit after the call.
 */
export function budgetPort(ctx: TeamsContext, runId: string): BudgetPort {
  return {
    hasLedger: (agentId) => hasLedger(ctx, agentId),
    reserve: (agentId, amount, ref, minimum) => reserveBudget(ctx, agentId, amount, { ...ref, run_id: runId }, minimum),
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
): DrivePorts {
  return {
    model: modelPort(ctx, runId),
    tools: tracedTools(ctx.core.traces, toolsPort(ctx, workspaceId, onBehalf, runId)),
    approvals: ctx.runs.approvalsPort(runId),
    budget: budgetPort(ctx, runId),
    contracts: contractsPort(ctx),
  };
}
