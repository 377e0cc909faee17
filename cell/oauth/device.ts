/**
 * Device authorization grant (RFC 8628) state: device codes (stored hashed),
 * short user codes `XXXX-XXXX` over 20 consonants (no vowels, so no words;
 * 20^8 ≈ 2.6e10 codes), approval by the authenticated session's principal
 * only, and the polling answers authorization_pending, slow_down,
 * access_denied, expired_token.
 */
import { hashSecret } from '../../core/apikey/hash.ts';
import { randomToken } from './issue.ts';
import { OAuthError } from './oauth-error.ts';
import type { OAuthContext } from './oauth-context.ts';
import * as repo from './repository.ts';
import { OAUTH } from './settings.ts';

const ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ';

export function newUserCode(): string {
  const b = crypto.getRandomValues(new Uint8Array(8));
  const s = Array.from(b, (x) => ALPHABET[x % ALPHABET.length]).join(''); // 256 % 20 bias is negligible for 8 chars
  return `${s.slice(0, 4)}-${s.slice(4)}`;
}

/** Canonical form of what a user typed: uppercase, no separators. */
export function normalizeUserCode(s: string): string | null {
  const t = s.toUpperCase().replace(/[\s-]/g, '');
  if (!/^[BCDFGHJKLMNPQRSTVWXZ]{8}$/.test(t)) return null;
  return `${t.slice(0, 4)}-${t.slice(4)}`;
}

export async function startDeviceAuthorization(ctx: OAuthContext, clientId: string, scope: string[]) {
  const { store, clock } = ctx.core;
  const deviceCode = randomToken(32);
  const now = clock.now();
  const userCode = await store.write(async (tx) => {
    // A fresh user code on every attempt: this function may run again after a conflict.
    let userCode = newUserCode();
    for (let i = 0; i < 5 && (await repo.userCodeTaken(tx, userCode)); i++) userCode = newUserCode();
    await repo.deleteDeviceCodesExpiredBefore(tx, now - 3600_000);
    await repo.insertDeviceCode(tx, {
      device_code_hash: hashSecret(deviceCode),
      user_code: userCode,
      client_id: clientId,
      scope,
      created_at: now,
      expires_at: now + OAUTH.deviceCodeTtlSeconds * 1000,
      interval_s: OAUTH.deviceIntervalSeconds,
    });
    return userCode;
  });
  return { deviceCode, userCode, expiresIn: OAUTH.deviceCodeTtlSeconds, interval: OAUTH.deviceIntervalSeconds };
}

/** The pending request behind a user code, if it is still pending and unexpired. */
export async function pendingByUserCode(ctx: OAuthContext, userCode: string): Promise<{ clientId: string; scope: string[] } | null> {
  const r = await repo.deviceByUserCode(ctx.core.store, userCode);
  if (r?.status !== 'pending' || r.expires_at <= ctx.core.clock.now()) return null;
  return { clientId: r.client_id, scope: r.scope };
}

/** Approves or denies a pending user code as `subjectId` (the session's principal). False when not pending. */
export async function decideUserCode(ctx: OAuthContext, userCode: string, subjectId: string, approve: boolean): Promise<boolean> {
  const now = ctx.core.clock.now();
  return ctx.core.store.write((tx) => repo.decideDeviceCode(tx, userCode, approve ? 'approved' : 'denied', subjectId, now));
}

/** One poll of the token endpoint with a device code. Returns the approved grant or throws the RFC 8628 answer. */
export async function pollDeviceCode(
  ctx: OAuthContext,
  deviceCode: string,
  clientId: string,
): Promise<{ subjectId: string; scope: string[] }> {
  const { store, clock } = ctx.core;
  if (!deviceCode || deviceCode.length > 200) throw new OAuthError('invalid_grant', 'unknown device code');
  const hash = hashSecret(deviceCode);
  const r = await repo.deviceByHash(store, hash);
  if (!r || r.client_id !== clientId) throw new OAuthError('invalid_grant', 'unknown device code');
  const now = clock.now();
  if (r.status === 'used') throw new OAuthError('invalid_grant', 'device code already used');
  if (r.expires_at <= now) throw new OAuthError('expired_token', 'the device code expired; start again');
  if (r.status === 'denied') throw new OAuthError('access_denied', 'the user denied the request');
  if (r.status === 'pending') {
    const tooFast = r.last_poll_at !== null && now - r.last_poll_at < r.interval_s * 1000;
    await store.write((tx) => repo.notePoll(tx, hash, now, tooFast ? r.interval_s + 5 : r.interval_s));
    if (tooFast) throw new OAuthError('slow_down', `poll no more often than every ${r.interval_s + 5} s`);
    throw new OAuthError('authorization_pending', 'the user has not approved yet');
  }
  if (r.subject_id === null) throw new TypeError('an approved device code has no subject');
  if (!(await store.write((tx) => repo.claimDeviceCode(tx, hash)))) throw new OAuthError('invalid_grant', 'device code already used');
  return { subjectId: r.subject_id, scope: r.scope };
}
