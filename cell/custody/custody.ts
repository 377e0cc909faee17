/**
 * The custody of the group's secrets key in a running cell: the key, proven
 * at start against the group's key check (cell/custody/key-check.ts), and
 * what is done with it: sealing and opening (provider secrets, the
 * workspaces' secrets), private signing keys at rest and which stored key
 * pairs are the group's (cell/custody/sealed-jwk.ts), and the check again
 * inside a transaction that seals something the whole group must open.
 */
import { ServiceError } from '../../core/errors.ts';
import type { CellCore } from '../context.ts';
import type { Tx } from '../store/types.ts';
import { opensCheck } from './key-check.ts';
import { keyCheck } from './repository.ts';
import { openSecret, sealSecret } from './seal.ts';
import { sealJwk, trustedPrivateJwk, type KeyTable, type SealedJwk, type StoredKeyPair } from './sealed-jwk.ts';

/** Verdicts on stored key pairs kept per cell; past it the map starts over. */
const VERDICTS_MAX = 1024;

export class Custody {
  readonly #key: Buffer;
  /** `table kid` → the stored texts judged and the verdict (the private JWK, or null: not the group's). */
  readonly #verdicts = new Map<string, { sealed: string; pub: string; jwk: JsonWebKey | null }>();

  constructor(
    private readonly core: Pick<CellCore, 'store'>,
    key: Buffer,
  ) {
    this.#key = key;
  }

  /** The group's secrets key (32 bytes), proven against the store's check when the cell started. */
  key(): Buffer {
    return this.#key;
  }

  /** Seals `value` under the group's key, bound to `aad` (what it is: a secret's id, a row's name). */
  seal(aad: string, value: string): Uint8Array {
    return sealSecret(this.#key, aad, value);
  }

  /** Opens what `seal` sealed with the same `aad`; throws TypeError when it does not open. */
  open(aad: string, sealed: Uint8Array): string {
    return openSecret(this.#key, aad, sealed);
  }

  /** Seals a private JWK for `table` under `kid`. */
  sealJwk(table: KeyTable, kid: string, jwk: JsonWebKey): SealedJwk {
    return sealJwk(this.#key, table, kid, jwk);
  }

  /**
   * The private half of a stored key pair when the row is the group's (its
   * private part sealed under the group's key, and the half of its public
   * key); null when it is not: such a row is neither published nor used.
   * Judged once per stored text.
   */
  trustedPrivateJwk(table: KeyTable, row: StoredKeyPair): JsonWebKey | null {
    const id = `${table} ${row.kid}`;
    const sealed = JSON.stringify(row.private_jwk) ?? '';
    const pub = JSON.stringify(row.public_jwk) ?? '';
    const hit = this.#verdicts.get(id);
    if (hit && hit.sealed === sealed && hit.pub === pub) return hit.jwk;
    const jwk = trustedPrivateJwk(this.#key, table, row);
    if (this.#verdicts.size >= VERDICTS_MAX) this.#verdicts.clear();
    this.#verdicts.set(id, { sealed, pub, jwk });
    return jwk;
  }

  /**
   * Inside a transaction that seals something every cell of the group must
   * open (a provider secret): refuses (503 `secrets_key_mismatch`) when the
   * store's key check is gone or no longer opens under this cell's key (it
   * was replaced since the cell started), so nothing is sealed that the
   * group cannot open.
   */
  async assertKeyMatchesTx(tx: Tx): Promise<void> {
    const check = await keyCheck(tx);
    if (!check || !opensCheck(this.#key, check)) throw secretsKeyMismatch();
  }

  /** Whether the store's key check (still) opens under this cell's key. */
  async matchesStore(): Promise<boolean> {
    const check = await keyCheck(this.core.store);
    return check !== undefined && opensCheck(this.#key, check);
  }
}

export function secretsKeyMismatch(): ServiceError {
  return new ServiceError('service_unavailable', "this cell's secrets key is not the one the store's secrets are sealed with", {
    details: { reason: 'secrets_key_mismatch' },
    retryable: false,
  });
}
