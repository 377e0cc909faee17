/**
 * A governed tool call: grant (allowed_tools), the governing contract's value
 * gate (every governing contract), permission mode (plan / ask / auto-read /
 * auto, waiting for a human approval where the mode asks), then the tool port. Memoized per step id.
 * A side-effecting call carries its effect key, and one found in flight after a crash is not
 * issued blindly again unless the tool declares it idempotent (effects.ts).
 */
import type { JsonObject } from '../../journal/record.ts';
import type { RunContext } from './context.ts';
import { VARS } from './context.ts';
import { isEngineRefusal } from '../refusal.ts';
import { fail, refuse, Stop } from './stop.ts';
import { withAttempts } from './attempts.ts';
import { isStepTimeout } from '../timeout.ts';
import type { StepPolicy } from '../policy.ts';
import { callEffect, isLostOutcome, lostOnTheWire, settleLostOutcome } from './effects.ts';
import { contentHash } from '../../canonical.ts';
import { tallyApproval } from '../approval-rule.ts';
import { decisionRecord, requesterRecord } from './approval.ts';

/** The retry reason of a failed tool call: tool_unreachable when the port says so (details.reason), else tool_error. */
function toolFailureReason(e: unknown): string | null {
  if (isEngineRefusal(e) || isStepTimeout(e)) return null;
  const reason = (e as { details?: { reason?: unknown } } | null)?.details?.reason;
  if (reason === 'cancelled') return null;
  return reason === 'tool_unreachable' ? 'tool_unreachable' : 'tool_error';
}

