/**
 * Built-in OAuth clients: public clients the cell registers for itself (the
 * operator console, cell/console). A built-in client holds no secret
 * (`token_endpoint_auth_method` none), may only use the authorization code
 * flow (PKCE S256 is required of every authorization request), and what its
 * tokens carry is what the consenting user approves, capped by that user's
 * permissions at the consent screen and again at the token endpoint. It is
 * written on start (its redirect URI follows the cell's public URL, known only
 * once the cell listens) and rewritten only when it changed. It shows in the
 * client list like any other, with `created_by` `system`. Other modules reach
 * this through the module's API (`ensureBuiltInClient`).
 */
import { getClient, GRANT_AUTHORIZATION_CODE } from './clients.ts';
import type { OAuthContext } from './oauth-context.ts';
import { upsertBuiltInClient } from './repository.ts';

export interface BuiltInClient {
  clientId: string;
  name: string;
  redirectUris: string[];
  /** Selectors the client may ever ask for (`*`: whatever the user consents to). */
  scope: string[];
}

const same = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x, i) => x === b[i]);

/** Creates or updates a built-in public client; a no-op when it is already as given. */
export async function ensureBuiltInClient(ctx: OAuthContext, c: BuiltInClient): Promise<void> {
  const grantTypes = [GRANT_AUTHORIZATION_CODE];
  const have = await getClient(ctx, c.clientId);
  if (
    have &&
    have.auth_method === 'none' &&
    have.secret_hash === null &&
    have.subject_id === null &&
    have.tls_subject_dn === null &&
    have.name === c.name &&
    same(have.redirect_uris, c.redirectUris) &&
    same(have.grant_types, grantTypes) &&
    same(have.scope, c.scope)
  )
    return;
  const now = ctx.core.clock.now();
  await ctx.core.store.write((tx) =>
    upsertBuiltInClient(tx, {
      client_id: c.clientId,
      name: c.name,
      redirect_uris: c.redirectUris,
      grant_types: grantTypes,
      scope: c.scope,
      created_at: now,
    }),
  );
}
