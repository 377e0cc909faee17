/**
 * Provider secrets (API keys of model providers), encrypted at rest.
 *
 * `POST /admin/secrets` stores a value and returns only its `secret_id`; no
 * route ever returns the value. Values are sealed with AES-256-GCM under a
 * 32-byte key kept in `<dataDir>/secrets.key` (created on first use, mode
 * 0600); each value has its own random 96-bit nonce and the secret id is the
 * additional authenticated data, so a ciphertext moved to another row does
 * not open. Secret values are never logged and never put in errors.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ServiceError } from '../../core/errors.ts';
import type { Cell } from '../context.ts';
import type { Tx } from '../store/types.ts';
import { newId } from '../iam/ids.ts';
import { grants } from '../../core/authority/scopes.ts';
import { PERMISSIONS } from '../../core/permissions.ts';

const KEY_FILE = 'secrets.key';
const keys = new WeakMap<Cell, Buffer>();

/** The cell's secrets key, created (0600) on first use. */
export function secretsKey(cell: Cell): Buffer {
  const cached = keys.get(cell);
  if (cached) return cached;
  const path = join(cell.config.dataDir, KEY_FILE);
  let key: Buffer;
  if (existsSync(path)) {
    key = readFileSync(path);
    if (key.length !== 32) throw new TypeError(`${path} must hold exactly 32 bytes`);
  } else {
    mkdirSync(cell.config.dataDir, { recursive: true });
    key = randomBytes(32);
    writeFileSync(path, key, { mode: 0o600, flag: 'wx' });
    chmodSync(path, 0o600);
  }
  keys.set(cell, key);
  return key;
}

/** AES-256-GCM seal: nonce(12) || ciphertext || tag(16). */
export function sealSecret(key: Buffer, secretId: string, value: string): Uint8Array {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv);
  c.setAAD(Buffer.from(secretId, 'utf8'));
  const body = Buffer.concat([c.update(value, 'utf8'), c.final()]);
  return new Uint8Array(Buffer.concat([iv, body, c.getAuthTag()]));
}

/** Opens a sealed value; throws TypeError when it was tampered with or moved. */
export function openSecret(key: Buffer, secretId: string, sealed: Uint8Array): string {
  const b = Buffer.from(sealed);
  if (b.length < 28) throw new TypeError('sealed secret too short');
  const d = createDecipheriv('aes-256-gcm', key, b.subarray(0, 12));
  d.setAAD(Buffer.from(secretId, 'utf8'));
  d.setAuthTag(b.subarray(b.length - 16));
  return Buffer.concat([d.update(b.subarray(12, b.length - 16)), d.final()]).toString('utf8');
}

export interface SecretMeta { secret_id: string; name: string; created_at: string; created_by: string }

/** Seals and stores a value (call outside the transaction's hot path: sealing is random). */
export function prepareSecret(cell: Cell, value: string): { secretId: string; sealed: Uint8Array } {
  const secretId = newId('sec');
  return { secretId, sealed: sealSecret(secretsKey(cell), secretId, value) };
}

export function insertSecretTx(tx: Tx, row: { secretId: string; name: string; sealed: Uint8Array; at: number; by: string }): void {
  tx.run('INSERT INTO ai_secrets (secret_id, name, sealed, created_at, created_by) VALUES (?, ?, ?, ?, ?)', [
    row.secretId, row.name, row.sealed, row.at, row.by,
  ]);
}

export function secretExists(cell: Cell, secretId: string): boolean {
  return cell.store.get('SELECT 1 AS x FROM ai_secrets WHERE secret_id = ?', [secretId]) !== undefined;
}

/**
 * Whether a principal holding `permissions` may bind the secret to a provider
 * (and so send it wherever the provider's base_url points): the secret's
 * creator may, anyone else needs `secrets.use`. An unknown secret: nobody.
 */
export function mayUseSecret(cell: Cell, principalId: string, permissions: readonly string[], secretId: string): boolean {
  const row = cell.store.get<{ created_by: string }>('SELECT created_by FROM ai_secrets WHERE secret_id = ?', [secretId]);
  if (!row) return false;
  return row.created_by === principalId || grants(permissions, PERMISSIONS.secretsUse);
}

/** The plaintext of a stored secret, for a provider call only. */
export function readSecret(cell: Cell, secretId: string): string {
  const row = cell.store.get<{ sealed: Uint8Array }>('SELECT sealed FROM ai_secrets WHERE secret_id = ?', [secretId]);
  if (!row) throw new ServiceError('service_unavailable', 'the provider secret is missing', { details: { reason: 'secret_missing', secret_id: secretId } });
  try {
    return openSecret(secretsKey(cell), secretId, row.sealed);
  } catch {
    // The key file changed or the row was altered: refuse without the cause.
    throw new ServiceError('service_unavailable', 'the provider secret cannot be opened', { details: { reason: 'secret_unreadable', secret_id: secretId } });
  }
}

export function listSecretMeta(cell: Cell, limit: number, offset: number): SecretMeta[] {
  return cell.store.all<{ secret_id: string; name: string; created_at: number; created_by: string }>(
    'SELECT secret_id, name, created_at, created_by FROM ai_secrets ORDER BY created_at, secret_id LIMIT ? OFFSET ?', [limit, offset],
  ).map((r) => ({ ...r, created_at: new Date(r.created_at).toISOString() }));
}
