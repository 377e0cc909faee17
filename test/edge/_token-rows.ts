// The token rows both end-to-end sides ask (tokens.e2e.test.ts): the real cell judging tokens addressed
// to it, the real dist/edge (inside a network namespace) judging their twins addressed to the device.
// Each row returns "status error reason"; the rows need only fetch, jose and oauth4webapi.
import { importJWK, SignJWT, type JWK } from 'jose';
import * as oauth from 'oauth4webapi';

export type Who = 'none' | 'robot' | 'intruder' | 'stranger';
export type TokenName = 'plain' | 'dpop' | 'cert' | 'both' | 'revoked' | 'leaver' | 'orphan' | 'narrow' | 'other_side';

export interface RowEnv {
  /** Origin of the server as the client addresses it, e.g. https://127.0.0.1:8443. */
  origin: string;
  /** Path of an operation that needs edge.read. */
  path: string;
  tokens: Record<TokenName, string>;
  /** The DPoP key the dpop and both tokens are bound to (JWKs, the private one with d). */
  dpopKey: { privateJwk: JsonWebKey; publicJwk: JsonWebKey };
  /** A fetch over TLS presenting the named client certificate (or none). */
  fetch(who: Who): typeof fetch;
}

export async function answerOf(r: Response): Promise<string> {
  const text = await r.text();
  let b: { error?: string; details?: { reason?: string } } = {};
  try {
    b = JSON.parse(text) as typeof b;
  } catch {
    /* not JSON: status alone */
  }
  return `${r.status} ${b.error ?? 'ok'}${b.details?.reason ? ` ${b.details.reason}` : ''}`;
}

async function sha256b64url(s: string): Promise<string> {
  return Buffer.from(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(s))).toString('base64url');
}

export async function dpopKeyPair(env: RowEnv): Promise<CryptoKeyPair> {
  const privateKey = await crypto.subtle.importKey('jwk', env.dpopKey.privateJwk, { name: 'Ed25519' }, false, ['sign']);
  const publicKey = await crypto.subtle.importKey('jwk', env.dpopKey.publicJwk, { name: 'Ed25519' }, true, ['verify']);
  return { privateKey, publicKey };
}

/** A DPoP proof made by hand (for replays and deliberate mismatches). */
export async function proof(env: RowEnv, token: string, o: { htm?: string; path?: string } = {}): Promise<string> {
  const key = await importJWK(env.dpopKey.privateJwk, 'EdDSA');
  const { kty, crv, x } = env.dpopKey.publicJwk;
  const pub = { kty, crv, x } as JWK;
  return new SignJWT({
    htm: o.htm ?? 'GET',
    htu: env.origin + (o.path ?? env.path),
    iat: Math.floor(Date.now() / 1000),
    jti: crypto.randomUUID(),
    ath: await sha256b64url(token),
  })
    .setProtectedHeader({ alg: 'EdDSA', typ: 'dpop+jwt', jwk: pub })
    .sign(key);
}

function call(env: RowEnv, who: Who, scheme: 'Bearer' | 'DPoP', token: string, dpop?: string): Promise<string> {
  return env
    .fetch(who)(env.origin + env.path, { headers: { authorization: `${scheme} ${token}`, ...(dpop ? { dpop } : {}) } })
    .then(answerOf);
}

/** oauth4webapi, an independent client, makes the protected request with its own DPoP proofs. */
export async function oauth4webapiRequest(
  env: RowEnv,
  url: string,
  o: { insecure?: boolean } = {},
): Promise<{ answer: string; challenge: oauth.WWWAuthenticateChallenge[] | null }> {
  const DPoP = oauth.DPoP({}, await dpopKeyPair(env));
  const opts: oauth.ProtectedResourceRequestOptions = {
    DPoP,
    [oauth.customFetch]: env.fetch('none') as unknown as NonNullable<oauth.ProtectedResourceRequestOptions[typeof oauth.customFetch]>,
    ...(o.insecure ? { [oauth.allowInsecureRequests]: true } : {}),
  };
  try {
    const r = await oauth.protectedResourceRequest(env.tokens.dpop, 'GET', new URL(url), undefined, undefined, opts);
    return { answer: await answerOf(r), challenge: null };
  } catch (e) {
    if (e instanceof oauth.WWWAuthenticateChallengeError) return { answer: await answerOf(e.response), challenge: e.cause };
    throw e;
  }
}

