/**
 * How many tokens a model call reserves. A call asks for `max_tokens`; it
 * reserves `min(max_tokens, what is left)` of the seat's budget ceiling and
 * of the agent's budget ledger, and is refused only when what is left is
 * below the floor: MIN_MODEL_TOKENS, or `max_tokens` itself when that is
 * smaller. The model is then asked for at most the reserved tokens, so a
 * seat whose ceiling is below `max_tokens` still calls its model. One rule
 * for the engine's seat ceiling, the cell's ledger and the device's.
 *
 * A model call is charged what it consumed, failed or not: an answer its
 * usage (and what the port's own failed attempts before it consumed,
 * `failed_usage`); a failed call what its port reports on the error
 * (`withConsumed`), else, when part of its answer streamed, the fragments
 * streamed as output tokens (a provider streams about one token a fragment)
 * and its prompt estimated at one token per four characters; a call that
 * failed before anything streamed, nothing (a provider bills no such call).
 */
import type { ModelUsage } from './types.ts';

/** The fewest tokens worth a model call (a short answer); below it the call is refused. */
export const MIN_MODEL_TOKENS = 64;

/** The floor of a call asking for `requested` tokens. */
export function tokenFloor(requested: number): number {
  return Math.min(MIN_MODEL_TOKENS, requested);
}

/**
 * Tokens to reserve: `requested`, or less when only `left` remains; null when
 * `left` is below `minimum` (too little to be useful).
 * @example grantTokens(1024, 300, 64) // 300
 */
export function grantTokens(requested: number, left: number, minimum: number): number | null {
  const grant = Math.min(requested, Math.max(0, Math.floor(left)));
  return grant >= minimum && grant > 0 ? grant : null;
}

/** A rough token count of text: one token per four characters (the usual figure for English and code). */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

/** A prompt's estimated tokens: its messages' text (a message without text counts none). */
export function promptTokens(messages: readonly { content: string | null }[]): number {
  let n = 0;
  for (const m of messages) n += estimateTokens(typeof m.content === 'string' ? m.content : '');
  return n;
}

/** Marks `e`, the error a model call throws, with the tokens the call consumed before it failed. */
export function withConsumed<E extends object>(e: E, usage: ModelUsage): E {
  Object.defineProperty(e, 'consumed', {
    value: { input_tokens: usage.input_tokens, output_tokens: usage.output_tokens },
    enumerable: false,
  });
  return e;
}

/** The tokens a failed model call consumed as its port reported them (`withConsumed`), or null. */
export function consumedBy(e: unknown): ModelUsage | null {
  const c = typeof e === 'object' && e !== null ? (e as { consumed?: unknown }).consumed : undefined;
  if (typeof c !== 'object' || c === null) return null;
  const { input_tokens: i, output_tokens: o } = c as Record<string, unknown>;
  return Number.isSafeInteger(i) && Number.isSafeInteger(o) && (i as number) >= 0 && (o as number) >= 0
    ? { input_tokens: i as number, output_tokens: o as number }
    : null;
}

/**
 * What a failed model call is charged: what its port reported, else `fragments` streamed as output tokens
 * plus the prompt estimated (`messages`) when anything streamed, else 0.
 */
export function failedCallTokens(e: unknown, fragments: number, messages: readonly { content: string | null }[]): number {
  const c = consumedBy(e);
  if (c !== null) return c.input_tokens + c.output_tokens;
  return fragments > 0 ? fragments + promptTokens(messages) : 0;
}
