/**
 * Delegation chains of exchanged tokens (RFC 8693 token exchange): the shape
 * of the `act` claim (§4.1: the outermost `act` is the current actor, each
 * nested `act` an earlier one), `may_act` (§4.4: who the subject lets act for
 * it), and `links`, our claim that names every credential a derived token
 * was made from (`token:<jti>`, `api_key:<key id>`, `client:<client id>`), so
 * that revoking any link refuses the token. Pure: the token judge
 * (core/tokens/judge.ts) reads a token's chain with these functions on the
 * cell and on the edge alike.
 */
import { TokenError } from './errors.ts';

/** RFC 8693 §4.1 actor claim: the actor's `sub`, and the actor before it. */
export interface ActClaim {
  sub: string;
  act?: ActClaim;
  /** Context of an agent acting in a run (cell/oauth/tool-delegation.ts): not read by the judge. */
  run_id?: string;
  crew_id?: string;
}

/** The longest chain a cell issues by default (`--max-delegation-depth`). */
export const DEFAULT_MAX_ACT_DEPTH = 3;
/** Deeper than this no chain is read at all (a hostile shape, whatever a host's limit). */
export const HARD_MAX_ACT_DEPTH = 16;
/** Most links one token may name. */
export const MAX_LINKS = 64;

const LINK =
  /^(?:token:[A-Za-z0-9_-]{1,64}|api_key:key_[0-9a-f]{20}|client:(?:ocl|dcl)_[A-Za-z0-9_-]{1,64}|client:https:\/\/[!-~]{1,2000})$/;
const PRINCIPAL_ID = /^[A-Za-z0-9_.:-]{1,200}$/;

/** True when `s` names a credential a token may derive from. */
export function isLink(s: string): boolean {
  return LINK.test(s);
}

/**
 * The actors of a chain, the current one first (`act.sub`, then `act.act.sub`, …).
 * Throws `malformed_token` on anything but nested `{sub, act?}` objects.
 */
export function actorsOf(act: unknown): string[] {
  const out: string[] = [];
  let cur = act;
  while (cur !== undefined) {
    if (typeof cur !== 'object' || cur === null || Array.isArray(cur)) throw new TokenError('malformed_token', 'act must be an object');
    const sub = (cur as { sub?: unknown }).sub;
    if (typeof sub !== 'string' || !PRINCIPAL_ID.test(sub)) throw new TokenError('malformed_token', 'act.sub must name a principal');
    out.push(sub);
    if (out.length > HARD_MAX_ACT_DEPTH) throw new TokenError('malformed_token', 'act is nested too deep');
    cur = (cur as { act?: unknown }).act;
  }
  return out;
}

/** A chain of actors (current first) as the nested `act` claim; undefined for none. */
export function actClaimOf(actors: readonly string[]): ActClaim | undefined {
  let act: ActClaim | undefined;
  for (let i = actors.length - 1; i >= 0; i--) act = act ? { sub: actors[i]!, act } : { sub: actors[i]! };
  return act;
}

/** The `links` claim: a list of credential names; throws `malformed_token` on anything else. */
export function linksOf(links: unknown): string[] {
  if (links === undefined) return [];
  if (!Array.isArray(links) || links.length > MAX_LINKS || !links.every((l) => typeof l === 'string' && isLink(l))) {
    throw new TokenError('malformed_token', 'links must name credentials');
  }
  return links as string[];
}

/** The principal a `may_act` claim (§4.4) lets act for the subject, or null when absent; throws on a malformed one. */
export function mayActOf(mayAct: unknown): string | null {
  if (mayAct === undefined) return null;
  if (typeof mayAct !== 'object' || mayAct === null || Array.isArray(mayAct))
    throw new TokenError('malformed_token', 'may_act must be an object');
  const sub = (mayAct as { sub?: unknown }).sub;
  if (typeof sub !== 'string') throw new TokenError('malformed_token', 'may_act.sub must name a principal');
  return sub;
}
