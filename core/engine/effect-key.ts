/**
 * The effect key of a side-effecting call: the name under which whatever the
 * call does outside the run is done once. It is a pure function of the run id
 * and the call's step id, so every drive of the run (a retry under a step
 * policy, a re-issue after a crash, a restart, a takeover by another cell, an
 * operator's "retry") computes the same key, and the call's `intent` record
 * carries it before the call leaves. A fork is a new run, so it gets new keys.
 *
 * The key is a UUID version 8 (RFC 9562 §5.8) made by name, as RFC 9562
 * Appendix B.2 makes one from SHA-256: the first 128 bits of
 * SHA-256(`agent-cell effect key v1` LF run_id LF step_id), with the version and
 * variant bits set. So a service that expects a UUID in `Idempotency-Key`
 * (draft-ietf-httpapi-idempotency-key-header) takes it as it is.
 *
 * An MCP tool call carries it in its request's `_meta` under
 * `EFFECT_KEY_META`, a prefixed name as the MCP specification's `_meta`
 * naming rules ask of an implementation's own keys: a prefix of dot-separated
 * labels (each a letter first, a letter or digit last, hyphens between) and a
 * slash, outside the prefixes reserved for MCP (no `mcp` or
 * `modelcontextprotocol` label), then a name alphanumeric at both ends
 * (test/core/engine/effects.test.ts checks it against those rules).
 */
import { sha256Hex } from '../canonical.ts';

const DOMAIN = 'agent-cell effect key v1';

/** The key of an MCP request's `_meta` that carries the call's effect key (docs/engine.md). */
export const EFFECT_KEY_META = 'dev.agent-cell/effect-key';

/**
 * The effect key of step `stepId` of run `runId`.
 * @example effectKey('run_0123456789abcdef0123', 'agent:a/tool/0.0') // 'xxxxxxxx-xxxx-8xxx-yxxx-xxxxxxxxxxxx'
 */
export function effectKey(runId: string, stepId: string): string {
  const h = sha256Hex(`${DOMAIN}\n${runId}\n${stepId}`).slice(0, 32).split('');
  h[12] = '8'; // version 8
  h[16] = ((parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16); // variant 10
  const x = h.join('');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}
