/**
 * A seat's `tool_choice`: whether its agent step's first model call may,
 * must, or must not call a tool, as OpenAI-compatible providers take it
 * (`tool_choice`: `auto`, `none`, `required`, or one named function), so a
 * crew's behaviour does not hang on a small model's whim.
 *
 * - `auto` (the default, and what an absent choice means): the model decides;
 * - `none`: the first call is offered no tool;
 * - `required`: the first call must answer with a tool call (any granted tool);
 * - `{ name }`: the first call must call that tool (a catalog name).
 *
 * The choice binds the **first** model call of each agent step (round 0);
 * later rounds of the step are `auto`, so a step whose model was made to call
 * a tool can still answer (the OpenAI Agents SDK resets `tool_choice` after a
 * tool call for the same reason). It rides on the billet (part of the
 * formation hash, and of the graph on the seat's `agent:<billet>` node only
 * when authored; `auto` is the absence of a choice, so it never changes a
 * hash). The compiler refuses a choice the seat cannot honour (a named tool
 * not in its allowed_tools, `required` with no tool or in `plan` mode); the
 * engine refuses a run whose seat cannot offer the model what the choice
 * needs (`tool_choice_unavailable`), and fails the step when the model does
 * not honour it (`model_error`, problem `tool_choice_unmet`).
 */
import type { SeatAuthority } from './types.ts';

/** `auto`, `none`, `required`, or one named tool (catalog name). */
export type ToolChoice = 'auto' | 'none' | 'required' | { name: string };

const MAX_TOOL_NAME = 200;

/** The problem of a `tool_choice` value, or null when it is one. */
export function toolChoiceProblem(v: unknown): string | null {
  if (v === 'auto' || v === 'none' || v === 'required') return null;
  if (typeof v === 'object' && v !== null && !Array.isArray(v)) {
    const keys = Object.keys(v);
    const name = (v as { name?: unknown }).name;
    if (keys.length === 1 && typeof name === 'string' && name.length > 0 && name.length <= MAX_TOOL_NAME) return null;
  }
  return 'tool_choice must be auto, none, required, or { name: <a tool of the seat> }';
}

/** The canonical form a graph carries: undefined for `auto` (the default), else the choice (a named one as `{ name }`). */
export function canonicalToolChoice(v: ToolChoice | undefined): Exclude<ToolChoice, 'auto'> | undefined {
  if (v === undefined || v === 'auto') return undefined;
  return typeof v === 'string' ? v : { name: v.name };
}

/** True when the choice makes the model call a tool. */
export function toolChoiceForces(v: ToolChoice | undefined): v is 'required' | { name: string } {
  return v === 'required' || (typeof v === 'object' && v !== null);
}

/**
 * Why a seat cannot honour a choice, or null: a named tool the seat is not granted, or a forced call
 * by a seat that calls no tool (none granted, or `plan` mode).
 */
export function seatToolChoiceProblem(
  choice: ToolChoice | undefined,
  authority: Pick<SeatAuthority, 'allowed_tools' | 'permission_mode'>,
): string | null {
  if (!toolChoiceForces(choice)) return null;
  if (authority.permission_mode === 'plan') return 'a seat in plan mode calls no tool, so it cannot be made to call one';
  if (choice === 'required') return authority.allowed_tools.length === 0 ? 'tool_choice required, but the seat is granted no tool' : null;
  return authority.allowed_tools.includes(choice.name) ? null : `tool_choice names ${choice.name}, which the seat is not granted`;
}
