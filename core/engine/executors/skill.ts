/**
 * skill: runs a skill by its kind. tool: a governed tool call; transformer: a CEL
 * expression; chain: its steps in order; prompt, model, evaluator, classifier,
 * extractor: a model call by the seat's agent with the skill's prompt
 * (classifier: the answer must name one of `labels`).
 */
import type { JsonObject } from '../../journal/record.ts';
import type { SkillConfig, SkillSpec } from '../types.ts';
import type { RunContext } from '../internal/context.ts';
import { refuse } from '../internal/stop.ts';
import { modelCall, render } from '../internal/model.ts';
import { governedToolCall } from '../internal/tool.ts';
import { asArgs, type Executor } from '../internal/step.ts';
import type { StepPolicy } from '../policy.ts';

const MAX_CHAIN = 16;

async function runSkill(
  ctx: RunContext,
  seatId: string | null,
  stepId: string,
  skill: SkillSpec,
  input: unknown,
  depth: number,
  policy: StepPolicy,
): Promise<unknown> {
  const def = (skill.definition ?? {}) as JsonObject;
  switch (skill.skill_kind) {
    case 'tool': {
      if (typeof def.tool !== 'string') throw refuse('invalid_graph', { problem: `skill ${skill.name}: definition.tool missing` });
      const args = typeof def.args === 'object' && def.args !== null && !Array.isArray(def.args) ? (def.args as JsonObject) : asArgs(input);
      return governedToolCall(ctx, seatId, `${stepId}/tool`, def.tool, args, policy);
    }
    case 'transformer':
      if (typeof def.expr === 'string') return ctx.value(def.expr, { input });
      break;
    case 'chain': {
      const steps = Array.isArray(def.steps) ? (def.steps as SkillSpec[]) : [];
      if (depth > 2 || steps.length > MAX_CHAIN)
        throw refuse('invalid_graph', { problem: `skill ${skill.name}: chain too long or too deep` });
      let v = input;
      for (let k = 0; k < steps.length; k++) v = await runSkill(ctx, seatId, `${stepId}/${k}`, steps[k]!, v, depth + 1, policy);
      return v;
    }
    default:
      break;
  }
  if (seatId === null) throw refuse('seat_unbound', { skill: skill.name });
  const labels = Array.isArray(def.labels) ? (def.labels as unknown[]).filter((l): l is string => typeof l === 'string') : [];
  const instruction =
    (typeof def.prompt === 'string' ? def.prompt : `Apply the ${skill.skill_kind} skill "${skill.name}".`) +
    (skill.skill_kind === 'classifier' && labels.length > 0 ? ` Answer with exactly one of: ${labels.join(', ')}.` : '');
  const seat = ctx.seat(seatId);
  const resp = await modelCall(
    ctx,
    seatId,
    `${stepId}/model/0`,
    [
      { role: 'system', content: seat.system_prompt ?? `You are the ${seat.role_label}.` },
      { role: 'user', content: `${instruction}\n\n${render(input)}` },
    ],
    [],
    ctx.graph.limits.default_max_tokens,
    policy,
  );
  if (skill.skill_kind === 'classifier' && labels.length > 0) {
    const a = resp.content.trim().toLowerCase();
    const hit = labels.find((l) => l.toLowerCase() === a) ?? labels.find((l) => a.includes(l.toLowerCase()));
    if (hit === undefined) throw refuse('classification_unresolved', { skill: skill.name });
    return hit;
  }
  return resp.content;
}

export const skill: Executor = async (ctx, step, input) => {
  const cfg = step.config as SkillConfig;
  const out = await runSkill(ctx, step.seat ?? null, step.id, cfg.skill, input, 0, cfg);
  return { output: out, data: { skill: cfg.skill.name, skill_kind: cfg.skill.skill_kind } };
};
