/**
 * The token-exchange grant (RFC 8693) at `/oauth/token`: delegation that can
 * only narrow. A client presents a token of a subject (`subject_token`) and,
 * optionally, a token of the party that will act for it (`actor_token`;
 * without one the actor is the client's own principal), and names the
 * resource the new token is for (`resource` or `audience`, required). The
 * issued token has `sub` = the subject, `act` = the actor with the subject
 * token's own chain nested under it (§4.1), scope = requested ∩ the subject
 * token's authority now ∩ the actor's ∩ the client's, `exp` no later than
 * either presented token, and `links`: every credential of the chain, so that
 * revoking, narrowing or expiring any link refuses it wherever core's judge
 * runs (core/tokens/judge.ts: the bearer path, introspection, the edge).
 * Never impersonation: every exchanged token names its actor.
 *
 * A token is exchanged only where it was meant to be used: a token for a
 * device or a protected resource is exchanged only for that same audience,
 * never for a cell-API token; an actor token is a token for this cell's API.
 * `may_act` binds every later hop (the issued token carries it on), and a
 * SAT's may_act names an active principal (cell/oauth/routes-admin.ts).
 */
import { isRegisteredClientId } from '../../core/tokens/judge.ts';
import type { Context } from 'hono';
import { actClaimOf, actorsOf, linksOf, MAX_LINKS, mayActOf } from '../../core/tokens/delegation.ts';
import { rootOf } from '../../core/tokens/judge.ts';
import type { AccessTokenClaims } from '../../core/tokens/access-token.ts';
import { looksLikeJwt } from '../../core/tokens/access-token.ts';
import type { Reason } from '../../core/reasons.ts';
import type { AppEnv } from '../context.ts';
import { cellTokenJudge, cellTokenJudgeFor, type CellTokenVerdict } from './authenticator.ts';
import { GRANT_TOKEN_EXCHANGE, type AuthenticatedClient } from './clients.ts';
import { issueAccessToken } from './issue.ts';
import { OAuthError } from './oauth-error.ts';
import type { OAuthContext } from './oauth-context.ts';
import { audienceFor, edgeDeviceOf } from './resource.ts';
import { narrowScope } from './scope.ts';

export const TOKEN_TYPE_ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';
const TOKEN_TYPE_JWT = 'urn:ietf:params:oauth:token-type:jwt';
/** The token types this cell accepts as subject and actor tokens: its own access tokens (and SATs). */
const ACCEPTED_TYPES = [TOKEN_TYPE_ACCESS_TOKEN, TOKEN_TYPE_JWT];

type Verified = Extract<CellTokenVerdict, { ok: true }>;
type Cnf = { jkt?: string; 'x5t#S256'?: string };

/** The `aud` a token claims (unverified: it only picks which judgement applies), or null. */
function claimedAudience(token: string): string | null {
  try {
    const aud: unknown = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')).aud;
    return typeof aud === 'string' ? aud : null;
  } catch {
    return null;
  }
}

/**
 * A token of this cell that the bearer path would honour now, bindings aside (as introspection
 * judges), exchanged only where it was meant to be used: a token for this group's API may be
 * exchanged for any audience the cell issues for (the cell is where it is used); a token for
 * anything else (a device, `edge:<device_id>`; a registered protected resource) only for that same
 * audience (`audience`, the one the request names), never for the cell's API. Without `audience`
 * (an actor token, which speaks for its subject here), only a token for this group's API.
 */
async function judgePresented(ctx: OAuthContext, token: string, what: string, audience?: string): Promise<Verified> {
  const now = ctx.core.clock.now();
  const refused = () => new OAuthError('invalid_grant', `the ${what} is not an active token of this cell`);
  if (!looksLikeJwt(token)) throw refused();
  const v = await cellTokenJudge(ctx)(token, { now });
  if (v.ok) return v;
  if (v.code !== 'bad_audience') throw refused();
  const aud = claimedAudience(token);
  if (aud === null) throw refused();
  if (aud !== audience)
    throw new OAuthError(
      'invalid_target',
      `the ${what} is for ${edgeDeviceOf(aud) !== null ? 'a device' : 'another audience'}: it is exchanged only for that audience`,
    );
  const d = await cellTokenJudgeFor(ctx, aud)(token, { now });
  if (!d.ok) throw refused();
  return d;
}

