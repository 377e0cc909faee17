/**
 * The pages: `GET/POST /oauth/login` (cell-local users, scrypt passwords),
 * `GET/POST /oauth/authorize` (authorization request checks, consent screen
 * listing the scopes, code + state + iss on the redirect) and
 * `GET/POST /oauth/device` (the device-flow approval page). The approving
 * identity is always the session's principal, never a form field.
 */
import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { AppEnv } from '../context.ts';
import { getClient, GRANT_AUTHORIZATION_CODE, type ClientRecord } from './clients.ts';
import { DOCUMENT_CLIENT, resolveClient } from './client-metadata.ts';
import { SELF_REGISTERED } from './registration.ts';
import { createCode } from './codes.ts';
import { decideUserCode, normalizeUserCode, pendingByUserCode } from './device.ts';
import { formBody, readForm } from './form.ts';
import { esc, hidden, page, scopeList } from './html.ts';
import { isOAuthError } from './oauth-error.ts';
import type { OAuthContext } from './oauth-context.ts';
import { narrowScope, parseScope } from './scope.ts';
import { audienceFor } from './resource.ts';
import { issuerOf } from './settings.ts';
import { createSession, csrfMatches, currentSession, endSession, loginCsrf, LOGIN_CSRF_COOKIE } from './sessions.ts';
import { getCookie } from 'hono/cookie';

const TAG = 'OAuth pages';
const HTML = { description: 'HTML page', content: { 'text/html': { schema: { type: 'string' as const } } } };
const REDIRECT = { description: 'Redirect (303) to the client or to the login page' };
const PAGE_HEADERS = {
  'Cache-Control': 'no-store',
  'X-Frame-Options': 'DENY',
  'Content-Security-Policy': "default-src 'none'; style-src 'unsafe-inline'; form-action 'self' http: https:; frame-ancestors 'none'",
};

function html(c: Context<AppEnv>, body: string, status: 200 | 400 | 401 | 403 = 200) {
  return c.html(body, status, PAGE_HEADERS);
}

function errorPage(c: Context<AppEnv>, message: string, status: 400 | 401 | 403 = 400) {
  return html(c, page('Request refused', `<p class="err" id="error">${esc(message)}</p>`), status);
}

/** Only our own pages may be a return target (no open redirect). */
function safeReturn(to: string | undefined): string {
  return to && /^\/oauth\/(authorize|device)(\?|$)/.test(to) ? to : '/oauth/device';
}

interface AuthzRequest {
  client: ClientRecord;
  redirectUri: string;
  state: string | undefined;
  codeChallenge: string;
  scope: string[];
  /** The audience the request named (RFC 8707), canonical; null: none named (the cell's API). */
  resource: string | null;
}

/** Errors the user sees on our page (the client or redirect_uri cannot be trusted) vs errors sent back to the client. */
type Checked = { ok: true; req: AuthzRequest } | { ok: false; page: string } | { ok: false; redirect: string };

function redirectWith(ctx: OAuthContext, redirectUri: string, params: Record<string, string | undefined>): string {
  const u = new URL(redirectUri);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) u.searchParams.set(k, v);
  u.searchParams.set('iss', issuerOf(ctx.core.config));
  return u.toString();
}

