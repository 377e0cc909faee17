/**
 * Authorization codes: random, stored as SHA-256 hashes, 60 s, single use.
 * Redeeming a code twice refuses the second attempt and revokes every token
 * the first redemption issued (RFC 6749 §4.1.2, OAuth 2.1 §4.1.3).
 */
import { hashSecret } from '../../core/apikey/hash.ts';
import { verifyPkceS256 } from '../../core/tokens/pkce.ts';
import type { Cell } from '../context.ts';
import { recordAuditTx } from '../iam/audit.ts';
import { denyTx } from './denylist.ts';
import { randomToken } from './issue.ts';
import { OAuthError } from './oauth-error.ts';
import { OAUTH } from './settings.ts';

export interface CodeGrant {
  clientId: string; subjectId: string; redirectUri: string; scope: string[]; codeChallenge: string;
}

interface CodeRow {
  code_hash: string; client_id: string; subject_id: string; redirect_uri: string; scope: string; code_challenge: string;
  created_at: number; expires_at: number; used_at: number | null; issued: string;
}

export async function createCode(cell: Cell, g: CodeGrant): Promise<string> {
  const code = randomToken(32);
  const now = cell.clock.now();
  await cell.store.write((tx) => tx.run(
    'INSERT INTO oauth_codes (code_hash, client_id, subject_id, redirect_uri, scope, code_challenge, created_at, expires_at, used_at, issued) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?)',
    [hashSecret(code), g.clientId, g.subjectId, g.redirectUri, JSON.stringify(g.scope), g.codeChallenge, now, now + OAUTH.codeTtlSeconds * 1000, '[]']));
  return code;
}

/**
 * Redeems a code for `clientId`: checks single use (a reuse revokes what the
 * code issued), expiry, client, exact redirect_uri, PKCE S256. Marks it used.
 * Returns the grant and a function recording the jti/exp it issued.
 */
export async function redeemCode(cell: Cell, code: string, clientId: string, redirectUri: string | undefined, verifier: string | undefined)
  : Promise<{ grant: CodeGrant; recordIssued(jti: string, exp: number): Promise<void> }> {
  if (!code || code.length > 200) throw new OAuthError('invalid_grant', 'unknown authorization code');
  const hash = hashSecret(code);
  const row = cell.store.get<CodeRow & Record<string, never>>('SELECT * FROM oauth_codes WHERE code_hash = ?', [hash]) as CodeRow | undefined;
  if (!row) throw new OAuthError('invalid_grant', 'unknown authorization code');
  const now = cell.clock.now();
  if (row.used_at !== null) {
    const issued = JSON.parse(row.issued) as { jti: string; exp: number }[];
    const after = await cell.store.write((tx) => {
      recordAuditTx(tx, { at: now, actor: `oauth_client:${clientId}`, action: 'oauth.code.reuse', target: row.subject_id, outcome: 'refused', details: { revoked: issued.map((t) => t.jti) } });
      return issued.map((t) => denyTx(cell, tx, t.jti, t.exp));
    });
    for (const f of after) f();
    throw new OAuthError('invalid_grant', 'authorization code already used; the tokens it issued are revoked');
  }
  if (row.expires_at <= now) throw new OAuthError('invalid_grant', 'authorization code expired');
  if (row.client_id !== clientId) throw new OAuthError('invalid_grant', 'authorization code was issued to another client');
  if (redirectUri === undefined || redirectUri !== row.redirect_uri) throw new OAuthError('invalid_grant', 'redirect_uri does not match the authorization request');
  if (verifier === undefined || !(await verifyPkceS256(verifier, row.code_challenge))) throw new OAuthError('invalid_grant', 'PKCE verification failed');
  const claimed = await cell.store.write((tx) => tx.run('UPDATE oauth_codes SET used_at = ? WHERE code_hash = ? AND used_at IS NULL', [now, hash]).changes);
  if (claimed !== 1) throw new OAuthError('invalid_grant', 'authorization code already used');
  return {
    grant: { clientId: row.client_id, subjectId: row.subject_id, redirectUri: row.redirect_uri, scope: JSON.parse(row.scope) as string[], codeChallenge: row.code_challenge },
    async recordIssued(jti, exp) {
      await cell.store.write((tx) => tx.run('UPDATE oauth_codes SET issued = ? WHERE code_hash = ?', [JSON.stringify([{ jti, exp }]), hash]));
    },
  };
}
