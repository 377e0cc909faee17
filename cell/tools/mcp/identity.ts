/**
 * Who a source's server sees, per call (docs/tools.md, "Who the server sees"):
 *
 * - `cell`: the server trusts this cell. Each call carries a token the cell
 *   issues for that call alone (cell/oauth/tool-delegation.ts): `sub` the
 *   run's requester, `act` the agent, `aud` the server's resource, scope the
 *   tool grant (`tools.<catalog name>`), a lifetime of the call, DPoP-bound to
 *   a key of this cell process; every HTTP request of the call presents it
 *   (`Authorization: DPoP`) with a fresh proof. A catalog read (registration,
 *   review) carries one for the reading principal, scope `catalog.read`.
 * - `client_credentials`: the server has its own authorization server; the
 *   cell presents the source's own token (RFC 6749 §4.4 client credentials,
 *   the client secret a stored secret, the RFC 8707 `resource` when given),
 *   fetched through the network floor and kept until shortly before it
 *   expires. The right of whoever bound the secret is checked at each fetch.
 * - `none` (and every stdio server): nothing.
 *
 * Never the requester's own credential: no token of the caller is forwarded.
 * What the journal keeps of each (`identity`): the token's id and SHA-256, or
 * the client id and the token's SHA-256, never a token.
 */
import { sha256Hex } from '../../../core/canonical.ts';
import { ServiceError } from '../../../core/errors.ts';
import type { JsonObject } from '../../../core/journal/record.ts';
import type { ToolCaller } from '../catalog.ts';
import type { RequestCredentials } from '../../../runtime/mcp-client/connect.ts';
import type { SourcesContext } from '../sources/context.ts';
import { checkSourceUrl } from './floor.ts';
import { smallRequest } from './small-request.ts';
import type { SourceRow } from '../sources/types.ts';

/** The identity of one call (or one catalog read): the session it belongs to, its headers, and what the journal keeps. */
export interface CallIdentity {
  /** Sessions are kept per identity: a server that binds sessions to a user sees one user per session. */
  key: string;
  credentials: RequestCredentials | null;
  /** For the step's record: which identity the server saw (never a token). */
  record: JsonObject;
  /** For a delegated token, as http.get names it: its id and hash. */
  onBehalf?: { jti: string; token_sha256: string };
}

const NONE: CallIdentity = { key: '', credentials: null, record: { kind: 'none' } };

/** A token is used until this long before it expires, and at most this long when the server names no lifetime. */
const TOKEN_MARGIN_MS = 30_000;
const TOKEN_DEFAULT_MS = 60_000;

/** The identity of a call of `tool` by `caller` (a seat of a run, or the requester of a `single` job). */
export async function callIdentity(ctx: SourcesContext, source: SourceRow, tool: string, caller: ToolCaller): Promise<CallIdentity> {
  const auth = source.auth;
  if (source.transport === 'stdio' || auth.type === 'none') return NONE;
  if (auth.type === 'client_credentials') return clientIdentity(ctx, source, auth);
  // A run acts for its requester, its agent acting; a `single` job's requester calls for itself.
  const requester = caller.onBehalf?.requester ?? caller.agentId;
  const agent = caller.onBehalf !== undefined && caller.agentId !== 'none' && caller.agentId !== requester ? caller.agentId : undefined;
  return delegatedIdentity(ctx, source, auth.audience, {
    tool,
    requester,
    ...(agent !== undefined ? { agentId: agent } : {}),
    ...(caller.onBehalf ? { runId: caller.onBehalf.runId } : {}),
    ...(caller.onBehalf?.crewId ? { crewId: caller.onBehalf.crewId } : {}),
  });
}

/** The identity of a catalog read (registration, review, re-pin) by `principalId`. */
export async function catalogIdentity(ctx: SourcesContext, source: SourceRow, principalId: string): Promise<CallIdentity> {
  const auth = source.auth;
  if (source.transport === 'stdio' || auth.type === 'none') return NONE;
  if (auth.type === 'client_credentials') return clientIdentity(ctx, source, auth);
  return delegatedIdentity(ctx, source, auth.audience, { tool: 'catalog', requester: principalId, scope: 'catalog.read' });
}

async function delegatedIdentity(
  ctx: SourcesContext,
  source: SourceRow,
  audience: string,
  who: { tool: string; requester: string; agentId?: string; runId?: string; crewId?: string; scope?: string },
): Promise<CallIdentity> {
  if (ctx.delegation === undefined) throw new TypeError('a source that trusts this cell needs the OAuth module');
  const d = await ctx.delegation({ url: source.url!, audience, ...who });
  if (d === null) throw new TypeError('a delegation with an audience is never null');
  return {
    key: `cell\u0000${who.requester}\u0000${who.agentId ?? ''}`,
    credentials: {
      async headers(method, htu) {
        return { authorization: `DPoP ${d.token}`, dpop: await d.proof(method, htu) };
      },
    },
    record: {
      kind: 'delegated',
      sub: who.requester,
      ...(who.agentId !== undefined ? { act: who.agentId } : {}),
      aud: audience,
      jti: d.jti,
      token_sha256: d.tokenSha256,
    },
    onBehalf: { jti: d.jti, token_sha256: d.tokenSha256 },
  };
}

