/**
 * Provider secrets (API keys of model providers), encrypted at rest.
 *
 * `POST /admin/secrets` stores a value and returns only its `secret_id`; no
 * route ever returns the value (the others list, rotate and delete it:
 * cell/ai/routes-secrets.ts). Values are sealed with AES-256-GCM under a
 * 32-byte key kept in `<dataDir>/secrets.key` (created on first use, mode
 * 0600); each value has its own random 96-bit nonce and the secret id is the
 * additional authenticated data, so a ciphertext moved to another row does
 * not open. Secret values are never logged and never put in errors.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Holding } from '../../core/authority/contain.ts';
import { ServiceError } from '../../core/errors.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import { newId } from '../ids.ts';
import type { CellCore } from '../context.ts';
import type { CredentialFacts, Iam } from '../iam/api.ts';
import type { Reader } from '../store/types.ts';
import { sealedSecret, secretCreator, touchSecret } from './repository.ts';

const KEY_FILE = 'secrets.key';

/** Reads the cell's secrets key from `dataDir`, creating it (0600) when absent. */
export function loadSecretsKey(dataDir: string): Buffer {
  const path = join(dataDir, KEY_FILE);
  if (existsSync(path)) {
    const key = readFileSync(path);
    if (key.length !== 32) throw new TypeError(`${path} must hold exactly 32 bytes`);
    return key;
  }
  mkdirSync(dataDir, { recursive: true });
  const key = randomBytes(32);
  writeFileSync(path, key, { mode: 0o600, flag: 'wx' });
  chmodSync(path, 0o600);
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

/** A fresh secret id and the value sealed under it (sealing is random: do it before the transaction). */
export function prepareSecret(key: Buffer, value: string): { secretId: string; sealed: Uint8Array } {
  const secretId = newId('sec');
  return { secretId, sealed: sealSecret(key, secretId, value) };
}

/**
 * A stored secret as the right to act on a credential sees it
 * (cell/iam/iam.ts `credentialVerdict`): it belongs to its creator; its
 * authority is the right to use it, `secrets.write` for the creator's own
 * credential (what made it) and `secrets.use` for anyone else, who must also
 * manage the creator. A creator acting through a credential without
 * `secrets.write` (a narrow key of theirs) may not point it anywhere.
 */
export function secretFacts(secretId: string, creator: string, actorId: string): CredentialFacts {
  return {
    kind: 'secret',
    id: secretId,
    ownerId: creator,
    authority: { permissions: [creator === actorId ? PERMISSIONS.secretsWrite : PERMISSIONS.secretsUse] },
  };
}

/**
 * Whether `holder` may bind the secret to a provider (and so send it wherever
 * the provider's base_url points), at registration, at a change of the
 * provider's destination and before every call: the right to act on the
 * secret. An unknown secret: nobody.
 */
export async function mayUseSecret(
  db: Reader,
  iam: Pick<Iam, 'credentialVerdict'>,
  holder: { principalId: string; holding: Holding },
  secretId: string,
): Promise<boolean> {
  const creator = await secretCreator(db, secretId);
  if (creator === undefined) return false;
  return mayUseSecretAs(iam, holder, secretId, creator);
}

/** mayUseSecret for a secret whose creator the caller has read already (a provider call). */
export async function mayUseSecretAs(
  iam: Pick<Iam, 'credentialVerdict'>,
  holder: { principalId: string; holding: Holding },
  secretId: string,
  creator: string,
): Promise<boolean> {
  return (await iam.credentialVerdict(holder, secretFacts(secretId, creator, holder.principalId))).ok;
}

/** How stale a secret's `last_used_at` may be: one write per secret per minute at most, however many calls use it. */
export const SECRET_USE_RESOLUTION_MS = 60_000;

/**
 * The plaintext of a stored secret, for a provider call only. Records the use
 * (`last_used_at`, to the minute); a failure to record it is logged and does
 * not stop the call.
 */
/** Values opened, by secrets key then secret id, with the sealed bytes they came from. */
const opened = new WeakMap<Buffer, Map<string, { sealed: Buffer; value: string }>>();
/** Secrets kept open per key; past it the map starts over. */
const OPENED_MAX = 256;

/**
 * openSecret, once per sealed value: every model call of a provider reads its
 * secret's row, and opening it again each time (a cipher context, AES-GCM)
 * was ~2 % of a run step's CPU. The value is reused only while the row holds
 * the very bytes it was opened from, so a rotation, a tampered row or a row
 * moved under another id is opened (and refused) afresh. The plaintext stays
 * in the process's memory, where the key that opens it already is.
 */
export function openSecretCached(key: Buffer, secretId: string, sealed: Uint8Array): string {
  let byId = opened.get(key);
  if (byId === undefined) {
    byId = new Map();
    opened.set(key, byId);
  }
  const hit = byId.get(secretId);
  if (hit?.sealed.equals(sealed)) return hit.value;
  const value = openSecret(key, secretId, sealed);
  if (byId.size >= OPENED_MAX) byId.clear();
  byId.set(secretId, { sealed: Buffer.from(sealed), value });
  return value;
}

export async function readSecret(
  ctx: { core: CellCore; secretsKey(): Buffer },
  secretId: string,
  /** The sealed row, when the caller read it already for this call. */
  read?: Promise<Awaited<ReturnType<typeof sealedSecret>>>,
): Promise<string> {
  const { store, clock, log } = ctx.core;
  const row = await (read ?? sealedSecret(store, secretId));
  if (!row)
    throw new ServiceError('service_unavailable', 'the provider secret is missing', {
      details: { reason: 'secret_missing', secret_id: secretId },
    });
  let value: string;
  try {
    value = openSecretCached(ctx.secretsKey(), secretId, row.sealed);
  } catch {
    // The key file changed or the row was altered: refuse without the cause.
    throw new ServiceError('service_unavailable', 'the provider secret cannot be opened', {
      details: { reason: 'secret_unreadable', secret_id: secretId },
    });
  }
  const now = clock.now();
  if (row.lastUsedAt === null || now - row.lastUsedAt >= SECRET_USE_RESOLUTION_MS) {
    await store
      // One statement on a row every run using the provider shares: row locks, never a serialization failure.
      .write((tx) => touchSecret(tx, secretId, now), { isolation: 'row-locks' })
      .catch((e: unknown) => {
        log.warn('ai: could not record a secret use', { secret_id: secretId, error: e });
      });
  }
  return value;
}
