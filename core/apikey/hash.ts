/**
 * API key secrets are stored and looked up only by their SHA-256 (hex). A
 * secret carries 256 bits of randomness, so an unsalted fast hash is the
 * right tool (no password stretching needed) and makes lookup by hash possible.
 */
import { sha256Hex } from '../canonical.ts';

/** Lower-case hex SHA-256 of the secret's UTF-8 bytes: the only form a secret is stored in. */
export function hashSecret(secret: string): string {
  return sha256Hex(secret);
}

/**
 * Compares two strings in time that depends only on the longer length: no
 * early exit on the first difference, and a length mismatch still walks
 * every character.
 */
export function constantTimeEqual(a: string, b: string): boolean {
  const n = Math.max(a.length, b.length);
  let diff = a.length ^ b.length;
  for (let i = 0; i < n; i++) {
    // charCodeAt past the end is NaN; `| 0` turns it into 0 without a branch.
    diff |= (a.charCodeAt(i) | 0) ^ (b.charCodeAt(i) | 0);
  }
  return diff === 0;
}