export async function governedToolCall(
  ctx: RunContext,
  seatId: string | null,
  stepId: string,
  name: string,
  args: JsonObject,
  policy: StepPolicy = {},
): Promise<unknown> {
  const seat = seatId !== null ? ctx.seat(seatId) : null;
  const authority = seat?.authority ?? null;
  const r = await ctx.memo(stepId, 'step', seatId, { tool: name, args }, async () => {
    const tools = ctx.ports.tools;
    if (authority !== null && !authority.allowed_tools.includes(name)) throw refuse('tool_not_granted', { tool: name, seat: seatId });
    const desc = tools?.describe(name);
    if (tools === undefined || desc === undefined) throw refuse('tool_unknown', { tool: name, seat: seatId });
    const data: JsonObject = { tool: name };
    // The value gate: every rule of every governing contract of the seat must hold.
    const contractIds = authority?.governing_contract_ids ?? [];
    for (const contractId of contractIds) {
      const contract = await ctx.contract(contractId);
      for (const rule of contract.rules) {
        const t = ctx.test(rule.expr, { tool: name, args, authority }, VARS.rule);
        if (!t.ok || !t.value) {
          const why = t.ok ? `rule ${rule.name} evaluated false` : `rule ${rule.name} failed (${t.code})`;
          const decision = { decision: 'refuse', gate: 'value', contract: contractId, rule: rule.name, tool: name, reason: why };
          await ctx.append('decision', `${stepId}/gate`, { tool: name, args }, decision, decision);
          throw refuse('gate_declined', { tool: name, seat: seatId, contract: contractId, rule: rule.name });
        }
      }
    }
    if (contractIds.length > 0) {
      data.gate = 'allow';
      data.contracts = contractIds;
    }
    // Permission mode (seatless tool nodes are built by the cell itself and run as auto).
    const mode = authority?.permission_mode ?? 'auto';
    if (mode === 'plan') throw refuse('tool_forbidden_by_mode', { tool: name, seat: seatId, mode });
    if (mode === 'ask' || (mode === 'auto-read' && desc.side_effects)) {
      const approvals = ctx.ports.approvals;
      if (approvals === undefined) throw refuse('approval_unavailable', { tool: name, step_id: stepId });
      // A decision approves exactly this call (the digest of {tool, args}) and counts as its chain (approval-rule.ts).
      const rule = { rule: 'quorum', approvers: [], quorum: 1, input_hash: contentHash({ tool: name, args }) };
      const t = tallyApproval(await approvals.decisions(stepId), rule, ctx.requester);
      if (t.rejected !== null) {
        const by = t.rejected;
        throw refuse('approval_rejected', {
          tool: name,
          step_id: stepId,
          by: by.principal,
          chain: by.chain ?? [by.principal],
          comment: by.comment ?? null,
        });
      }
      if (!t.approved) {
        await approvals.request?.(stepId, { kind: 'tool_call', ...rule, prompt: `tool ${name}`, due: null });
        throw new Stop('waiting', 'approval_pending', { tool: name }, { step_id: stepId, for: 'approval', wake_at: null });
      }
      data.approved_by = t.approvals.map((d) => d.principal).sort();
      data.approvals = t.approvals.map(decisionRecord);
      Object.assign(data, requesterRecord(ctx));
    }
    // A side-effecting call's effect key, the same on every issue; one lost in a crash waits for an operator.
    const effect = callEffect(ctx, desc, stepId, args);
    if (effect !== null) data.effect_key = effect.key;
    // The pin the call is held to (an imported tool): the journal says under which definition it acted, a
    // result recorded by an operator included (it is the result of a call issued under that pin).
    const pin = ctx.graph.tool_pins && Object.hasOwn(ctx.graph.tool_pins, name) ? ctx.graph.tool_pins[name]! : undefined;
    if (pin !== undefined) data.pin = pin;
    const settled =
      effect !== null && !effect.idempotent ? await settleLostOutcome(ctx, stepId, effect, { tool: name, seat: seatId }) : null;
    if (settled?.resolution !== undefined) data.resolution = settled.resolution;
    if (settled !== null && !settled.issue) return { output: settled.result, data };
    const callCtx = {
      run_id: ctx.runId,
      step_id: stepId,
      seat: seatId,
      agent_id: seat?.agent_id ?? null,
      authority,
      ...(policy.timeout_ms !== undefined ? { timeout_ms: policy.timeout_ms } : {}),
      ...(effect !== null ? { effect_key: effect.key } : {}),
      ...(pin !== undefined ? { tool_pin: pin } : {}),
    };
    const mark = effect !== null ? { key: effect.key, resolved: settled?.resolution !== undefined } : undefined;
    const once = async () => {
      Object.assign(data, await ctx.beginCall(stepId, 'tool', { tool: name, args }, mark));
      return tools.call(name, args, callCtx);
    };
    let out: unknown;
    try {
      const a = await withAttempts(ctx, stepId, 'tool', policy, { tool: name, args }, once, toolFailureReason);
      out = a.value;
      Object.assign(data, a.data);
    } catch (e) {
      if (e instanceof Stop) throw e;
      if (effect !== null && !effect.idempotent && isLostOutcome(e))
        throw await lostOnTheWire(ctx, stepId, effect, { tool: name, seat: seatId }, e);
      if (isEngineRefusal(e)) throw refuse(e.reason, { ...e.details, tool: name, seat: seatId });
      if (isStepTimeout(e)) throw fail('step_timeout', { tool: name, step_id: stepId, timeout_ms: e.timeout_ms }, e);
      throw fail('tool_error', { tool: name, step_id: stepId }, e);
    }
    // A tool that presented a credential for the run's requester names it (its id and hash, never the credential):
    // the step record carries it, so the journal shows which token went where.
    const onBehalf = typeof out === 'object' && out !== null ? (out as { on_behalf?: unknown }).on_behalf : undefined;
    if (typeof onBehalf === 'object' && onBehalf !== null && !Array.isArray(onBehalf)) data.on_behalf = onBehalf as JsonObject;
    // Which identity an imported tool's server saw (a delegated token's id, the source's client id, or none).
    const identity = typeof out === 'object' && out !== null ? (out as { identity?: unknown }).identity : undefined;
    if (typeof identity === 'object' && identity !== null && !Array.isArray(identity)) data.identity = identity as JsonObject;
    return { output: out, data };
  });
  return r.output;
}
