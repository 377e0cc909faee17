/**
 * Authorization codes: random, stored as SHA-256 hashes, 60 s, single use.
 * Redeeming a code twice refuses the second attempt and revokes every token
 * the first redemption issued (RFC 6749 §4.1.2, OAuth 2.1 §4.1.3).
 */
import { hashSecret } from '../../core/apikey/hash.ts';
import { verifyPkceS256 } from '../../core/tokens/pkce.ts';
import { randomToken } from './issue.ts';
import { OAuthError } from './oauth-error.ts';
import type { OAuthContext } from './oauth-context.ts';
import * as repo from './repository.ts';
import { OAUTH } from './settings.ts';

export interface CodeGrant {
  clientId: string;
  subjectId: string;
  redirectUri: string;
  scope: string[];
  codeChallenge: string;
  /** The audience the authorization request named (RFC 8707), consented to with the scopes; null: none named. */
  resource: string | null;
}

export async function createCode(ctx: OAuthContext, g: CodeGrant): Promise<string> {
  const code = randomToken(32);
  const now = ctx.core.clock.now();
  await ctx.core.store.write((tx) =>
    repo.insertCode(tx, {
      code_hash: hashSecret(code),
      client_id: g.clientId,
      subject_id: g.subjectId,
      redirect_uri: g.redirectUri,
      scope: g.scope,
      code_challenge: g.codeChallenge,
      resource: g.resource,
      created_at: now,
      expires_at: now + OAUTH.codeTtlSeconds * 1000,
    }),
  );
  return code;
}

/**
 * Redeems a code for `clientId`: checks single use (a reuse revokes what the
 * code issued), expiry, client, exact redirect_uri, PKCE S256. Marks it used.
 * Returns the grant and a function recording the jti/exp it issued.
 */
export async function redeemCode(
  ctx: OAuthContext,
  code: string,
  clientId: string,
  redirectUri: string | undefined,
  verifier: string | undefined,
): Promise<{ grant: CodeGrant; recordIssued(jti: string, exp: number, family?: { jti: string; exp: number }): Promise<void> }> {
  const { core, iam, denylist } = ctx;
  if (!code || code.length > 200) throw new OAuthError('invalid_grant', 'unknown authorization code');
  const hash = hashSecret(code);
  const row = await repo.codeByHash(core.store, hash);
  if (!row) throw new OAuthError('invalid_grant', 'unknown authorization code');
  const now = core.clock.now();
  if (row.used_at !== null) {
    await core.store.write(async (tx) => {
      // Read again inside the transaction: what the first redemption issued may have been recorded since.
      const issued = (await repo.codeByHash(tx, hash))?.issued ?? [];
      await iam.audit(tx, {
        at: now,
        actor: `oauth_client:${clientId}`,
        action: 'oauth.code.reuse',
        target: row.subject_id,
        outcome: 'refused',
        details: { revoked: issued.map((t) => t.jti) },
      });
      for (const t of issued) await denylist.denyTx(tx, t.jti, t.exp);
    });
    throw new OAuthError('invalid_grant', 'authorization code already used; the tokens it issued are revoked');
  }
  if (row.expires_at <= now) throw new OAuthError('invalid_grant', 'authorization code expired');
  if (row.client_id !== clientId) throw new OAuthError('invalid_grant', 'authorization code was issued to another client');
  if (redirectUri === undefined || redirectUri !== row.redirect_uri)
    throw new OAuthError('invalid_grant', 'redirect_uri does not match the authorization request');
  if (verifier === undefined || !(await verifyPkceS256(verifier, row.code_challenge)))
    throw new OAuthError('invalid_grant', 'PKCE verification failed');
  const claimed = await core.store.write((tx) => repo.claimCode(tx, hash, now));
  if (!claimed) throw new OAuthError('invalid_grant', 'authorization code already used');
  return {
    grant: {
      clientId: row.client_id,
      subjectId: row.subject_id,
      redirectUri: row.redirect_uri,
      scope: row.scope,
      codeChallenge: row.code_challenge,
      resource: row.resource,
    },
    async recordIssued(jti, exp, family) {
      // A second redemption revokes these: the access token, and the refresh family (the root of what it gives).
      await core.store.write((tx) => repo.setCodeIssued(tx, hash, family ? [{ jti, exp }, family] : [{ jti, exp }]));
    },
  };
}
