/**
 * Login sessions of the authorization and device pages: a random id in an
 * HttpOnly, SameSite=Lax cookie scoped to /oauth (Secure when the cell is
 * served over https), stored hashed with its CSRF token, 1 hour. Forms of a
 * session carry its CSRF token; the login form (before any session) uses a
 * double-submit cookie.
 */
import type { Context } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { hashSecret, constantTimeEqual } from '../../core/apikey/hash.ts';
import type { AppEnv, Cell } from '../context.ts';
import { getPrincipal, type Principal } from '../iam/principals.ts';
import { randomToken } from './issue.ts';
import { OAUTH, publicBase } from './settings.ts';

export const SESSION_COOKIE = 'cell_session';
export const LOGIN_CSRF_COOKIE = 'cell_login_csrf';

function cookieOpts(cell: Cell, maxAge: number) {
  return { path: '/oauth', httpOnly: true, sameSite: 'Lax' as const, secure: publicBase(cell).startsWith('https:'), maxAge };
}

export async function createSession(cell: Cell, c: Context<AppEnv>, principalId: string): Promise<void> {
  const id = randomToken(32);
  const now = cell.clock.now();
  await cell.store.write((tx) => {
    tx.run('DELETE FROM oauth_sessions WHERE expires_at < ?', [now]);
    tx.run('INSERT INTO oauth_sessions (id_hash, principal_id, csrf, created_at, expires_at) VALUES (?, ?, ?, ?, ?)',
      [hashSecret(id), principalId, randomToken(24), now, now + OAUTH.sessionTtlSeconds * 1000]);
  });
  setCookie(c, SESSION_COOKIE, id, cookieOpts(cell, OAUTH.sessionTtlSeconds));
}

/** The session's active principal and CSRF token, or null. */
export function currentSession(cell: Cell, c: Context<AppEnv>): { principal: Principal; csrf: string } | null {
  const id = getCookie(c, SESSION_COOKIE);
  if (!id || id.length > 100) return null;
  const r = cell.store.get<{ principal_id: string; csrf: string; expires_at: number }>(
    'SELECT principal_id, csrf, expires_at FROM oauth_sessions WHERE id_hash = ?', [hashSecret(id)]);
  if (!r || r.expires_at <= cell.clock.now()) return null;
  const p = getPrincipal(cell, r.principal_id);
  if (!p || p.status !== 'active') return null;
  return { principal: p, csrf: r.csrf };
}

export function csrfMatches(expected: string, got: string | undefined): boolean {
  return typeof got === 'string' && got.length > 0 && constantTimeEqual(hashSecret(got), hashSecret(expected));
}

/** The login form's double-submit token: reuses the cookie or sets a new one. */
export function loginCsrf(cell: Cell, c: Context<AppEnv>): string {
  const existing = getCookie(c, LOGIN_CSRF_COOKIE);
  if (existing && /^[A-Za-z0-9_-]{20,64}$/.test(existing)) return existing;
  const t = randomToken(24);
  setCookie(c, LOGIN_CSRF_COOKIE, t, cookieOpts(cell, 3600));
  return t;
}

/** Ends the request's session (server side and cookie). */
export async function endSession(cell: Cell, c: Context<AppEnv>): Promise<void> {
  const id = getCookie(c, SESSION_COOKIE);
  if (id && id.length <= 100) await cell.store.write((tx) => tx.run('DELETE FROM oauth_sessions WHERE id_hash = ?', [hashSecret(id)]));
  deleteCookie(c, SESSION_COOKIE, { path: '/oauth' });
}
