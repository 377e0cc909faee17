/**
 * Refresh tokens (RFC 6749 §6, OAuth 2.1 §4.3, RFC 9700 §4.14), for MCP
 * clients: a desktop assistant or an IDE holds a connection for days, and an
 * access token lives 10 minutes; without a refresh token it would send its
 * user through the consent page every 10 minutes.
 *
 * - Only after an authorization code, to a client registered with the
 *   `refresh_token` grant (admin-registered, self-registered or described by
 *   a metadata document), public clients included. Never for
 *   client_credentials, the device flow, token exchange or SATs.
 * - Opaque (`ort_` + 32 random bytes), stored as SHA-256, single use and
 *   rotated: each refresh answers a new one. The tokens of one consent form a
 *   family; presenting a used one again (a stolen copy, or the original after
 *   the thief used it) ends the family and revokes the access tokens it gave
 *   (their root is `token:<family>`, denylisted until the family expires).
 * - Bound to its client (another client's presentation is `invalid_grant`,
 *   the same answer as an unknown token), to its audience (a `resource` that
 *   differs is `invalid_target`), and, when the code was redeemed with a DPoP
 *   proof, to that key (RFC 9449 §5: a refresh without a proof of the same
 *   key is `invalid_grant`).
 * - Each lives 14 days unused; a family 30 days from the consent.
 * - Authority at each refresh: the family's scope ∩ the subject's
 *   permissions now ∩ the client's registered scope now (and what was asked):
 *   a demoted subject gets less, an inactive one nothing (`invalid_grant`).
 * - Revoking one at /oauth/revoke ends its family; deleting the client
 *   deletes its refresh tokens.
 */
import { hashSecret } from '../../core/apikey/hash.ts';
import type { Tx } from '../store/types.ts';
import { newId } from '../ids.ts';
import { GRANT_REFRESH_TOKEN, type ClientRecord } from './clients.ts';
import { randomToken } from './issue.ts';
import { OAuthError } from './oauth-error.ts';
import type { OAuthContext } from './oauth-context.ts';
import * as repo from './repository.ts';
import { OAUTH } from './settings.ts';

/** The prefix of refresh tokens (and nothing else the cell issues). */
export const REFRESH_PREFIX = 'ort_';

/** A new family for a code redemption, when the client may refresh: its id (the access tokens' root) and expiry (ms). */
export function newFamily(ctx: OAuthContext, client: ClientRecord | null): { id: string; expiresAt: number } | null {
  if (!client?.grant_types.includes(GRANT_REFRESH_TOKEN)) return null;
  return { id: newId('rtf'), expiresAt: ctx.core.clock.now() + OAUTH.refreshFamilyTtlMs };
}

/** Writes a refresh token of `family`; returns the token (shown once, to the client). */
export async function issueRefresh(
  ctx: OAuthContext,
  g: {
    family: string;
    familyExpiresAt: number;
    clientId: string;
    subjectId: string;
    scope: string[];
    audience: string;
    jkt: string | null;
  },
  tx?: Tx,
): Promise<string> {
  const token = `${REFRESH_PREFIX}${randomToken(32)}`;
  const now = ctx.core.clock.now();
  const row = {
    token_hash: hashSecret(token),
    family: g.family,
    client_id: g.clientId,
    subject_id: g.subjectId,
    scope: g.scope,
    audience: g.audience,
    jkt: g.jkt,
    created_at: now,
    expires_at: Math.min(now + OAUTH.refreshIdleTtlMs, g.familyExpiresAt),
    family_expires_at: g.familyExpiresAt,
  };
  if (tx) await repo.insertRefresh(tx, row);
  else await ctx.core.store.write((t) => repo.insertRefresh(t, row));
  return token;
}

/** Ends a family: its tokens refresh no more, and the access tokens it gave are revoked (their root). */
export async function endFamily(ctx: OAuthContext, tx: Tx, family: string, familyExpiresAt: number): Promise<void> {
  await repo.endRefreshFamily(tx, family, ctx.core.clock.now());
  await ctx.denylist.denyTx(tx, family, Math.ceil(familyExpiresAt / 1000));
}

/**
 * Takes a refresh token presented by `clientId` for one refresh: checks it, runs `before` (the
 * caller's own checks of what it would issue), marks it used, or ends its family when it was used
 * before. Returns its row (the grant to renew).
 */
export async function redeemRefresh(
  ctx: OAuthContext,
  token: string,
  clientId: string,
  jkt: string | undefined,
  before: (row: repo.RefreshRow) => Promise<void>,
): Promise<repo.RefreshRow> {
  const { core } = ctx;
  const unknown = () => new OAuthError('invalid_grant', 'unknown, expired or revoked refresh token');
  if (!token.startsWith(REFRESH_PREFIX) || token.length > 200) throw unknown();
  const hash = hashSecret(token);
  const row = await repo.refreshByHash(core.store, hash);
  // Another client's token is unknown to this one: it learns nothing, and the owner's family is not ended by it.
  if (!row || row.client_id !== clientId) throw unknown();
  const now = core.clock.now();
  if (row.used_at !== null) {
    await core.store.write(async (tx) => {
      await endFamily(ctx, tx, row.family, row.family_expires_at);
      await ctx.iam.audit(tx, {
        at: now,
        actor: `oauth_client:${clientId}`,
        action: 'oauth.refresh.reuse',
        target: row.subject_id,
        outcome: 'refused',
        details: { family: row.family },
      });
    });
    throw new OAuthError('invalid_grant', 'refresh token already used: its grant is revoked');
  }
  if (row.expires_at <= now || (await ctx.denylist.isRevoked(row.family))) throw unknown();
  if (row.jkt !== null && row.jkt !== jkt)
    throw new OAuthError('invalid_grant', 'this refresh token is bound to a DPoP key: refresh with a proof of it');
  // What the grant would give now is decided before the token is spent: a refusal leaves it usable.
  await before(row);
  const claimed = await core.store.write((tx) => repo.claimRefresh(tx, hash, now));
  if (!claimed) {
    // Used a moment ago by someone else: a reuse.
    await core.store.write((tx) => endFamily(ctx, tx, row.family, row.family_expires_at));
    throw new OAuthError('invalid_grant', 'refresh token already used: its grant is revoked');
  }
  return row;
}

/** Revokes the family of a refresh token presented by its client (RFC 7009); anything else is a silent no-op. */
export async function revokeRefresh(ctx: OAuthContext, token: string, clientId: string): Promise<void> {
  if (!token.startsWith(REFRESH_PREFIX) || token.length > 200) return;
  const row = await repo.refreshByHash(ctx.core.store, hashSecret(token));
  if (!row || row.client_id !== clientId) return;
  await ctx.core.store.write((tx) => endFamily(ctx, tx, row.family, row.family_expires_at));
}
