/**
 * The OAuth token signing keys: Ed25519, held in the store, separate from
 * the cell identity key. One key is active; rotation creates a new one and
 * retires the old, which stays in /oauth/jwks.json for the longest token
 * lifetime plus a minute, so tokens it signed keep verifying until they expire.
 *
 * The cells of a group share the keys (one table in one database): each
 * holds the keyring in memory and reloads it whenever the table changes,
 * its own writes and, through `store.onChange`, every other cell's (the
 * module wires that), so a key rotated on one cell is used and published by all.
 *
 * Only the group's keys count: a row whose private part is sealed under the
 * group's secrets key and is the half of its public key (cell/custody). A
 * row written without the key (sealed under another, in the clear, its public
 * half swapped) is neither published in the JWKS (so no token it signs
 * verifies) nor used to sign.
 */
import { createLocalJWKSet, importJWK, type JWK, type JWTVerifyGetKey } from 'jose';
import { generateEd25519 } from '../../core/crypto/ed25519.ts';
import type { CellCore } from '../context.ts';
import { SerialLoad } from './internal/serial.ts';
import { isSealedJwk, openJwk, type Custody, type Witness } from '../custody/api.ts';
import type { Reader } from '../store/types.ts';
import * as repo from './repository.ts';
import { maxTokenLifetimeSeconds } from './settings.ts';

export interface PublishedKey extends JWK {
  kid: string;
  alg: 'EdDSA';
  use: 'sig';
}

/** A snapshot of the signing keys: the one that signs, and those that verify (the JWKS). */
export interface Keyring {
  readonly active: { readonly kid: string; readonly key: CryptoKey };
  readonly published: readonly PublishedKey[];
  readonly keySet: JWTVerifyGetKey;
}

export class SigningKeys {
  #ring: Keyring | null = null;
  readonly #load = new SerialLoad(() => this.#reload());

  constructor(
    private readonly core: CellCore,
    /** The group's secrets key: keys are sealed under it, and only those it opens are the group's. */
    private readonly custody: Custody,
  ) {}

  /** Creates the first signing key when the group has none of its own (once for the whole group), then loads the keyring. */
  async ensure(): Promise<void> {
    const { store, clock } = this.core;
    if (!this.#active(await repo.signingKeys(store))) {
      const k = await generateEd25519();
      const sealed = this.custody.sealJwk('oauth_signing_keys', k.kid, k.privateJwk);
      const now = clock.now();
      await store.write(async (tx) => {
        // Another cell of the group may have made one meanwhile.
        if (this.#active(await repo.signingKeys(tx))) return;
        await repo.insertActiveSigningKey(tx, { kid: k.kid, private_jwk: sealed, public_jwk: k.publicJwk, created_at: now });
      });
    }
    await this.reload();
  }

  /** Rotates: a new active key; the previous one keeps verifying for the overlap. Returns the new kid. */
  async rotate(): Promise<string> {
    const k = await generateEd25519();
    const sealed = this.custody.sealJwk('oauth_signing_keys', k.kid, k.privateJwk);
    const now = this.core.clock.now();
    await this.core.store.write((tx) =>
      repo.insertActiveSigningKey(tx, { kid: k.kid, private_jwk: sealed, public_jwk: k.publicJwk, created_at: now }),
    );
    await this.reload();
    return k.kid;
  }

  /**
   * Reads the keys again (after a change, and periodically so that retired
   * keys whose overlap has passed leave the published set). Loads run one at
   * a time; the promise resolves once a load that began after the call is in.
   */
  reload(): Promise<void> {
    return this.#load.request();
  }

  /** The private half of a stored key when the row is the group's, else null. */
  #trusted(r: repo.SigningKeyRow): JsonWebKey | null {
    return this.custody.trustedPrivateJwk('oauth_signing_keys', r);
  }

  /** The newest of the group's keys not retired, with its private half (rows come newest first). */
  #active(rows: readonly repo.SigningKeyRow[]): { row: repo.SigningKeyRow; jwk: JsonWebKey } | undefined {
    for (const row of rows) {
      if (row.retired_at !== null) continue;
      const jwk = this.#trusted(row);
      if (jwk) return { row, jwk };
    }
    return undefined;
  }

  /** The keyring now. */
  current(): Keyring {
    if (!this.#ring) throw new TypeError('OAuth keyring not loaded: createOAuthModule loads it');
    return this.#ring;
  }

  async #reload(): Promise<void> {
    const overlapMs = (maxTokenLifetimeSeconds(this.core.config) + 60) * 1000;
    const now = this.core.clock.now();
    const rows = await repo.signingKeys(this.core.store);
    const active = this.#active(rows);
    if (!active) throw new TypeError("no active OAuth signing key of the group's: SigningKeys.ensure runs first");
    const published = rows
      .filter((r) => (r.retired_at === null || r.retired_at + overlapMs > now) && this.#trusted(r) !== null)
      .map((r): PublishedKey => ({ ...(r.public_jwk as JWK), kid: r.kid, alg: 'EdDSA', use: 'sig' }));
    const key = await importJWK(active.jwk as JWK, 'EdDSA');
    if (!(key instanceof CryptoKey)) throw new TypeError('OAuth signing key: not an asymmetric private key');
    this.#ring = { active: { kid: active.row.kid, key }, published, keySet: createLocalJWKSet({ keys: published }) };
  }
}

/**
 * The group's OAuth signing keys as witnesses of its secrets key, for a store
 * from before the key check (cell/custody/key-check.ts): every sealed one must
 * open under the key a process starts with.
 */
export async function signingKeyWitnesses(db: Reader): Promise<Witness[]> {
  return (await repo.signingKeys(db)).flatMap((r) =>
    isSealedJwk(r.private_jwk)
      ? [
          {
            what: `OAuth signing key ${r.kid}`,
            opens: (key: Buffer) => {
              try {
                openJwk(key, 'oauth_signing_keys', r.kid, r.private_jwk);
                return true;
              } catch {
                return false;
              }
            },
          },
        ]
      : [],
  );
}