async function clientIdentity(
  ctx: SourcesContext,
  source: SourceRow,
  auth: Extract<SourceRow['auth'], { type: 'client_credentials' }>,
): Promise<CallIdentity> {
  const t = await clientToken(ctx, source, auth);
  return {
    key: 'client',
    credentials: {
      async headers() {
        return { authorization: `Bearer ${t.token}` };
      },
    },
    record: { kind: 'client', client_id: auth.client_id, token_endpoint: auth.token_endpoint, token_sha256: t.sha256 },
  };
}

const tokenFailed = (message: string, extra: Record<string, unknown> = {}) =>
  new ServiceError('service_unavailable', message, { details: { reason: 'source_token_failed', ...extra }, retryable: true });

/** The source's own token: kept until TOKEN_MARGIN_MS before it expires, else fetched (client credentials grant). */
export async function clientToken(
  ctx: SourcesContext,
  source: Pick<SourceRow, 'source_id' | 'updated_at' | 'bound_by'>,
  auth: Extract<SourceRow['auth'], { type: 'client_credentials' }>,
): Promise<{ token: string; sha256: string }> {
  const key = `${source.source_id}\u0000${source.updated_at}`;
  const now = ctx.core.clock.now();
  const kept = ctx.tokens.get(key);
  if (kept !== undefined && kept.until > now) return kept;
  const secrets = ctx.secrets;
  if (secrets === undefined) throw new TypeError('client credentials need the stored secrets (the AI module)');
  // Whoever bound the secret must still be active and still entitled to it (as a provider's registrant, at every call).
  const who = source.bound_by === null ? undefined : await ctx.iam.principal(source.bound_by);
  if (
    who === undefined ||
    who.status !== 'active' ||
    !(await secrets.mayUse({ principalId: who.id, holding: await ctx.iam.authorityOf(who) }, auth.client_secret_id))
  ) {
    throw new ServiceError('forbidden', "the source's registrant may no longer use its client secret", {
      details: { reason: 'secret_not_usable', source_id: source.source_id },
    });
  }
  const secret = await secrets.read(auth.client_secret_id);
  const t = await requestClientToken(ctx, auth, secret);
  const sha256 = sha256Hex(t.token);
  const entry = { token: t.token, sha256, until: now + Math.max(0, t.lifetimeMs - TOKEN_MARGIN_MS) };
  if (entry.until > now) ctx.tokens.set(key, entry);
  return entry;
}

/** One client-credentials token request (client_secret_basic, RFC 6749 §2.3.1), through the network floor. */
async function requestClientToken(
  ctx: SourcesContext,
  auth: Extract<SourceRow['auth'], { type: 'client_credentials' }>,
  secret: string,
): Promise<{ token: string; lifetimeMs: number }> {
  const url = checkSourceUrl(ctx.core.config, auth.token_endpoint, 'auth.token_endpoint');
  const form = new URLSearchParams({ grant_type: 'client_credentials' });
  if (auth.scope !== null) form.set('scope', auth.scope);
  if (auth.resource !== null) form.set('resource', auth.resource);
  const basic = Buffer.from(`${encodeURIComponent(auth.client_id)}:${encodeURIComponent(secret)}`).toString('base64');
  let status: number;
  let text: string;
  try {
    ({ status, text } = await smallRequest(ctx.dispatcher, url, {
      method: 'POST',
      headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: form.toString(),
    }));
  } catch {
    throw tokenFailed('the token endpoint of the source could not be reached, or answered more than the cell reads', {
      token_endpoint: url.origin,
    });
  }
  if (status !== 200) throw tokenFailed(`the token endpoint of the source refused the client credentials (${status})`, { status });
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw tokenFailed('the token endpoint of the source answered something that is not JSON', { status });
  }
  const b = body as { access_token?: unknown; expires_in?: unknown; token_type?: unknown };
  if (typeof b.access_token !== 'string' || b.access_token.length === 0 || b.access_token.length > 16_384)
    throw tokenFailed('the token endpoint of the source answered without an access_token', { status });
  if (typeof b.token_type === 'string' && b.token_type.toLowerCase() !== 'bearer')
    throw tokenFailed(`the token endpoint of the source issued a ${b.token_type.slice(0, 20)} token; the cell presents bearer tokens`, {
      status,
    });
  const lifetimeMs =
    typeof b.expires_in === 'number' && Number.isFinite(b.expires_in) && b.expires_in > 0 ? b.expires_in * 1000 : TOKEN_DEFAULT_MS;
  return { token: b.access_token, lifetimeMs };
}
