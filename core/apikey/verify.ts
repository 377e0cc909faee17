/**
 * The one judgement of a presented API key, shared by the cell (against its
 * store) and the edge (against a signed records bundle): same record, same
 * presented hash, same context, same answer.
 *
 * Decision order (first failing row wins):
 *
 * | # | check                                               | result                                |
 * |---|-----------------------------------------------------|---------------------------------------|
 * | 1 | no record, or the hash matches none of its hashes    | unauthorized `unknown_key`            |
 * | 2 | key status is not `active`                           | unauthorized `revoked`                |
 * | 3 | owner status is not `active`                         | unauthorized `owner_inactive`         |
 * | 4 | `expires_at` set and `now >= expires_at`             | unauthorized `expired`                |
 * | 5 | matched hash has `not_after` and `now >= not_after`  | unauthorized `grace_elapsed` (a previous secret) or `expired` (the current one) |
 * | 6 | `allowed_ips` set and the caller IP matches no rule  | forbidden `ip_not_allowed`            |
 * | 7 | `allowed_regions` set and the region is not listed   | forbidden `region_not_allowed`        |
 * | - | otherwise                                            | ok, effective = owner permissions ∩ scopes |
 *
 * `hashes[0]` is the current secret; any later entry is a rotated previous
 * secret, valid until its `not_after` (exclusive). The presented hash is
 * compared with every entry in constant time, without stopping at a match.
 */
import { effectiveAuthority } from '../authority/scopes.ts';
import { constantTimeEqual } from './hash.ts';
import { ipAllowed, regionAllowed } from './network.ts';

export type KeyStatus = 'active' | 'revoked' | 'soft_deleted' | 'purged';
export type OwnerStatus = 'active' | 'archived' | 'deleted' | 'purged';

/** What the cell stores (and the edge bundle carries) about one key. Times are ms since the epoch. */
export interface KeyRecord {
  key_id: string;
  owner_id: string;
  owner_status: OwnerStatus;
  status: KeyStatus;
  /** `[current, ...previous]`: SHA-256 hex of each secret and the instant it stops verifying (exclusive). */
  hashes: { hash: string; not_after: number | null }[];
  expires_at: number | null;
  owner_permissions: string[];
  scopes: string[];
  rate_limit_rpm: number | null;
  allowed_ips: string[];
  allowed_regions: string[];
}

export type KeyRefusalReason =
  | 'unknown_key'
  | 'revoked'
  | 'expired'
  | 'grace_elapsed'
  | 'owner_inactive'
  | 'ip_not_allowed'
  | 'region_not_allowed';

export type KeyVerdict =
  | { ok: true; effective: string[]; matched: 'current' | 'previous' }
  | { ok: false; code: 'unauthorized' | 'forbidden'; reason: KeyRefusalReason };

export interface KeyVerifyContext {
  /** ms since the epoch, from the caller's clock. */
  now: number;
  /** Caller IP as seen by the gateway, or null when unknown. */
  ip: string | null;
  /** Region the request is served from (the cell's or the edge's configured region). */
  region: string;
}

/**
 * A record's effective authority, worked out once per record object: records
 * are not changed once built (the cell caches them until a write to their
 * tables drops them; the edge's come from a signed bundle), and the gateway
 * judges the same record on every request presenting its key.
 */
const effective = new WeakMap<KeyRecord, string[]>();
function effectiveOf(record: KeyRecord): string[] {
  let e = effective.get(record);
  if (e === undefined) {
    e = effectiveAuthority(record.owner_permissions, record.scopes);
    effective.set(record, e);
  }
  return e;
}

const refuse = (code: 'unauthorized' | 'forbidden', reason: KeyRefusalReason): KeyVerdict => ({ ok: false, code, reason });

/** Judges a presented key (by the SHA-256 of its secret) against its record. See the decision table above. */
export function verifyPresentedKey(record: KeyRecord | undefined, presentedHash: string, ctx: KeyVerifyContext): KeyVerdict {
  if (record === undefined) return refuse('unauthorized', 'unknown_key');
  let matchedIndex = -1;
  for (let i = 0; i < record.hashes.length; i++) {
    // every entry is compared, so the time taken does not reveal which one matched
    const eq = constantTimeEqual(record.hashes[i]!.hash, presentedHash);
    if (eq && matchedIndex < 0) matchedIndex = i;
  }
  if (matchedIndex < 0) return refuse('unauthorized', 'unknown_key');
  if (record.status !== 'active') return refuse('unauthorized', 'revoked');
  if (record.owner_status !== 'active') return refuse('unauthorized', 'owner_inactive');
  if (record.expires_at !== null && ctx.now >= record.expires_at) return refuse('unauthorized', 'expired');
  const matched = record.hashes[matchedIndex]!;
  if (matched.not_after !== null && ctx.now >= matched.not_after) {
    return refuse('unauthorized', matchedIndex === 0 ? 'expired' : 'grace_elapsed');
  }
  if (!ipAllowed(ctx.ip, record.allowed_ips)) return refuse('forbidden', 'ip_not_allowed');
  if (!regionAllowed(ctx.region, record.allowed_regions)) return refuse('forbidden', 'region_not_allowed');
  return {
    ok: true,
    effective: effectiveOf(record),
    matched: matchedIndex === 0 ? 'current' : 'previous',
  };
}
