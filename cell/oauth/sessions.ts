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
import type { AppEnv } from '../context.ts';
import type { Principal } from '../iam/api.ts';
import { randomToken } from './issue.ts';
import type { OAuthContext } from './oauth-context.ts';
import * as repo from './repository.ts';
import { OAUTH, publicBase } from './settings.ts';

export const SESSION_COOKIE = 'cell_session';
export const LOGIN_CSRF_COOKIE = 'cell_login_csrf';

function cookieOpts(ctx: OAuthContext, maxAge: number) {
  return { path: '/oauth', httpOnly: true, sameSite: 'Lax' as const, secure: publicBase(ctx.core.config).startsWith('https:'), maxAge };
}

export async function createSession(ctx: OAuthContext, c: Context<AppEnv>, principalId: string): Promise<void> {
  const id = randomToken(32);
  const csrf = randomToken(24);
  const now = ctx.core.clock.now();
  await ctx.core.store.write(async (tx) => {
    await repo.deleteExpiredSessions(tx, now);
    await repo.insertSession(tx, {
      id_hash: hashSecret(id),
      principal_id: principalId,
      csrf,
      created_at: now,
      expires_at: now + OAUTH.sessionTtlSeconds * 1000,
    });
  });
  setCookie(c, SESSION_COOKIE, id, cookieOpts(ctx, OAUTH.sessionTtlSeconds));
}

/** The session's active principal and CSRF token, or null. */
export async function currentSession(ctx: OAuthContext, c: Context<AppEnv>): Promise<{ principal: Principal; csrf: string } | null> {
  const id = getCookie(c, SESSION_COOKIE);
  if (!id || id.length > 100) return null;
  const r = await repo.sessionByHash(ctx.core.store, hashSecret(id));
  if (!r || r.expires_at <= ctx.core.clock.now()) return null;
  const p = await ctx.iam.principal(r.principal_id);
  if (p?.status !== 'active') return null;
  return { principal: p, csrf: r.csrf };
}

export function csrfMatches(expected: string, got: string | undefined): boolean {
  return typeof got === 'string' && got.length > 0 && constantTimeEqual(hashSecret(got), hashSecret(expected));
}

/** The login form's double-submit token: reuses the cookie or sets a new one. */
export function loginCsrf(ctx: OAuthContext, c: Context<AppEnv>): string {
  const existing = getCookie(c, LOGIN_CSRF_COOKIE);
  if (existing && /^[A-Za-z0-9_-]{20,64}$/.test(existing)) return existing;
  const t = randomToken(24);
  setCookie(c, LOGIN_CSRF_COOKIE, t, cookieOpts(ctx, 3600));
  return t;
}

/** Ends the request's session (server side and cookie). */
export async function endSession(ctx: OAuthContext, c: Context<AppEnv>): Promise<void> {
  const id = getCookie(c, SESSION_COOKIE);
  if (id && id.length <= 100) await ctx.core.store.write((tx) => repo.deleteSession(tx, hashSecret(id)));
  deleteCookie(c, SESSION_COOKIE, { path: '/oauth' });
}
