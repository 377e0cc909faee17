/**
 * The console's OAuth client: a built-in public client of this cell's own
 * authorization server (cell/oauth/builtin-clients.ts), authorization code +
 * PKCE, redirect URI `<public URL>/console/callback`. One per cell (its id
 * names the cell), so cells sharing a store never overwrite each other's.
 */
import type { Cell } from '../context.ts';
import type { OAuthApi } from '../oauth/module.ts';
import { issuerOf, publicBase } from '../oauth/settings.ts';
import { CONSOLE_CALLBACK_PATH } from './page.ts';

/** The console's client id on this cell. */
export function consoleClientId(cell: Cell): string {
  return `console.${cell.config.cellId}`;
}

/** The console's redirect URI on this cell. */
export function consoleRedirectUri(cell: Cell): string {
  return publicBase(cell) + CONSOLE_CALLBACK_PATH;
}

/** Registers (or updates) the console's client through the OAuth module's API; called once the cell listens. */
export async function registerConsoleClient(cell: Cell, oauth: Pick<OAuthApi, 'ensureBuiltInClient'>): Promise<void> {
  await oauth.ensureBuiltInClient({
    clientId: consoleClientId(cell),
    name: 'agent-cell console',
    redirectUris: [consoleRedirectUri(cell)],
    // The user chooses on the consent screen; the token never exceeds the user's permissions.
    scope: ['*'],
  });
}

/** What the console needs to know before it can sign anyone in (public: no secret in it). */
export function consoleConfig(cell: Cell) {
  return {
    cell_id: cell.config.cellId,
    issuer: issuerOf(cell),
    public_url: publicBase(cell),
    client_id: consoleClientId(cell),
    redirect_uri: consoleRedirectUri(cell),
    api_base: `${publicBase(cell)}/api/public/v1`,
  };
}
