/**
 * Registering a source (`POST /admin/catalog/sources`, `catalog.sources.write`):
 * an MCP server reached over Streamable HTTP by URL. stdio servers are never
 * registered through the API: only the cell's own configuration names a
 * command to start (./config.ts).
 *
 * Checks, in order: the name (unique, 409 name_taken); the URL (./floor.ts:
 * scheme, network floor, posture); the identity (`auth`): `cell` only for a
 * server that trusts this cell (RFC 9728 metadata naming it, or a
 * `--protected-resource`: 400 source_not_protected otherwise);
 * `client_credentials` only with a stored secret the caller may send (its
 * creator's credential with secrets.write, or secrets.use and managing the
 * creator: 403 secret_not_usable, audited), and a token the authorization
 * server issues now (503 source_token_failed). Then the server's tool list is
 * read (503 source_unreachable) and every tool the catalog can take is
 * imported with its definition pinned; those it cannot are listed in
 * `refused_tools`. One transaction writes the source, its pins and the audit
 * record `catalog.source.create`.
 */
import { ServiceError, conflict, invalid } from '../../../core/errors.ts';
import { PERMISSIONS } from '../../../core/permissions.ts';
import type { AuthContext } from '../../context.ts';
import { callerHolding } from '../../iam/api.ts';
import { newId } from '../../ids.ts';
import type { SourcesContext } from './context.ts';
import { checkSourceUrl } from '../mcp/floor.ts';
import { clientToken } from '../mcp/identity.ts';
import { trustedAudience } from '../mcp/trust.ts';
import { importable, SOURCE_NAME, type RefusedTool } from './names.ts';
import { readListing } from '../mcp/read.ts';
import { insertSource, sourceByName, upsertPin } from './repository.ts';
import type { PinRow, SourceAuth, SourceRow } from './types.ts';

import { DEFAULT_DEFINITION_MAX_AGE_MS, DEFAULT_TIMEOUT_MS } from '../../../runtime/mcp-client/config.ts';

export { DEFAULT_DEFINITION_MAX_AGE_MS, DEFAULT_TIMEOUT_MS };

/** The identity of a source as a request names it (the secret by reference only). */
export type AuthInput =
  | { type: 'none' }
  | { type: 'cell' }
  | {
      type: 'client_credentials';
      token_endpoint: string;
      client_id: string;
      client_secret_id: string;
      scope?: string | undefined;
      resource?: string | undefined;
    };

export interface SourceInput {
  name: string;
  url: string;
  description?: string | undefined;
  auth?: AuthInput | undefined;
  definition_max_age_ms?: number | undefined;
  timeout_ms?: number | undefined;
}

/**
 * The stored identity for `input` at `url`, every check passed: a `cell` server's audience found,
 * a client secret the caller may send. `action` names the audit record of a refusal.
 */
export async function resolveAuth(
  ctx: SourcesContext,
  auth: AuthContext,
  input: AuthInput,
  url: URL,
  action: string,
  target: string,
): Promise<SourceAuth> {
  switch (input.type) {
    case 'none':
      return { type: 'none' };
    case 'cell': {
      const audience = await trustedAudience(ctx, url);
      if (audience === null)
        throw invalid('the server does not name this cell as its authorization server (RFC 9728 metadata) and is no --protected-resource', {
          reason: 'source_not_protected',
          field: 'auth.type',
        });
      return { type: 'cell', audience };
    }
    case 'client_credentials': {
      checkSourceUrl(ctx.core.config, input.token_endpoint, 'auth.token_endpoint');
      const secrets = ctx.secrets;
      if (secrets === undefined || (await secrets.creator(ctx.core.store, input.client_secret_id)) === undefined)
        throw invalid('auth.client_secret_id names no stored secret', { reason: 'unknown_secret', field: 'auth.client_secret_id' });
      // The client secret goes to the token endpoint: only a caller with the right to act on it may send it there.
      if (!(await secrets.mayUse({ principalId: auth.principal.id, holding: callerHolding(auth) }, input.client_secret_id))) {
        const details = {
          reason: 'secret_not_usable' as const,
          field: 'auth.client_secret_id',
          required_permission: PERMISSIONS.secretsUse,
        };
        await ctx.iam.auditNow({ actor: auth.principal.id, action, target, outcome: 'refused', details });
        throw new ServiceError('forbidden', 'the caller may not use this secret: the calling credential has no right to act on it', {
          details,
        });
      }
      return {
        type: 'client_credentials',
        token_endpoint: input.token_endpoint,
        client_id: input.client_id,
        client_secret_id: input.client_secret_id,
        scope: input.scope ?? null,
        resource: input.resource ?? null,
      };
    }
  }
}