async function checkAuthorizationRequest(ctx: OAuthContext, q: Record<string, string | undefined>): Promise<Checked> {
  const client = q['client_id'] ? await resolveClient(ctx, q['client_id']) : undefined;
  if (!client?.grant_types.includes(GRANT_AUTHORIZATION_CODE))
    return { ok: false, page: 'Unknown client, or a client that may not use the authorization code flow.' };
  const redirectUri = q['redirect_uri'];
  if (!redirectUri || !client.redirect_uris.includes(redirectUri))
    return { ok: false, page: 'redirect_uri does not exactly match a registered redirect URI.' };
  const state = q['state'];
  const back = (error: string, description: string) => ({
    ok: false as const,
    redirect: redirectWith(ctx, redirectUri, { error, error_description: description, state }),
  });
  if (q['response_type'] !== 'code') return back('unsupported_response_type', 'response_type must be code');
  if (q['code_challenge_method'] !== 'S256') return back('invalid_request', 'PKCE with code_challenge_method S256 is required');
  const challenge = q['code_challenge'];
  if (!challenge || !/^[A-Za-z0-9_-]{43}$/.test(challenge))
    return back('invalid_request', 'code_challenge must be a base64url SHA-256 value');
  let scope: string[];
  try {
    scope = narrowScope(parseScope(q['scope']), client.scope);
  } catch (e) {
    if (isOAuthError(e)) return back('invalid_scope', e.description);
    throw e;
  }
  // RFC 8707 §2: the resource the token will be for is checked here and consented to with the scopes.
  const resource = q['resource'] === undefined ? null : await audienceFor(ctx, q['resource']);
  if (resource === null && q['resource'] !== undefined)
    return back('invalid_target', "resource must be this cell's API or MCP endpoint, or a resource it issues tokens for");
  return { ok: true, req: { client, redirectUri, state, codeChallenge: challenge, scope, resource } };
}

const AUTHZ_PARAMS = [
  'client_id',
  'redirect_uri',
  'response_type',
  'scope',
  'state',
  'code_challenge',
  'code_challenge_method',
  'resource',
] as const;

