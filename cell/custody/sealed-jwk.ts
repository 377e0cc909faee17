/**
 * Private signing keys at rest: the cell's identity keys (`cell_keys`:
 * journals, bundles) and the OAuth token signing keys (`oauth_signing_keys`)
 * are stored sealed under the group's secrets key (cell/custody/seal.ts),
 * which never enters the store. A copy of the database alone (a backup, a
 * read-only role) opens no private key: it mints no token and signs no
 * journal or bundle.
 *
 * The stored form, in the `private_jwk` column, is a JSON object
 * `{ "sealed": 1, "kid": KID, "data": BASE64 }`; the sealed bytes are bound to
 * the key's kid and table (a sealed key moved to another row does not open).
 *
 * Trust: a key row is the group's only when its private part opens under the
 * group's key and is the private half of the row's public key
 * (`trustedPrivateJwk`). A row that does not (sealed under another key,
 * written in the clear, its public half swapped) is neither published nor
 * used: someone who can write the store but does not hold the key cannot add
 * a key the group signs with or that anyone is told to trust.
 */
import { SetupError } from '../../runtime/setup-error.ts';
import { SECRETS_KEY_HINT } from './key-file.ts';
import { openSecret, sealSecret } from './seal.ts';

/** What a `private_jwk` column holds once sealed. */
export interface SealedJwk {
  sealed: 1;
  kid: string;
  data: string;
}

/** The table a key belongs to: its sealed bytes open only there. */
export type KeyTable = 'cell_keys' | 'oauth_signing_keys';

function aad(table: KeyTable, kid: string): string {
  return `agent-cell private key v1:${table}:${kid}`;
}

/** True when a stored `private_jwk` is sealed (not a JWK in the clear). */
export function isSealedJwk(v: unknown): v is SealedJwk {
  return typeof v === 'object' && v !== null && (v as { sealed?: unknown }).sealed === 1 && typeof (v as SealedJwk).data === 'string';
}

/** Seals a private JWK for storage in `table` under `kid`. */
export function sealJwk(key: Buffer, table: KeyTable, kid: string, jwk: JsonWebKey): SealedJwk {
  return { sealed: 1, kid, data: Buffer.from(sealSecret(key, aad(table, kid), JSON.stringify(jwk))).toString('base64') };
}

/**
 * Opens a stored, sealed `private_jwk`. One `key` does not open (sealed by a
 * process with another key, or not sealed at all): a SetupError naming the
 * flag, for the places that must sign and cannot.
 */
export function openJwk(key: Buffer, table: KeyTable, kid: string, stored: unknown): JsonWebKey {
  if (!isSealedJwk(stored)) throw new SetupError(`the private key ${kid} (${table}) is stored in the clear: it is not the group's key`);
  if (stored.kid !== kid) throw new SetupError(`the private key stored for ${kid} in ${table} was sealed for ${stored.kid}`);
  try {
    return JSON.parse(openSecret(key, aad(table, kid), Buffer.from(stored.data, 'base64'))) as JsonWebKey;
  } catch {
    throw new SetupError(
      `this cell's secrets key does not open the private key ${kid} (${table}): it was sealed by a process with another key; ${SECRETS_KEY_HINT}`,
    );
  }
}

/** A stored key pair as its table holds it. */
export interface StoredKeyPair {
  kid: string;
  private_jwk: unknown;
  public_jwk: JsonWebKey;
}

/**
 * The private JWK of a stored key pair when the row is the group's: sealed,
 * opened by `key`, and the private half of the row's public key (same key
 * type, curve and public value). Null otherwise: such a row is neither
 * published nor used.
 */
export function trustedPrivateJwk(key: Buffer, table: KeyTable, row: StoredKeyPair): JsonWebKey | null {
  if (!isSealedJwk(row.private_jwk) || row.private_jwk.kid !== row.kid) return null;
  let jwk: JsonWebKey;
  try {
    jwk = JSON.parse(openSecret(key, aad(table, row.kid), Buffer.from(row.private_jwk.data, 'base64'))) as JsonWebKey;
  } catch {
    return null;
  }
  const pub = row.public_jwk;
  if (typeof jwk.d !== 'string' || typeof pub !== 'object' || pub === null) return null;
  if (jwk.kty !== pub.kty || jwk.crv !== pub.crv || typeof jwk.x !== 'string' || jwk.x !== pub.x) return null;
  return jwk;
}