/** A bound presented token may be exchanged only on a request that carries the same binding (else it could be unbound by exchange). */
function assertSameBinding(claims: AccessTokenClaims, cnf: Cnf, what: string): void {
  if (claims.cnf?.jkt !== undefined && claims.cnf.jkt !== cnf.jkt)
    throw new OAuthError('invalid_grant', `the ${what} is DPoP-bound: the request needs a DPoP proof with its key`);
  if (claims.cnf?.['x5t#S256'] !== undefined && claims.cnf['x5t#S256'] !== cnf['x5t#S256'])
    throw new OAuthError('invalid_grant', `the ${what} is certificate-bound: the request needs its client certificate`);
}

/** The credentials a token derives from: its own id, its root, its client, and its links. */
function linksFrom(claims: AccessTokenClaims): string[] {
  return [
    `token:${claims.jti}`,
    rootOf(claims),
    ...(isRegisteredClientId(claims.client_id) ? [`client:${claims.client_id}`] : []),
    ...linksOf(claims.links),
  ];
}

/** The one audience of an exchange: `resource` or `audience` (RFC 8693 §2.1, RFC 8707), exactly one value. */
async function exchangeAudience(ctx: OAuthContext, c: Context<AppEnv>): Promise<string> {
  const all = await c.req.parseBody({ all: true });
  const values = [all['resource'], all['audience']].flatMap((v) => (v === undefined ? [] : Array.isArray(v) ? v : [v]));
  if (values.length === 0) throw new OAuthError('invalid_request', 'a token exchange names its resource or audience');
  if (values.length > 1 || typeof values[0] !== 'string')
    throw new OAuthError('invalid_target', 'one resource or audience per token exchange');
  const aud = await audienceFor(ctx, values[0]);
  if (aud === null)
    throw new OAuthError('invalid_target', 'this cell issues tokens for its own API or for a registered device (edge:<device_id>)');
  return aud;
}

export interface ExchangeInput {
  form: Record<string, string>;
  client: AuthenticatedClient;
  /** The binding of this request (DPoP proof key, client certificate): the issued token carries it. */
  cnf: Cnf;
  requested: string[] | null;
  /** What the client's root key (a client registered with a key) holds now. */
  rootCap: string[][];
}