export function pageRoutes(app: OpenAPIHono<AppEnv>, ctx: OAuthContext): void {
  const { iam } = ctx;
  // --- login -------------------------------------------------------------
  const loginPage = (c: Context<AppEnv>, returnTo: string, error?: string) => {
    const csrf = loginCsrf(ctx, c);
    return html(
      c,
      page(
        'Sign in',
        `${error ? `<p class="err" id="error">${esc(error)}</p>` : ''}
<form method="post" action="/oauth/login">
${hidden({ csrf, return_to: returnTo })}
<label for="username">User name</label><input type="text" id="username" name="username" autocomplete="username" required>
<label for="password">Password</label><input type="password" id="password" name="password" autocomplete="current-password" required>
<button type="submit" id="login">Sign in</button>
</form>`,
      ),
      error ? 401 : 200,
    );
  };

  app.openapi(
    createRoute({
      method: 'get',
      path: '/oauth/login',
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Login page (cell-local users)',
      responses: { 200: HTML },
    }),
    (c) => loginPage(c, safeReturn(c.req.query('return_to'))),
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/oauth/login',
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Sign in; sets the session cookie and returns to the page that asked',
      request: {
        body: formBody({ username: 'user name', password: 'password', csrf: 'form token', return_to: 'page to return to' }, [
          'username',
          'password',
          'csrf',
        ]),
      },
      responses: { 303: REDIRECT, 401: HTML, 403: HTML },
    }),
    async (c) => {
      const f = await readForm(c);
      const returnTo = safeReturn(f['return_to']);
      const cookie = getCookie(c, LOGIN_CSRF_COOKIE);
      if (!cookie || !csrfMatches(cookie, f['csrf'])) return errorPage(c, 'The form expired; reload the page and sign in again.', 403);
      const p =
        f['username'] && f['password'] ? await iam.verifyUserPassword(f['username'].slice(0, 100), f['password'].slice(0, 200)) : null;
      if (!p) return loginPage(c, returnTo, 'Wrong user name or password.');
      await createSession(ctx, c, p.id);
      return c.redirect(returnTo, 303);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/oauth/logout',
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Sign out: ends the session',
      request: { body: formBody({ csrf: 'session form token' }, ['csrf']) },
      responses: { 200: HTML, 403: HTML },
    }),
    async (c) => {
      const f = await readForm(c);
      const s = await currentSession(ctx, c);
      if (s && !csrfMatches(s.csrf, f['csrf'])) return errorPage(c, 'The form expired; start again.', 403);
      await endSession(ctx, c);
      return html(c, page('Signed out', '<p id="result">You are signed out.</p>'));
    },
  );

  // --- authorization code ----------------------------------------------------
  app.openapi(
    createRoute({
      method: 'get',
      path: '/oauth/authorize',
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Authorization endpoint: checks the request, signs the user in, shows the consent screen',
      responses: { 200: HTML, 303: REDIRECT, 400: HTML },
    }),
    async (c) => {
      const q = Object.fromEntries(AUTHZ_PARAMS.map((k) => [k, c.req.query(k)]));
      const checked = await checkAuthorizationRequest(ctx, q);
      if (!checked.ok) return 'page' in checked ? errorPage(c, checked.page) : c.redirect(checked.redirect, 303);
      const s = await currentSession(ctx, c);
      if (!s) {
        const url = new URL(c.req.url);
        return c.redirect(`/oauth/login?return_to=${encodeURIComponent(url.pathname + url.search)}`, 303);
      }
      const { req } = checked;
      const held = await iam.permissionsOf(s.principal);
      const granted = (() => {
        try {
          return narrowScope(req.scope, held);
        } catch {
          return null;
        }
      })();
      if (!granted)
        return c.redirect(
          redirectWith(ctx, req.redirectUri, {
            error: 'invalid_scope',
            error_description: 'none of the requested scopes is within your authority',
            state: req.state,
          }),
          303,
        );
      return html(
        c,
        page(
          'Approve access',
          `<p>Signed in as <b id="who">${esc(s.principal.name)}</b>.</p>
<p><b id="client">${esc(req.client.name)}</b> asks for these permissions${
            req.resource ? ` at <b id="resource">${esc(req.resource)}</b>` : ''
          }:</p>
${await clientOrigin(ctx, req.client, req.redirectUri)}
${scopeList(granted)}
<form method="post" action="/oauth/authorize">
${hidden({ ...q, csrf: s.csrf })}
<button type="submit" name="decision" value="approve" id="approve">Approve</button>
<button type="submit" name="decision" value="deny" id="deny">Deny</button>
</form>`,
        ),
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/oauth/authorize',
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Consent decision: redirects to the client with code, state and iss (or error=access_denied)',
      request: {
        body: formBody(
          {
            decision: 'approve | deny',
            csrf: 'session form token',
            client_id: '',
            redirect_uri: '',
            response_type: '',
            scope: '',
            state: '',
            code_challenge: '',
            code_challenge_method: '',
            resource: '',
          },
          ['decision', 'csrf'],
        ),
      },
      responses: { 303: REDIRECT, 400: HTML, 401: HTML, 403: HTML },
    }),
    async (c) => {
      const f = await readForm(c);
      const s = await currentSession(ctx, c);
      if (!s) return errorPage(c, 'Sign in first.', 401);
      if (!csrfMatches(s.csrf, f['csrf'])) return errorPage(c, 'The form expired; start again.', 403);
      const q = Object.fromEntries(AUTHZ_PARAMS.map((k) => [k, f[k]]));
      const checked = await checkAuthorizationRequest(ctx, q);
      if (!checked.ok) return 'page' in checked ? errorPage(c, checked.page) : c.redirect(checked.redirect, 303);
      const { req } = checked;
      if (f['decision'] !== 'approve') {
        return c.redirect(
          redirectWith(ctx, req.redirectUri, {
            error: 'access_denied',
            error_description: 'the user denied the request',
            state: req.state,
          }),
          303,
        );
      }
      let granted: string[];
      try {
        granted = narrowScope(req.scope, await iam.permissionsOf(s.principal));
      } catch {
        return c.redirect(redirectWith(ctx, req.redirectUri, { error: 'invalid_scope', state: req.state }), 303);
      }
      const code = await createCode(ctx, {
        clientId: req.client.client_id,
        subjectId: s.principal.id,
        redirectUri: req.redirectUri,
        scope: granted,
        codeChallenge: req.codeChallenge,
        resource: req.resource,
      });
      return c.redirect(redirectWith(ctx, req.redirectUri, { code, state: req.state }), 303);
    },
  );

  // --- device flow approval ---------------------------------------------
  app.openapi(
    createRoute({
      method: 'get',
      path: '/oauth/device',
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Device approval page: enter the user code shown on the device',
      responses: { 200: HTML, 303: REDIRECT },
    }),
    async (c) => {
      const s = await currentSession(ctx, c);
      const url = new URL(c.req.url);
      if (!s) return c.redirect(`/oauth/login?return_to=${encodeURIComponent(url.pathname + url.search)}`, 303);
      const typed = c.req.query('user_code');
      const code = typed ? normalizeUserCode(typed) : null;
      const pending = code ? await pendingByUserCode(ctx, code) : null;
      const client = pending ? await getClient(ctx, pending.clientId) : undefined;
      const what =
        pending && client
          ? `<p><b id="client">${esc(client.name)}</b> asks for:</p>${await clientOrigin(ctx, client, null)}${scopeList(pending.scope)}`
          : '';
      return html(
        c,
        page(
          'Connect a device',
          `<p>Signed in as <b id="who">${esc(s.principal.name)}</b>.</p>${what}
<form method="post" action="/oauth/device">
${hidden({ csrf: s.csrf })}
<label for="user_code">Code shown on the device</label><input type="text" id="user_code" name="user_code" value="${esc(code ?? typed ?? '')}" autocomplete="off" required>
<button type="submit" name="decision" value="approve" id="approve">Approve</button>
<button type="submit" name="decision" value="deny" id="deny">Deny</button>
</form>
<form method="post" action="/oauth/logout">${hidden({ csrf: s.csrf })}<button type="submit" id="logout">Sign out</button></form>`,
        ),
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/oauth/device',
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Approve or deny a device code as the signed-in user (identity from the session only)',
      request: {
        body: formBody({ user_code: 'code shown on the device', decision: 'approve | deny', csrf: 'session form token' }, [
          'user_code',
          'decision',
          'csrf',
        ]),
      },
      responses: { 200: HTML, 303: REDIRECT, 400: HTML, 401: HTML, 403: HTML },
    }),
    async (c) => {
      const f = await readForm(c);
      const s = await currentSession(ctx, c);
      if (!s) return errorPage(c, 'Sign in first.', 401);
      if (!csrfMatches(s.csrf, f['csrf'])) return errorPage(c, 'The form expired; start again.', 403);
      const code = f['user_code'] ? normalizeUserCode(f['user_code']) : null;
      const approve = f['decision'] === 'approve';
      if (!code || !(await decideUserCode(ctx, code, s.principal.id, approve))) return errorPage(c, 'Unknown or expired code.');
      return html(
        c,
        page(
          approve ? 'Device connected' : 'Request denied',
          `<p id="result">${approve ? 'Approved: you can return to your device.' : 'Denied.'}</p>`,
        ),
      );
    },
  );
}

