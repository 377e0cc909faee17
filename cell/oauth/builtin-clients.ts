/**
 * Built-in OAuth clients: public clients the cell registers for itself (the
 * operator console, cell/console). A built-in client holds no secret
 * (`token_endpoint_auth_method` none), may only use the authorization code
 * flow (PKCE S256 is required of every authorization request), and what its
 * tokens carry is what the consenting user approves, capped by that user's
 * permissions at the consent screen and again at the token endpoint. It is
 * written on start (its redirect URI follows the cell's public URL, known only
 * once the cell listens) and rewritten only when it changed. It shows in the
 * client list like any other, with `created_by` `system`.
 */
import type { Cell } from '../context.ts';
import { getClient, GRANT_AUTHORIZATION_CODE } from './clients.ts';

export interface BuiltInClient {
  clientId: string;
  name: string;
  redirectUris: string[];
  /** Selectors the client may ever ask for (`*`: whatever the user consents to). */
  scope: string[];
}

/** Creates or updates a built-in public client; a no-op when it is already as given. */
export async function ensureBuiltInClient(cell: Cell, c: BuiltInClient): Promise<void> {
  const have = getClient(cell, c.clientId);
  if (have && have.auth_method === 'none' && have.secret_hash === null && have.name === c.name
    && JSON.stringify(have.redirect_uris) === JSON.stringify(c.redirectUris)
    && JSON.stringify(have.grant_types) === JSON.stringify([GRANT_AUTHORIZATION_CODE])
    && JSON.stringify(have.scope) === JSON.stringify(c.scope)) return;
  const now = cell.clock.now();
  await cell.store.write((tx) => tx.run(
    `INSERT INTO oauth_clients (client_id, name, secret_hash, auth_method, redirect_uris, grant_types, scope, subject_id, tls_subject_dn, created_at, created_by)
     VALUES (?, ?, NULL, 'none', ?, ?, ?, NULL, NULL, ?, 'system')
     ON CONFLICT (client_id) DO UPDATE SET name = excluded.name, secret_hash = NULL, auth_method = 'none',
       redirect_uris = excluded.redirect_uris, grant_types = excluded.grant_types, scope = excluded.scope,
       subject_id = NULL, tls_subject_dn = NULL`,
    [c.clientId, c.name, JSON.stringify(c.redirectUris), JSON.stringify([GRANT_AUTHORIZATION_CODE]), JSON.stringify(c.scope), now]));
}
