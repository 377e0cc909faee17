/**
 * Sealing under the group's secrets key: AES-256-GCM, a fresh random 96-bit
 * nonce per value, and additional authenticated data naming what the value
 * is (a provider secret's id, a private key's table and kid, the key check),
 * so a ciphertext moved to another row does not open. The stored form is
 * nonce(12) || ciphertext || tag(16).
 *
 * Keys for other purposes (the backup's MAC) are derived from the secrets key
 * with HKDF-SHA256 (RFC 5869), one `info` per purpose, never the key itself.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

/**
 * Seals `value` under `key`, bound to `aad`.
 * @example sealSecret(key, 'sec_01…', 'sk-live-…')
 */
export function sealSecret(key: Buffer, aad: string, value: string): Uint8Array {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv);
  c.setAAD(Buffer.from(aad, 'utf8'));
  const body = Buffer.concat([c.update(value, 'utf8'), c.final()]);
  return new Uint8Array(Buffer.concat([iv, body, c.getAuthTag()]));
}

/** Opens a sealed value; throws TypeError when it was sealed under another key, bound to other data, or tampered with. */
export function openSecret(key: Buffer, aad: string, sealed: Uint8Array): string {
  const b = Buffer.from(sealed);
  if (b.length < 28) throw new TypeError('sealed secret too short');
  const d = createDecipheriv('aes-256-gcm', key, b.subarray(0, 12));
  d.setAAD(Buffer.from(aad, 'utf8'));
  d.setAuthTag(b.subarray(b.length - 16));
  return Buffer.concat([d.update(b.subarray(12, b.length - 16)), d.final()]).toString('utf8');
}

/** What a key derived from the secrets key is for (each its own HKDF `info`). */
export type DerivedKeyPurpose = 'backup-mac-v2';

/** A 32-byte key for `purpose`, derived from the secrets key (HKDF-SHA256, RFC 5869; no salt). */
export function deriveKey(key: Buffer, purpose: DerivedKeyPurpose): Buffer {
  return Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), `agent-cell ${purpose}`, 32));
}
