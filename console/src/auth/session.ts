/**
 * The signed-in session: who the console acts as, what it may do, and how it
 * sends a request. Secrets live only inside the closures built here (an
 * access token with its non-extractable DPoP key, or a pasted API key): in
 * memory, never in localStorage, sessionStorage, IndexedDB or a cookie, never
 * in a URL. Reloading the page or signing out forgets them.
 *
 * Who and what: an OAuth session knows its principal id (`sub`) and its
 * permissions (the granted `scope`, already narrowed to the user's roles at
 * consent). Both kinds ask `GET /api/public/v1/admin/whoami` when the cell has
 * it (principal and effective permissions); on a cell without it an API-key
 * session shows "unknown" and offers every action, and the API decides.
 */
import * as oauth from 'oauth4webapi';
import { grants } from '../../../core/authority/scopes.ts';

export interface Principal {
  id: string | null;
  name: string | null;
  kind: string | null;
  roles: string[] | null;
}

export interface RequestInit2 {
  headers?: Record<string, string>;
  body?: string;
  signal?: AbortSignal;
}

export interface Session {
  kind: 'oauth' | 'api_key';
  principal: Principal;
  /** Effective permission selectors when known; null when the cell cannot tell the console. */
  permissions: string[] | null;
  /** Milliseconds since the epoch when the credential stops working, when known. */
  expiresAt: number | null;
  /** Sends a request to this origin as the session (fresh DPoP proof for OAuth sessions). */
  request(method: string, path: string, init?: RequestInit2): Promise<Response>;
  /** Ends the session at the cell where it can (an OAuth token is revoked); never throws. */
  end(): Promise<void>;
}

/** True when the session may do `permission`; unknown permissions count as yes (the API still decides). */
export function can(session: Session | null, permission: string): boolean {
  if (!session) return false;
  if (session.permissions === null) return true;
  return grants(session.permissions, permission);
}

/** True when the console knows the session's permissions (and so hides what it may not do). */
export function knowsPermissions(session: Session | null): boolean {
  return session !== null && session.permissions !== null;
}

function absolute(path: string): URL {
  const u = new URL(path, window.location.origin);
  if (u.origin !== window.location.origin) throw new TypeError('the console only talks to its own cell');
  return u;
}

/** A session that presents a pasted API key as a bearer token. */
export function apiKeySession(secret: string): Session {
  const s: Session = {
    kind: 'api_key',
    principal: { id: null, name: null, kind: null, roles: null },
    permissions: null,
    expiresAt: null,
    request(method, path, init = {}) {
      const u = absolute(path);
      return fetch(u, {
        method,
        headers: { ...init.headers, authorization: `Bearer ${secret}` },
        ...(init.body !== undefined ? { body: init.body } : {}),
        ...(init.signal ? { signal: init.signal } : {}),
        credentials: 'omit',
        cache: 'no-store',
        redirect: 'error',
      });
    },
    end: () => Promise.resolve(),
  };
  return s;
}

/** Reads the claims of our own access token (display only; the cell verifies it on every request). */
function tokenClaims(token: string): Record<string, unknown> {
  try {
    const part = token.split('.')[1] ?? '';
    const b64 = part
      .replace(/-/g, '+')
      .replace(/_/g, '/')
      .padEnd(Math.ceil(part.length / 4) * 4, '=');
    return JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0)))) as Record<string, unknown>;
  } catch {
    return {};
  }
}

/**
 * A session for a DPoP-bound access token: every request carries a fresh proof
 * signed by `dpop`'s key (oauth4webapi), `Authorization: DPoP <token>`.
 */
export function oauthSession(
  token: oauth.TokenEndpointResponse,
  dpop: oauth.DPoPHandle,
  insecure: boolean,
  revoke: (accessToken: string) => Promise<void>,
  now = Date.now(),
): Session {
  const claims = tokenClaims(token.access_token);
  const scope = typeof token.scope === 'string' ? token.scope.split(' ').filter(Boolean) : [];
  const accessToken = token.access_token;
  return {
    kind: 'oauth',
    principal: { id: typeof claims['sub'] === 'string' ? claims['sub'] : null, name: null, kind: null, roles: null },
    permissions: scope,
    expiresAt: typeof token.expires_in === 'number' ? now + token.expires_in * 1000 : null,
    async request(method, path, init = {}) {
      const u = absolute(path);
      try {
        return await oauth.protectedResourceRequest(accessToken, method, u, new Headers(init.headers), init.body ?? null, {
          DPoP: dpop,
          ...(init.signal ? { signal: init.signal } : {}),
          ...(insecure ? { [oauth.allowInsecureRequests]: true } : {}),
        });
      } catch (e) {
        // Every 401 of the cell carries WWW-Authenticate: hand the response back so callers read its envelope.
        if (e instanceof oauth.WWWAuthenticateChallengeError) return e.response;
        throw e;
      }
    },
    end: () => revoke(accessToken).catch(() => undefined),
  };
}

interface WhoAmI {
  principal?: { id?: unknown; name?: unknown; kind?: unknown; roles?: unknown };
  effective?: unknown;
  effective_permissions?: unknown;
}

/**
 * Fills in who the session is: `GET /admin/whoami` when the cell has it, else
 * (OAuth) the principal record when the session may read principals.
 * Resolves false when the credential is refused (401): the sign-in fails.
 */
export async function identify(session: Session): Promise<boolean> {
  const r = await session.request('GET', '/api/public/v1/admin/whoami', { headers: { accept: 'application/json' } });
  if (r.status === 401) return false;
  if (r.ok) {
    const w = (await r.json()) as WhoAmI;
    const p = w.principal ?? {};
    if (typeof p.id === 'string') session.principal.id = p.id;
    if (typeof p.name === 'string') session.principal.name = p.name;
    if (typeof p.kind === 'string') session.principal.kind = p.kind;
    if (Array.isArray(p.roles)) session.principal.roles = p.roles.filter((x): x is string => typeof x === 'string');
    const eff = Array.isArray(w.effective) ? w.effective : Array.isArray(w.effective_permissions) ? w.effective_permissions : null;
    if (eff) session.permissions = eff.filter((x): x is string => typeof x === 'string');
    return true;
  }
  if (session.kind === 'api_key') {
    // No whoami on this cell: any authenticated call tells a refused key (401) from a valid one.
    const probe = await session.request('GET', '/api/public/v1/admin/api-keys?limit=1', { headers: { accept: 'application/json' } });
    if (probe.status === 401) return false;
  } else if (session.principal.id && can(session, 'iam.principals.read')) {
    const pr = await session.request('GET', `/api/public/v1/admin/principals/${encodeURIComponent(session.principal.id)}`, {
      headers: { accept: 'application/json' },
    });
    if (pr.status === 401) return false;
    if (pr.ok) {
      const p = (await pr.json()) as { name?: unknown; kind?: unknown; roles?: unknown };
      if (typeof p.name === 'string') session.principal.name = p.name;
      if (typeof p.kind === 'string') session.principal.kind = p.kind;
      if (Array.isArray(p.roles)) session.principal.roles = p.roles.filter((x): x is string => typeof x === 'string');
    }
  }
  return true;
}
