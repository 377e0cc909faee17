/**
 * API keys: mint, rotate (with a grace window for the previous secret),
 * revoke, and the public view. Only SHA-256 hashes are stored; a secret is
 * returned once, at mint or rotate. Whether a presented key is good is core's
 * verifyPresentedKey (Iam.authenticateKeySecret), the function the edge runs
 * against its bundle.
 */
import { hashSecret } from '../../core/apikey/hash.ts';
import { generateSecret, isSecretFormat } from '../../core/apikey/secret.ts';
import type { AuthorityEnvelope } from '../../core/authority/envelope.ts';
import { toCeiling } from '../../core/authority/ceiling.ts';
import { conflict } from '../../core/errors.ts';
import { isoTime, isoTimeOrNull } from '../../core/iso-time.ts';
import type { Clock } from '../context.ts';
import { newId } from '../ids.ts';
import type { Tx } from '../store/types.ts';
import { insertKey, revokeKey, rotateKeyHashes, type KeyRow } from './repository.ts';
import type { ApiKeyView, ApiKeyWithSecretView } from './routes-keys.ts';

export type { KeyRow } from './repository.ts';

export interface MintInput {
  ownerId: string;
  name: string;
  scopes: string[];
  rateLimitRpm: number | null;
  allowedIps: string[];
  allowedRegions: string[];
  expiresAt: number | null;
  createdBy: string;
  /** Envelope cap of the key; null or absent: the owner's full ceiling. */
  authority?: AuthorityEnvelope | null;
  /** A secret generated beforehand (bootstrap writes it to disk before committing); default: a fresh one. */
  secret?: string;
}

const randomBytes = (n: number) => crypto.getRandomValues(new Uint8Array(n));

/** A fresh API key secret. */
export function newSecret(): string {
  return generateSecret(randomBytes);
}

/** Mints inside the caller's transaction; returns the row and the secret (shown once). */
export async function mintKeyTx(clock: Clock, tx: Tx, input: MintInput): Promise<{ row: KeyRow; secret: string }> {
  const secret = input.secret ?? newSecret();
  if (!isSecretFormat(secret)) throw new TypeError('mintKeyTx: not an API key secret');
  const row: KeyRow = {
    id: newId('key'),
    owner_id: input.ownerId,
    name: input.name,
    hash: hashSecret(secret),
    prev_hash: null,
    prev_not_after: null,
    scopes: [...input.scopes],
    rate_limit_rpm: input.rateLimitRpm,
    allowed_ips: [...input.allowedIps],
    allowed_regions: [...input.allowedRegions],
    status: 'active',
    created_at: clock.now(),
    created_by: input.createdBy,
    expires_at: input.expiresAt,
    rotated_at: null,
    revoked_at: null,
    deleted_at: null,
    authority: input.authority ? { ...input.authority } : null,
  };
  await insertKey(tx, row);
  return { row, secret };
}

/**
 * New secret; the previous one keeps verifying until now + grace, never past
 * the key's own expiry. Only the most recent previous secret survives a rotation.
 */
export async function rotateKeyTx(clock: Clock, tx: Tx, row: KeyRow, graceSeconds: number): Promise<{ row: KeyRow; secret: string }> {
  const now = clock.now();
  if (row.status !== 'active') throw conflict(`key is ${row.status} and cannot be rotated`, { reason: 'key_not_active' });
  if (row.expires_at !== null && row.expires_at <= now) throw conflict('key has expired and cannot be rotated', { reason: 'key_expired' });
  const secret = newSecret();
  let notAfter = now + graceSeconds * 1000;
  if (row.expires_at !== null) notAfter = Math.min(notAfter, row.expires_at);
  const next: KeyRow = { ...row, prev_hash: row.hash, prev_not_after: notAfter, hash: hashSecret(secret), rotated_at: now };
  // Two rotations of one key at once (two cells, two clients): one wins; the other's secret would never work.
  if ((await rotateKeyHashes(tx, row.id, next.hash, row.hash, notAfter, now)) === 0) {
    throw conflict('the key was rotated or revoked meanwhile; read it again and retry', { reason: 'concurrent_rotation' });
  }
  return { row: next, secret };
}

/** Revokes (idempotent: a revoked or purged key is returned as it is). */
export async function revokeKeyTx(clock: Clock, tx: Tx, row: KeyRow): Promise<KeyRow> {
  if (row.status === 'revoked' || row.status === 'purged') return row;
  const now = clock.now();
  await revokeKey(tx, row.id, now);
  return { ...row, status: 'revoked', revoked_at: now };
}

/** Public view (`ApiKey`): never a hash, the secret only when just minted or rotated (`ApiKeyWithSecret`). */
export function keyView(row: KeyRow): ApiKeyView;
export function keyView(row: KeyRow, secret: string): ApiKeyWithSecretView;
export function keyView(row: KeyRow, secret?: string): ApiKeyView | ApiKeyWithSecretView {
  return {
    key_id: row.id,
    ...(secret !== undefined ? { secret } : {}),
    owner_id: row.owner_id,
    name: row.name,
    status: row.status,
    scopes: row.scopes,
    rate_limit_rpm: row.rate_limit_rpm,
    allowed_ips: row.allowed_ips,
    allowed_regions: row.allowed_regions,
    created_at: isoTime(row.created_at),
    created_by: row.created_by,
    expires_at: isoTimeOrNull(row.expires_at),
    rotated_at: isoTimeOrNull(row.rotated_at),
    previous_secret_valid_until: row.prev_hash ? isoTimeOrNull(row.prev_not_after) : null,
    revoked_at: isoTimeOrNull(row.revoked_at),
    authority: row.authority === null ? null : toCeiling(row.authority),
  };
}
