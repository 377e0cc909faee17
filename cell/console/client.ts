/**
 * The console's OAuth client: a built-in public client of this cell's own
 * authorization server (cell/oauth/builtin-clients.ts), authorization code +
 * PKCE, redirect URI `<public URL>/console/callback`. One per cell (its id
 * names the cell), so cells sharing a store never overwrite each other's.
 */
import type { CellCore } from '../context.ts';
import type { OAuthApi } from '../oauth/api.ts';
import { CONSOLE_CALLBACK_PATH } from './page.ts';

/** The console's client id on this cell. */
export function consoleClientId(core: CellCore): string {
  return `console.${core.config.cellId}`;
}

/** The console's redirect URI on this cell. */
export function consoleRedirectUri(oauth: OAuthApi): string {
  return oauth.publicBase() + CONSOLE_CALLBACK_PATH;
}

/** Registers (or updates) the console's client; called once the cell listens. */
export async function registerConsoleClient(core: CellCore, oauth: OAuthApi): Promise<void> {
  await oauth.ensureBuiltInClient({
    clientId: consoleClientId(core),
    name: 'agent-cell console',
    redirectUris: [consoleRedirectUri(oauth)],
    // The user chooses on the consent screen; the token never exceeds the user's permissions.
    scope: ['*'],
  });
}

/** What the console needs to know before it can sign anyone in (public: no secret in it). */
export function consoleConfig(core: CellCore, oauth: OAuthApi) {
  return {
    cell_id: core.config.cellId,
    issuer: oauth.issuer(),
    public_url: oauth.publicBase(),
    client_id: consoleClientId(core),
    redirect_uri: consoleRedirectUri(oauth),
    api_base: `${oauth.publicBase()}/api/public/v1`,
  };
}
