// Shared helpers of the oauth route tests (in-process cell, form posts).
import type { InProcess, TestResponse } from './inproc.ts';

export function form(
  t: InProcess,
  path: string,
  fields: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<TestResponse> {
  return t.request('POST', path, {
    rawBody: new URLSearchParams(fields).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
  });
}

export function basic(id: string, secret: string): Record<string, string> {
  return { authorization: `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}` };
}

export async function registerClient(t: InProcess, body: Record<string, unknown>): Promise<{ client_id: string; client_secret?: string }> {
  const r = await t.request('POST', '/api/public/v1/admin/oauth/clients', { token: t.adminKey, body });
  if (r.status !== 201) throw new Error(`register failed ${r.status} ${r.text}`);
  return r.body;
}

export async function createUser(t: InProcess, name: string, roles: string[], password = 'correct horse battery staple'): Promise<string> {
  const r = await t.request('POST', '/api/public/v1/admin/principals', {
    token: t.adminKey,
    body: { kind: 'user', name, roles, password },
  });
  if (r.status !== 201) throw new Error(`create user failed ${r.status} ${r.text}`);
  return r.body.id;
}

export async function createService(t: InProcess, name: string, roles: string[]): Promise<string> {
  const r = await t.request('POST', '/api/public/v1/admin/principals', { token: t.adminKey, body: { kind: 'service', name, roles } });
  if (r.status !== 201) throw new Error(`create service failed ${r.status} ${r.text}`);
  return r.body.id;
}

export function claimsOf(token: string): Record<string, any> {
  return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString());
}

/** A minimal cookie jar over the in-process request helper, for the login and consent pages. */
export function browserish(t: InProcess) {
  const jar = new Map<string, string>();
  const absorb = (r: TestResponse) => {
    const all = (r.headers as Headers & { getSetCookie?: () => string[] }).getSetCookie?.() ?? [];
    for (const sc of all) {
      const [kv] = sc.split(';');
      const i = kv!.indexOf('=');
      jar.set(kv!.slice(0, i).trim(), kv!.slice(i + 1).trim());
    }
    return r;
  };
  const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
  return {
    jar,
    async get(path: string) {
      return absorb(await t.request('GET', path, { headers: { cookie: cookie() } }));
    },
    async post(path: string, fields: Record<string, string>) {
      return absorb(await form(t, path, fields, { cookie: cookie() }));
    },
  };
}

/** Hidden input values of a page. */
export function hiddenFields(html: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) {
    out[m[1]!] = m[2]!
      .replace(/&amp;/g, '&')
      .replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'")
      .replace(/&lt;/g, '<')
      .replace(/&gt;/g, '>');
  }
  return out;
}

/** Signs in through the login page as `name` and returns the browser. */
export async function signIn(t: InProcess, name: string, password = 'correct horse battery staple', returnTo = '/oauth/device') {
  const b = browserish(t);
  const page = await b.get(`/oauth/login?return_to=${encodeURIComponent(returnTo)}`);
  const h = hiddenFields(page.text);
  const r = await b.post('/oauth/login', { csrf: h['csrf']!, return_to: h['return_to']!, username: name, password });
  if (r.status !== 303) throw new Error(`login failed ${r.status} ${r.text}`);
  return b;
}

export const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

/**
 * RFC 8693 token exchange performed by an independent client: oauth4webapi's
 * genericTokenEndpointRequest (its generic grant request) against the in-process cell (its fetch routed to the
 * app), client_secret_basic. Answers the processed token response, or the
 * OAuth error the cell gave.
 */
export async function o4wExchange(
  t: InProcess,
  client: { client_id: string; client_secret?: string },
  params: Record<string, string>,
  opts: { DPoP?: import('oauth4webapi').DPoPHandle } = {},
): Promise<{ ok: true; tokens: import('oauth4webapi').TokenEndpointResponse } | { ok: false; status: number; error: string }> {
  const oauth = await import('oauth4webapi');
  const base = t.modules.oauth.api.publicBase();
  const as: import('oauth4webapi').AuthorizationServer = {
    issuer: `service://${t.core.config.groupId}`,
    token_endpoint: `${base}/oauth/token`,
  };
  const options = {
    [oauth.allowInsecureRequests]: true,
    [oauth.customFetch]: async (url: string, init: RequestInit) =>
      t.app.request(url, init as RequestInit, { incoming: { socket: { remoteAddress: '127.0.0.1' } } } as never),
  };
  const res = await oauth.genericTokenEndpointRequest(
    as,
    { client_id: client.client_id },
    oauth.ClientSecretBasic(client.client_secret ?? ''),
    TOKEN_EXCHANGE,
    params,
    opts.DPoP ? { ...options, DPoP: opts.DPoP } : options,
  );
  const status = res.status;
  try {
    return { ok: true, tokens: await oauth.processGenericTokenEndpointResponse(as, { client_id: client.client_id }, res) };
  } catch (e) {
    if (e instanceof oauth.ResponseBodyError) return { ok: false, status, error: e.error };
    throw e;
  }
}
