/**
 * What a capped credential makes stays capped and dies with it
 * (docs/security.md): an OAuth client registered with an API key records
 * that key as its root (`api_key:<id>`). Every token request of the client
 * asks the root now: a revoked or expired key, or an inactive owner, stops
 * the client (no more tokens); otherwise its tokens are narrowed to what the
 * key holds now and carry it as their `root`, so the token judge caps them
 * with the key's envelope and refuses them once the key stops
 * (core/tokens/judge.ts).
 */
import { OAuthError } from './oauth-error.ts';
import type { OAuthContext } from './oauth-context.ts';

const KEY_ROOT = /^api_key:(key_[0-9a-f]{20})$/;

/** The permissions the root holds now; refuses (invalid_client) when it has stopped or is of a kind a client never records. */
export async function clientRootPermissions(ctx: OAuthContext, root: string): Promise<string[]> {
  const m = KEY_ROOT.exec(root);
  const row = m ? await ctx.iam.keyRow(m[1]!) : undefined;
  const owner = row ? await ctx.iam.principal(row.owner_id) : undefined;
  const now = ctx.core.clock.now();
  if (row?.status !== 'active' || (row.expires_at !== null && row.expires_at <= now) || owner?.status !== 'active') {
    throw new OAuthError('invalid_client', 'the credential that registered this client is no longer active');
  }
  return (await ctx.iam.keyAuthority(row)).permissions as string[];
}
