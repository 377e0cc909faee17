/**
 * delegate: the manager's agent routes the work to exactly one of its reports.
 * The agent is asked to answer with a report id; the choice is a decision record
 * and selects the out-edge whose `when` equals it. An answer naming no report
 * refuses (delegation_unresolved). With one report, no model call is made.
 */
import type { DelegateConfig } from '../types.ts';
import { refuse } from '../internal/stop.ts';
import { modelCall, render } from '../internal/model.ts';
import type { Executor } from '../internal/step.ts';

export const delegate: Executor = async (ctx, step, input) => {
  const cfg = step.config as DelegateConfig;
  const seatId = step.seat ?? cfg.seat;
  let choice: string | undefined;
  if (cfg.reports.length === 1) choice = cfg.reports[0];
  else {
    const seat = ctx.seat(seatId);
    const menu = cfg.reports.map((r) => `- ${r}: ${ctx.graph.seats[r]?.role_label ?? r}`).join('\n');
    const resp = await modelCall(
      ctx,
      seatId,
      `${step.id}/model/0`,
      [
        { role: 'system', content: seat.system_prompt ?? `You are the ${seat.role_label}.` },
        {
          role: 'user',
          content: `Choose exactly one of your reports to handle this task. Answer with its id only.\n${menu}\n\nTask:\n${render(input)}`,
        },
      ],
      [],
      ctx.graph.limits.default_max_tokens,
    );
    const a = resp.content.trim();
    choice = cfg.reports.find((r) => r === a) ?? [...cfg.reports].sort((x, y) => y.length - x.length).find((r) => a.includes(r));
  }
  if (choice === undefined) throw refuse('delegation_unresolved', { step_id: step.id, seat: seatId });
  return { output: input, route: choice, decision: true, data: { decision: 'delegate', seat: seatId, choice } };
};