export const ROWS: [name: string, run: (env: RowEnv) => Promise<string>][] = [
  ['plain bearer', (env) => call(env, 'none', 'Bearer', env.tokens.plain)],
  ['plain bearer, scope without the permission', (env) => call(env, 'none', 'Bearer', env.tokens.narrow)],
  ["DPoP-bound, oauth4webapi's own proof", async (env) => (await oauth4webapiRequest(env, env.origin + env.path)).answer],
  [
    'DPoP-bound, replayed proof',
    async (env) => {
      const p = await proof(env, env.tokens.dpop);
      const first = await call(env, 'none', 'DPoP', env.tokens.dpop, p);
      return `${first} then ${await call(env, 'none', 'DPoP', env.tokens.dpop, p)}`;
    },
  ],
  [
    'DPoP-bound, proof for another method',
    async (env) => call(env, 'none', 'DPoP', env.tokens.dpop, await proof(env, env.tokens.dpop, { htm: 'DELETE' })),
  ],
  [
    'DPoP-bound, proof for another URI',
    async (env) => call(env, 'none', 'DPoP', env.tokens.dpop, await proof(env, env.tokens.dpop, { path: '/api/public/v1/elsewhere' })),
  ],
  ['DPoP-bound, no proof', (env) => call(env, 'none', 'DPoP', env.tokens.dpop)],
  ['cert-bound, right leaf', (env) => call(env, 'robot', 'Bearer', env.tokens.cert)],
  ['cert-bound, no leaf', (env) => call(env, 'none', 'Bearer', env.tokens.cert)],
  ['cert-bound, another CA-signed leaf', (env) => call(env, 'intruder', 'Bearer', env.tokens.cert)],
  ['cert-bound, a self-signed leaf', (env) => call(env, 'stranger', 'Bearer', env.tokens.cert)],
  ['both bindings, both hold', async (env) => call(env, 'robot', 'DPoP', env.tokens.both, await proof(env, env.tokens.both))],
  ['both bindings, no leaf', async (env) => call(env, 'none', 'DPoP', env.tokens.both, await proof(env, env.tokens.both))],
  ['both bindings, no proof', (env) => call(env, 'robot', 'DPoP', env.tokens.both)],
  ['revoked before the bundle', (env) => call(env, 'none', 'Bearer', env.tokens.revoked)],
  ['owner archived before the bundle', (env) => call(env, 'none', 'Bearer', env.tokens.leaver)],
  ['issued to a client deleted before the bundle', (env) => call(env, 'none', 'Bearer', env.tokens.orphan)],
  ["wrong audience (the other side's token)", (env) => call(env, 'none', 'Bearer', env.tokens.other_side)],
];

export const EXPECTED: Record<string, string> = {
  'plain bearer': '200 ok',
  'plain bearer, scope without the permission': '403 forbidden',
  "DPoP-bound, oauth4webapi's own proof": '200 ok',
  'DPoP-bound, replayed proof': '200 ok then 401 unauthorized dpop_replay',
  'DPoP-bound, proof for another method': '401 unauthorized dpop_htm_mismatch',
  'DPoP-bound, proof for another URI': '401 unauthorized dpop_htu_mismatch',
  'DPoP-bound, no proof': '401 unauthorized dpop_required',
  'cert-bound, right leaf': '200 ok',
  'cert-bound, no leaf': '401 unauthorized cert_required',
  'cert-bound, another CA-signed leaf': '401 unauthorized cert_mismatch',
  'cert-bound, a self-signed leaf': '401 unauthorized cert_required',
  'both bindings, both hold': '200 ok',
  'both bindings, no leaf': '401 unauthorized cert_required',
  'both bindings, no proof': '401 unauthorized dpop_required',
  'revoked before the bundle': '401 unauthorized revoked',
  'owner archived before the bundle': '401 unauthorized revoked',
  'issued to a client deleted before the bundle': '401 unauthorized revoked',
  "wrong audience (the other side's token)": '401 unauthorized bad_audience',
};

export async function runRows(env: RowEnv): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [name, run] of ROWS) out[name] = await run(env);
  return out;
}
