/**
 * Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document,
 * MCP 2025-11-25 "Client ID Metadata Documents"): a client whose `client_id`
 * is an `https://` URL describes itself in the JSON document at that URL.
 *
 * The cell fetches the document when such a client starts an authorization
 * request, through the same network floor as tools (no loopback, private or
 * link-local address unless `--egress-allow-private`; checked at connect
 * time), https only, no redirects, at most 16 KiB in 5 s, and keeps it for an
 * hour (a failed fetch is not retried for a minute). Never in the sovereign
 * posture (air-gapped), nor with `--oauth-client-id-metadata off`: the
 * client is then unknown.
 *
 * The document must name itself (`client_id` equal to its URL), list its
 * redirect URIs (https, or http on a loopback host), and be a public client
 * (`token_endpoint_auth_method` none: a document cannot hold a secret). The
 * client is capped as a self-registered one: authorization code (and refresh
 * token) only, scope within `--oauth-registration-scope`, nothing without a
 * principal's consent, never more than that principal; the consent page names
 * it unverified with the host its document came from. It is kept as a client
 * row (`created_by: client-id-metadata-document`), so its tokens live with it
 * and an admin can delete it like any client.
 */
import { request, type Dispatcher } from 'undici';
import { GRANT_AUTHORIZATION_CODE, GRANT_REFRESH_TOKEN, getClient, takesBuiltInName, type ClientRecord } from './clients.ts';
import type { OAuthContext } from './oauth-context.ts';
import { redirectUriProblem } from './registration.ts';
import * as repo from './repository.ts';
import { narrowScope, parseScope } from './scope.ts';
import { OAUTH } from './settings.ts';

/** `created_by` of a client described by its own metadata document. */
export const DOCUMENT_CLIENT = 'client-id-metadata-document';

/** Whether a client_id is a metadata document's URL: https, a path other than `/`, no query, fragment or credentials. */
export function isDocumentClientId(id: string): boolean {
  const u = URL.parse(id);
  return (
    u !== null && u.protocol === 'https:' && u.pathname !== '/' && !u.search && !u.hash && !u.username && !u.password && !id.includes('#')
  );
}

/**
 * The client of an authorization request: a registered one, or one described by its Client ID
 * Metadata Document (an https client_id, fetched when not fresh: cell/oauth/client-metadata.ts).
 */
export async function resolveClient(ctx: OAuthContext, clientId: string): Promise<ClientRecord | undefined> {
  const known = await getClient(ctx, clientId);
  if (known !== undefined && known.created_by !== DOCUMENT_CLIENT) return known;
  return isDocumentClientId(clientId) ? ctx.documents.resolve(ctx, clientId) : known;
}

/** Whether this cell takes metadata documents now (its flag, and never in the sovereign posture). */
export function documentsEnabled(config: OAuthContext['core']['config']): boolean {
  return config.clientIdMetadataDocuments && config.posture !== 'sovereign';
}

/** The documents fetched lately and the fetches that failed, per process; the clients themselves are rows. */
export class ClientDocuments {
  readonly #fetched = new Map<string, number>();
  readonly #failed = new Map<string, number>();
  constructor(readonly dispatcher: Dispatcher) {}