/** The pins of a listing's importable tools, pinned now by `by`. */
export function pinsFrom(sourceId: string, tools: ReturnType<typeof importable>['tools'], at: number, by: string): PinRow[] {
  return [...tools].map(([tool, t]) => ({
    source_id: sourceId,
    tool,
    name: t.name,
    definition: t.definition,
    pin: t.pin,
    pinned_at: at,
    pinned_by: by,
  }));
}

/** Registers an HTTP source (see the header); the source, its pins, and the tools it did not import. */
export async function registerSource(
  ctx: SourcesContext,
  auth: AuthContext,
  input: SourceInput,
): Promise<{ source: SourceRow; pins: PinRow[]; refused: RefusedTool[] }> {
  const { core, iam } = ctx;
  const actor = auth.principal.id;
  if (!SOURCE_NAME.test(input.name))
    throw invalid('name: lower-case letters, digits and -, a letter first, at most 24 characters', { field: 'name' });
  if ((await sourceByName(core.store, input.name)) !== undefined || ctx.stdio.has(input.name))
    throw conflict(`a source named '${input.name}' exists`, { reason: 'name_taken', field: 'name' });
  const url = checkSourceUrl(core.config, input.url, 'url');
  const sourceId = newId('src');
  const stored = await resolveAuth(ctx, auth, input.auth ?? { type: 'none' }, url, 'catalog.source.create', sourceId);
  const now = core.clock.now();
  const source: SourceRow = {
    source_id: sourceId,
    name: input.name,
    transport: 'http',
    url: url.href,
    auth: stored,
    origin: 'api',
    description: input.description ?? '',
    definition_max_age_ms: input.definition_max_age_ms ?? DEFAULT_DEFINITION_MAX_AGE_MS,
    timeout_ms: input.timeout_ms ?? DEFAULT_TIMEOUT_MS,
    bound_by: stored.type === 'client_credentials' ? actor : null,
    created_at: now,
    created_by: actor,
    updated_at: now,
  };
  // The credentials work before anything is stored: a token now, then the list of tools with it.
  if (stored.type === 'client_credentials') await clientToken(ctx, source, stored);
  const { tools, refused } = importable(source.name, await readListing(ctx, source, actor));
  const pins = pinsFrom(sourceId, tools, now, actor);
  await core.store.write(async (tx) => {
    if ((await sourceByName(tx, input.name)) !== undefined)
      throw conflict(`a source named '${input.name}' exists`, { reason: 'name_taken', field: 'name' });
    if (stored.type === 'client_credentials' && (await ctx.secrets!.creator(tx, stored.client_secret_id)) === undefined)
      throw invalid('auth.client_secret_id names no stored secret', { reason: 'unknown_secret', field: 'auth.client_secret_id' });
    await insertSource(tx, source);
    for (const p of pins) await upsertPin(tx, p);
    await iam.audit(tx, {
      at: now,
      actor,
      action: 'catalog.source.create',
      target: sourceId,
      outcome: 'ok',
      details: {
        name: source.name,
        host: url.host,
        auth: stored.type,
        tools: pins.map((p) => p.name),
        refused: refused.map((r) => r.tool),
      },
    });
  });
  await ctx.imported.reload();
  return { source, pins, refused };
}