/** Runs the grant; answers the RFC 8693 §2.2.1 response or throws an OAuthError. */
export async function tokenExchange(ctx: OAuthContext, c: Context<AppEnv>, input: ExchangeInput): Promise<Response> {
  const { form, client: ac, cnf } = input;
  const { iam, core } = ctx;

  // 1. The client: registered for the grant and able to authenticate, or an API key acting as one.
  if (!ac.apiKey && (!ac.client?.grant_types.includes(GRANT_TOKEN_EXCHANGE) || ac.method === 'none'))
    throw new OAuthError('unauthorized_client', 'this client may not use token exchange');

  // 2. The request's shape.
  const subjectToken = form['subject_token'];
  if (!subjectToken) throw new OAuthError('invalid_request', 'subject_token is required');
  if (!ACCEPTED_TYPES.includes(form['subject_token_type'] ?? ''))
    throw new OAuthError('invalid_request', 'subject_token_type must be urn:ietf:params:oauth:token-type:access_token (or :jwt)');
  const actorToken = form['actor_token'];
  if ((actorToken === undefined) !== (form['actor_token_type'] === undefined))
    throw new OAuthError('invalid_request', 'actor_token and actor_token_type go together');
  if (actorToken !== undefined && !ACCEPTED_TYPES.includes(form['actor_token_type']!))
    throw new OAuthError('invalid_request', 'actor_token_type must be urn:ietf:params:oauth:token-type:access_token (or :jwt)');
  const rtt = form['requested_token_type'];
  if (rtt !== undefined && rtt !== TOKEN_TYPE_ACCESS_TOKEN)
    throw new OAuthError('invalid_request', 'this cell issues access tokens only (requested_token_type)');
  const audience = await exchangeAudience(ctx, c);

  // 3. The subject: a token of this cell the bearer path would honour now, meant for where it is asked (its audience), with its binding.
  const subject = await judgePresented(ctx, subjectToken, 'subject_token', audience);
  assertSameBinding(subject.claims, cnf, 'subject_token');

  // 4. The actor: the actor token's subject, else the client's own principal; what it may hold caps the token.
  let actorId: string;
  let actorCaps: string[][];
  let actor: Verified | null = null;
  if (actorToken !== undefined) {
    actor = await judgePresented(ctx, actorToken, 'actor_token');
    if (actor.credential.actors.length > 0)
      throw new OAuthError('invalid_grant', 'an actor token speaks for its own subject: it cannot be delegated itself');
    assertSameBinding(actor.claims, cnf, 'actor_token');
    actorId = actor.subject.id;
    actorCaps = [actor.effective];
  } else if (ac.apiKey) {
    actorId = ac.apiKey.principal.id;
    actorCaps = [ac.apiKey.effective];
  } else {
    const p = ac.client!.subject_id ? await iam.principal(ac.client!.subject_id) : undefined;
    if (p?.status !== 'active') throw new OAuthError('invalid_client', 'the client subject is not active');
    actorId = p.id;
    actorCaps = [await iam.permissionsOf(p)];
  }
  const clientCaps = ac.apiKey ? [ac.apiKey.effective] : [ac.client!.scope];

  // 5. The chain: the subject lets this actor act (may_act, §4.4), and it is not longer than the cell's limit.
  const priorActors = subject.credential.actors;
  const actors = [actorId, ...priorActors];
  const refuse = async (reason: Reason, message: string) => {
    await iam.auditNow({
      actor: actorId,
      action: 'oauth.token.exchange',
      target: subject.claims.jti,
      outcome: 'refused',
      details: { reason, subject: subject.subject.id, actors, client_id: ac.clientId },
    });
    return new OAuthError('invalid_grant', message);
  };
  // may_act binds every later hop: the issued token carries it on, so no other actor ever joins the chain.
  const mayAct = mayActOf(subject.claims.may_act);
  if (mayAct !== null && mayAct !== actorId) throw await refuse('may_act', 'the subject does not let this actor act for it (may_act)');
  if (actors.length > core.config.maxDelegationDepth)
    throw await refuse('delegation_too_deep', `delegation chains are at most ${core.config.maxDelegationDepth} actors long here`);

  // 6. Scope: requested ∩ the subject token's authority now ∩ the actor's ∩ the client's (invalid_scope when empty).
  const scope = narrowScope(input.requested, subject.effective, ...actorCaps, ...clientCaps, ...input.rootCap);

  // 7. Lifetime: never past either presented token.
  const nowS = Math.floor(core.clock.now() / 1000);
  const ttl = Math.min(core.config.accessTokenTtlSeconds, subject.claims.exp - nowS, actor ? actor.claims.exp - nowS : Infinity);
  if (ttl < 1) throw new OAuthError('invalid_grant', 'the presented tokens expire now');

  // 8. Links: every credential of the chain, each of which stops the token when it stops.
  const links = new Set([...linksFrom(subject.claims), ...(actor ? linksFrom(actor.claims) : [])]);
  if (ac.apiKey) links.add(`api_key:${ac.apiKey.credential.id}`).add(ac.apiKey.credential.root);
  if (ac.client?.root) links.add(ac.client.root);
  if (links.size > MAX_LINKS) throw new OAuthError('invalid_grant', 'this chain derives from too many credentials');

  const act = actClaimOf(actors)!;
  actorsOf(act); // the shape the judge reads back
  const { token, claims, expiresIn } = await issueAccessToken(ctx, {
    subject: subject.subject.id,
    clientId: ac.clientId,
    scope,
    cnf,
    audience,
    ttlSeconds: ttl,
    root: subject.credential.root,
    act,
    links: [...links].sort(),
    ...(mayAct !== null ? { mayAct } : {}),
  });
  await iam.auditNow({
    actor: actorId,
    action: 'oauth.token.exchange',
    target: claims.jti,
    outcome: 'ok',
    details: { subject: subject.subject.id, actors, client_id: ac.clientId, aud: audience, scope: claims.scope, exp: claims.exp },
  });
  return c.json(
    {
      access_token: token,
      issued_token_type: TOKEN_TYPE_ACCESS_TOKEN,
      token_type: cnf.jkt ? 'DPoP' : 'Bearer',
      expires_in: expiresIn,
      scope: claims.scope,
    },
    200,
    { 'Cache-Control': 'no-store', Pragma: 'no-cache' },
  );
}