/**
 * Who stands behind a client, beside its free-text name (which anyone with
 * oauth.clients.write chooses): the principal that registered it (or "this
 * cell" for a built-in client) and the host the answer goes back to.
 */
async function clientOrigin(ctx: OAuthContext, client: ClientRecord, redirectUri: string | null): Promise<string> {
  let host = '';
  if (redirectUri !== null) {
    try {
      host = new URL(redirectUri).host || redirectUri;
    } catch {
      host = redirectUri;
    }
  }
  const back = redirectUri !== null ? `; you will be sent back to <b id="redirect-host">${esc(host)}</b>` : '';
  // Clients nobody registered: their name is their own word.
  if (client.created_by === SELF_REGISTERED || client.created_by === DOCUMENT_CLIENT) {
    const how =
      client.created_by === SELF_REGISTERED
        ? 'registered itself (dynamic client registration)'
        : `describes itself in a document at <b id="document-host">${esc(new URL(client.client_id).host)}</b>`;
    return `<p class="origin err" id="unverified"><b>Unverified client</b>: it ${how}; no one here vouches for its name${back}.</p>`;
  }
  const registrant =
    client.created_by === 'system'
      ? 'this cell (built-in client)'
      : ((await ctx.iam.principal(client.created_by))?.name ?? client.created_by);
  return `<p class="origin">Registered by <b id="registrant">${esc(registrant)}</b>${back}.</p>`;
}
