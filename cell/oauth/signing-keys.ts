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
 */
import { createLocalJWKSet, importJWK, type JWK, type JWTVerifyGetKey } from 'jose';
import { generateEd25519 } from '../../core/crypto/ed25519.ts';
import type { CellCore } from '../context.ts';
import { SerialLoad } from './internal/serial.ts';
import { inTheClear, openJwk, sealingKeyLoader, sealJwk } from '../sealed-jwk.ts';
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

  /** The key private signing keys are sealed with (cell/sealed-jwk.ts). */
  readonly #sealKey: () => Buffer;

  constructor(private readonly core: CellCore) {
    this.#sealKey = sealingKeyLoader(core.config);
  }

  /** Creates the first signing key when there is none (once for the whole group), then loads the keyring. */
  async ensure(): Promise<void> {
    const { store, clock } = this.core;
    if (!(await repo.hasActiveSigningKey(store))) {
      const k = await generateEd25519();
      const sealed = sealJwk(this.#sealKey(), 'oauth_signing_keys', k.kid, k.privateJwk);
      const now = clock.now();
      await store.write(async (tx) => {
        // Another cell of the group may have made one meanwhile.
        if (await repo.hasActiveSigningKey(tx)) return;
        await repo.insertActiveSigningKey(tx, { kid: k.kid, private_jwk: sealed, public_jwk: k.publicJwk, created_at: now });
      });
    }
    await this.#sealKeysInTheClear();
    await this.reload();
  }

  /** Rotates: a new active key; the previous one keeps verifying for the overlap. Returns the new kid. */
  async rotate(): Promise<string> {
    const k = await generateEd25519();
    const sealed = sealJwk(this.#sealKey(), 'oauth_signing_keys', k.kid, k.privateJwk);
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

  /** A store from before sealing: keys still in the clear are sealed now (each once, whichever cell gets there first). */
  async #sealKeysInTheClear(): Promise<void> {
    const clear = inTheClear(await repo.signingKeyPrivateTexts(this.core.store));
    if (clear.length === 0) return;
    const sealed = clear.map((r) => ({ ...r, to: sealJwk(this.#sealKey(), 'oauth_signing_keys', r.kid, r.jwk) }));
    await this.core.store.write(async (tx) => {
      for (const r of sealed) await repo.resealSigningKey(tx, r.kid, r.text, r.to);
    });
    this.core.log.info('sealed private keys stored in the clear', { table: 'oauth_signing_keys', kids: sealed.map((r) => r.kid) });
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
    const activeRow = rows.find((r) => r.retired_at === null);
    if (!activeRow) throw new TypeError('no active OAuth signing key: SigningKeys.ensure runs first');
    const published = rows
      .filter((r) => r.retired_at === null || r.retired_at + overlapMs > now)
      .map((r): PublishedKey => ({ ...(r.public_jwk as JWK), kid: r.kid, alg: 'EdDSA', use: 'sig' }));
    const key = await importJWK(openJwk(this.#sealKey(), 'oauth_signing_keys', activeRow.kid, activeRow.private_jwk) as JWK, 'EdDSA');
    if (!(key instanceof CryptoKey)) throw new TypeError('OAuth signing key: not an asymmetric private key');
    this.#ring = { active: { kid: activeRow.kid, key }, published, keySet: createLocalJWKSet({ keys: published }) };
  }
}
