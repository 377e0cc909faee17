/**
 * Device authorization grant (RFC 8628) state: device codes (stored hashed),
 * short user codes `XXXX-XXXX` over 20 consonants (no vowels, so no words;
 * 20^8 ≈ 2.6e10 codes), approval by the authenticated session's principal
 * only, and the polling answers authorization_pending, slow_down,
 * access_denied, expired_token.
 */
import { hashSecret } from '../../core/apikey/hash.ts';
import type { Cell } from '../context.ts';
import { randomToken } from './issue.ts';
import { OAuthError } from './oauth-error.ts';
import { OAUTH } from './settings.ts';

const ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ';

interface DeviceRow {
  device_code_hash: string; user_code: string; client_id: string; scope: string; created_at: number; expires_at: number;
  interval_s: number; last_poll_at: number | null; status: 'pending' | 'approved' | 'denied' | 'used'; subject_id: string | null;
}

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

export async function startDeviceAuthorization(cell: Cell, clientId: string, scope: string[]) {
  const deviceCode = randomToken(32);
  const now = cell.clock.now();
  let userCode = newUserCode();
  await cell.store.write((tx) => {
    for (let i = 0; i < 5 && tx.get('SELECT 1 AS x FROM oauth_device_codes WHERE user_code = ?', [userCode]); i++) userCode = newUserCode();
    tx.run('DELETE FROM oauth_device_codes WHERE expires_at < ?', [now - 3600_000]);
    tx.run(`INSERT INTO oauth_device_codes (device_code_hash, user_code, client_id, scope, created_at, expires_at, interval_s, last_poll_at, status, subject_id)
      VALUES (?, ?, ?, ?, ?, ?, ?, NULL, 'pending', NULL)`,
    [hashSecret(deviceCode), userCode, clientId, JSON.stringify(scope), now, now + OAUTH.deviceCodeTtlSeconds * 1000, OAUTH.deviceIntervalSeconds]);
  });
  return { deviceCode, userCode, expiresIn: OAUTH.deviceCodeTtlSeconds, interval: OAUTH.deviceIntervalSeconds };
}

/** The pending request behind a user code, if it is still pending and unexpired. */
export function pendingByUserCode(cell: Cell, userCode: string): { clientId: string; scope: string[] } | null {
  const r = cell.store.get<DeviceRow & Record<string, never>>('SELECT * FROM oauth_device_codes WHERE user_code = ?', [userCode]) as DeviceRow | undefined;
  if (!r || r.status !== 'pending' || r.expires_at <= cell.clock.now()) return null;
  return { clientId: r.client_id, scope: JSON.parse(r.scope) as string[] };
}

/** Approves or denies a pending user code as `subjectId` (the session's principal). False when not pending. */
export async function decideUserCode(cell: Cell, userCode: string, subjectId: string, approve: boolean): Promise<boolean> {
  const now = cell.clock.now();
  const n = await cell.store.write((tx) => tx.run(
    "UPDATE oauth_device_codes SET status = ?, subject_id = ? WHERE user_code = ? AND status = 'pending' AND expires_at > ?",
    [approve ? 'approved' : 'denied', subjectId, userCode, now]).changes);
  return n === 1;
}

/** One poll of the token endpoint with a device code. Returns the approved grant or throws the RFC 8628 answer. */
export async function pollDeviceCode(cell: Cell, deviceCode: string, clientId: string): Promise<{ subjectId: string; scope: string[] }> {
  if (!deviceCode || deviceCode.length > 200) throw new OAuthError('invalid_grant', 'unknown device code');
  const hash = hashSecret(deviceCode);
  const r = cell.store.get<DeviceRow & Record<string, never>>('SELECT * FROM oauth_device_codes WHERE device_code_hash = ?', [hash]) as DeviceRow | undefined;
  if (!r || r.client_id !== clientId) throw new OAuthError('invalid_grant', 'unknown device code');
  const now = cell.clock.now();
  if (r.status === 'used') throw new OAuthError('invalid_grant', 'device code already used');
  if (r.expires_at <= now) throw new OAuthError('expired_token', 'the device code expired; start again');
  if (r.status === 'denied') throw new OAuthError('access_denied', 'the user denied the request');
  if (r.status === 'pending') {
    const tooFast = r.last_poll_at !== null && now - r.last_poll_at < r.interval_s * 1000;
    await cell.store.write((tx) => tx.run('UPDATE oauth_device_codes SET last_poll_at = ?, interval_s = ? WHERE device_code_hash = ?',
      [now, tooFast ? r.interval_s + 5 : r.interval_s, hash]));
    if (tooFast) throw new OAuthError('slow_down', `poll no more often than every ${r.interval_s + 5} s`);
    throw new OAuthError('authorization_pending', 'the user has not approved yet');
  }
  const n = await cell.store.write((tx) => tx.run("UPDATE oauth_device_codes SET status = 'used' WHERE device_code_hash = ? AND status = 'approved'", [hash]).changes);
  if (n !== 1) throw new OAuthError('invalid_grant', 'device code already used');
  return { subjectId: r.subject_id!, scope: JSON.parse(r.scope) as string[] };
}