  /** The client a metadata document describes, fetched (again) when it is not fresh; undefined when it cannot be had. */
  async resolve(ctx: OAuthContext, id: string): Promise<ClientRecord | undefined> {
    if (!documentsEnabled(ctx.core.config) || !isDocumentClientId(id)) return undefined;
    const now = ctx.core.clock.now();
    const at = this.#fetched.get(id);
    if (at !== undefined && now - at < OAUTH.clientDocumentTtlMs) {
      const kept = await getClient(ctx, id);
      if (kept?.created_by === DOCUMENT_CLIENT) return kept;
    }
    const failedAt = this.#failed.get(id);
    if (failedAt !== undefined && now - failedAt < OAUTH.clientDocumentFailureTtlMs) return undefined;
    const described = await this.#fetch(ctx, id).catch((e: unknown) => {
      ctx.core.log.info('client metadata document refused', { client_id: id, error: e instanceof Error ? e.message : String(e) });
      return null;
    });
    if (this.#failed.size > 10_000) this.#failed.clear();
    if (this.#fetched.size > 10_000) this.#fetched.clear();
    if (described === null) {
      this.#failed.set(id, now);
      return undefined;
    }
    const written = await ctx.core.store.write(async (tx) => {
      const ok = await repo.upsertDocumentClient(tx, { ...described, created_at: now, created_by: DOCUMENT_CLIENT });
      if (ok)
        await ctx.iam.audit(tx, {
          at: now,
          actor: DOCUMENT_CLIENT,
          action: 'oauth.client.document',
          target: id,
          outcome: 'ok',
          details: { name: described.name, redirect_uris: described.redirect_uris, scope: described.scope },
        });
      return ok;
    });
    if (!written) return undefined;
    this.#failed.delete(id);
    this.#fetched.set(id, now);
    return getClient(ctx, id);
  }

  /** Fetches and checks a document; throws what is wrong with it. */
  async #fetch(
    ctx: OAuthContext,
    url: string,
  ): Promise<Pick<ClientRecord, 'client_id' | 'name' | 'redirect_uris' | 'grant_types' | 'scope'>> {
    const res = await request(url, {
      method: 'GET',
      headers: { accept: 'application/json' },
      headersTimeout: OAUTH.clientDocumentTimeoutMs,
      bodyTimeout: OAUTH.clientDocumentTimeoutMs,
      maxRedirections: 0,
      dispatcher: this.dispatcher,
      signal: AbortSignal.timeout(OAUTH.clientDocumentTimeoutMs),
    } as Parameters<typeof request>[1]);
    if (res.statusCode !== 200) {
      res.body.destroy();
      throw new Error(`the document answered ${res.statusCode}`);
    }
    const text = await readCapped(res.body, OAUTH.clientDocumentMaxBytes);
    const doc = JSON.parse(text) as Record<string, unknown>;
    if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw new Error('the document is not a JSON object');
    if (doc['client_id'] !== url) throw new Error('client_id in the document is not its URL');
    if ('client_secret' in doc) throw new Error('a metadata document holds no secret');
    const method = doc['token_endpoint_auth_method'] ?? 'none';
    if (method !== 'none') throw new Error(`token_endpoint_auth_method ${String(method)}: only public clients (none) are taken`);
    const uris = doc['redirect_uris'];
    if (!Array.isArray(uris) || uris.length === 0 || uris.length > 10 || !uris.every((u) => typeof u === 'string'))
      throw new Error('redirect_uris: 1 to 10 URIs');
    for (const u of uris as string[]) {
      const problem = redirectUriProblem(u);
      if (problem) throw new Error(problem);
    }
    const grants = doc['grant_types'] === undefined ? [GRANT_AUTHORIZATION_CODE] : doc['grant_types'];
    if (
      !Array.isArray(grants) ||
      !grants.includes(GRANT_AUTHORIZATION_CODE) ||
      grants.some((g) => g !== GRANT_AUTHORIZATION_CODE && g !== GRANT_REFRESH_TOKEN)
    )
      throw new Error('grant_types: authorization_code (and refresh_token) only');
    const name = typeof doc['client_name'] === 'string' && doc['client_name'] ? doc['client_name'].slice(0, 100) : new URL(url).host;
    if (await takesBuiltInName(ctx, name)) throw new Error(`client_name '${name}' is a built-in client's`);
    const scope = narrowScope(parseScope(typeof doc['scope'] === 'string' ? doc['scope'] : undefined), ctx.core.config.registrationScope);
    return { client_id: url, name, redirect_uris: [...new Set(uris as string[])], grant_types: [...new Set(grants as string[])], scope };
  }
}

/** The body's text, refused past `max` bytes while it is read. */
async function readCapped(body: AsyncIterable<unknown> & { destroy(): void }, max: number): Promise<string> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of body) {
    const b = c as Buffer;
    n += b.length;
    if (n > max) {
      body.destroy();
      throw new Error('the document is too large');
    }
    chunks.push(b);
  }
  return Buffer.concat(chunks).toString('utf8');
}
