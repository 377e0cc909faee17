/**
 * Private signing keys at rest: the cell's identity keys (`cell_keys`: journals,
 * bundles) and the OAuth token signing keys (`oauth_signing_keys`) are stored
 * sealed with AES-256-GCM under the key provider secrets are sealed with
 * (cell/ai/secrets-key.ts: `<data>/secrets.key`, or the group's
 * `--secrets-key-file`), which never enters the store. A copy of the database
 * alone (a backup, a read-only role) opens no private key: it mints no token
 * and signs no journal or bundle.
 *
 * The stored form, in the `private_jwk` column, is a JSON object
 * `{ "sealed": 1, "kid": KID, "data": BASE64 }`; the sealed bytes are bound to
 * the key's kid and table (a sealed key moved to another row does not open).
 * A row still in the clear (a store written before sealing) is a JWK with its
 * private part `d`; `sealLegacyRows` reseals such rows when a cell starts.
 *
 * In a group the OAuth signing keys are shared, so every member must open
 * them: every member is given the same `--secrets-key-file`, as for provider
 * secrets. A member whose key does not open them refuses to start, naming the flag.
 */
import { SetupError } from '../runtime/setup-error.ts';
import { secretsKeyLoader } from './ai/secrets-key.ts';
import { openSecret, sealSecret } from './ai/secrets.ts';

/** What a `private_jwk` column holds once sealed. */
export interface SealedJwk {
  sealed: 1;
  kid: string;
  data: string;
}

/** The table a key belongs to: its sealed bytes open only there. */
export type KeyTable = 'cell_keys' | 'oauth_signing_keys';

const HINT = 'give every cell of the group the same --secrets-key-file (docs/multi-cell.md)';

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
 * Opens a stored `private_jwk` (sealed, or a legacy JWK in the clear, returned
 * as is). A sealed key this cell's key does not open is a SetupError naming
 * the flag: the cell cannot sign, and says why.
 */
export function openJwk(key: Buffer, table: KeyTable, kid: string, stored: unknown): JsonWebKey {
  if (!isSealedJwk(stored)) return stored as JsonWebKey;
  if (stored.kid !== kid) throw new SetupError(`the private key stored for ${kid} in ${table} was sealed for ${stored.kid}`);
  try {
    return JSON.parse(openSecret(key, aad(table, kid), Buffer.from(stored.data, 'base64'))) as JsonWebKey;
  } catch {
    throw new SetupError(
      `this cell's secrets key does not open the private key ${kid} (${table}): it was sealed by a cell with another key; ${HINT}`,
    );
  }
}

/** The key private signing keys are sealed with: the provider secrets' key (loaded once, created on first use when the cell keeps its own). */
export function sealingKeyLoader(config: Parameters<typeof secretsKeyLoader>[0]): () => Buffer {
  return secretsKeyLoader(config);
}

/** Of stored private parts (`{ kid, text }`), those still in the clear, each with its JWK. */
export function inTheClear(rows: readonly { kid: string; text: string }[]): { kid: string; text: string; jwk: JsonWebKey }[] {
  const out: { kid: string; text: string; jwk: JsonWebKey }[] = [];
  for (const r of rows) {
    const v = JSON.parse(r.text) as unknown;
    if (!isSealedJwk(v)) out.push({ ...r, jwk: v as JsonWebKey });
  }
  return out;
}
