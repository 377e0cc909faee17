/**
 * How many tokens a model call reserves. A call asks for `max_tokens`; it
 * reserves `min(max_tokens, what is left)` of the seat's budget ceiling and
 * of the agent's budget ledger, and is refused only when what is left is
 * below the floor: MIN_MODEL_TOKENS, or `max_tokens` itself when that is
 * smaller. The model is then asked for at most the reserved tokens, so a
 * seat whose ceiling is below `max_tokens` still calls its model. One rule
 * for the engine's seat ceiling, the cell's ledger and the device's.
 */

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
