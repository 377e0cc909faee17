/**
 * API key secrets: `svck_live_` + unpadded base64url of 32 random bytes
 * (256 bits), 53 characters in all. The randomness source is passed in
 * (`crypto.getRandomValues` in production, a seeded source in tests).
 */
import { b64url } from '../canonical.ts';

/** Prefix of every API key secret (service spec, API key). */
export const KEY_PREFIX = 'svck_live_';

/** Bytes of randomness in a secret. */
export const SECRET_BYTES = 32;

const SECRET_FORMAT = /^svck_live_[A-Za-z0-9_-]{43}$/;

/**
 * A fresh secret from `randomBytes(32)`.
 * @throws TypeError when the source returns anything but 32 bytes.
 */
export function generateSecret(randomBytes: (n: number) => Uint8Array): string {
  const bytes = randomBytes(SECRET_BYTES);
  if (!(bytes instanceof Uint8Array) || bytes.length !== SECRET_BYTES) {
    throw new TypeError(`generateSecret: randomness source must return ${SECRET_BYTES} bytes`);
  }
  return KEY_PREFIX + b64url(bytes);
}

/**
 * True when `s` has the exact shape of a secret: the prefix then 43 base64url
 * characters. A cheap pre-check before hashing and lookup; it says nothing
 * about whether the key exists.
 */
export function isSecretFormat(s: string): boolean {
  return typeof s === 'string' && SECRET_FORMAT.test(s);
}
