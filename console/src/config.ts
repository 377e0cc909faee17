/**
 * The console's configuration, read once from `GET /console/config.json`:
 * this cell's id, the issuer of its tokens, its public URL, the console's
 * OAuth client id and redirect URI. Public values; no secret.
 */
export interface ConsoleConfig {
  cell_id: string;
  issuer: string;
  public_url: string;
  client_id: string;
  redirect_uri: string;
  api_base: string;
}

/** Loads the configuration; throws with a readable message when the cell does not answer. */
export async function loadConfig(): Promise<ConsoleConfig> {
  const r = await fetch('/console/config.json', { headers: { accept: 'application/json' } });
  if (!r.ok) throw new Error(`the cell did not give the console its configuration (HTTP ${r.status})`);
  return (await r.json()) as ConsoleConfig;
}

/**
 * Tokens are bound to the cell's configured public URL (DPoP proofs name it,
 * and the OAuth client's redirect URI is under it): true when this page was
 * opened there.
 */
export function openedAtPublicUrl(cfg: ConsoleConfig): boolean {
  try {
    return new URL(cfg.public_url).origin === window.location.origin;
  } catch {
    return false;
  }
}
