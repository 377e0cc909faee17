/**
 * The key provider secrets are sealed with, and the check that every cell
 * sharing a store has the same one.
 *
 * A cell alone keeps its key in `<data>/secrets.key` (created on first use).
 * The cells of a group each have their own data directory but share the
 * secrets in the store, so they must share the key: every member is given
 * the same file with `--secrets-key-file FILE` (32 random bytes; the first
 * cell's `<data>/secrets.key` will do). The key never enters the store: a
 * copy of the database alone does not open the secrets.
 *
 * The check (PostgreSQL only: the embedded engine is one cell, whose own key
 * is not checked, as before): the first time a secret is sealed (or, on a store older than the
 * check, the first start that opens every stored secret), a known value is
 * sealed under the key and recorded (`ai_secrets_key_check`). From then on:
 * - a cell whose key does not open it refuses to start, saying what to do;
 * - a store holding secrets but no check value (written before it existed)
 *   is checked secret by secret: a cell whose key does not open all of them
 *   refuses to start;
 * - sealing a secret with a key that does not open the check value is
 *   refused (503 `secrets_key_mismatch`: a member started before the first
 *   secret existed, with another key), as is any provider call whose secret
 *   it cannot open (503 `secret_unreadable`);
 * - a running cell that hears another cell record the check value with a key
 *   other than its own logs an error naming the flag.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { ServiceError } from '../../core/errors.ts';
import { SetupError } from '../../runtime/setup-error.ts';
import type { CellCore } from '../context.ts';
import type { Tx } from '../store/types.ts';
import { insertSecretsKeyCheck, sealedSecrets, secretsKeyCheck } from './repository.ts';
import { loadSecretsKey, openSecret, sealSecret } from './secrets.ts';

/** The additional data of the check value (no secret id can be this: ids are `sec_…`). */
const CHECK_ID = 'secrets-key-check';
const CHECK_VALUE = 'agent-cell secrets key check, format 1';
/** Most stored secrets opened at start when the store has no check value yet. */
const LEGACY_CHECK_LIMIT = 10_000;
const FLAG_HINT = 'give every cell of the group the same --secrets-key-file (docs/configuration.md)';

/** Reads a key file given with --secrets-key-file: exactly 32 bytes. Refuses anything else, saying why. */
export function readSecretsKeyFile(path: string): Buffer {
  if (!existsSync(path)) throw new SetupError(`--secrets-key-file: ${path} does not exist`);
  if (!statSync(path).isFile()) throw new SetupError(`--secrets-key-file: ${path} is not a file`);
  const key = readFileSync(path);
  if (key.length !== 32) {
    throw new SetupError(
      `--secrets-key-file: ${path} holds ${key.length} bytes; it must hold exactly 32 random bytes (e.g. head -c 32 /dev/urandom > ${path})`,
    );
  }
  return key;
}

/** The cell's secrets key: the group's file when given, else `<data>/secrets.key` (created on first use). Loaded once. */
export function secretsKeyLoader(config: Pick<CellCore['config'], 'dataDir' | 'secretsKeyFile'>): () => Buffer {
  let key: Buffer | null = null;
  return () => (key ??= config.secretsKeyFile ? readSecretsKeyFile(config.secretsKeyFile) : loadSecretsKey(config.dataDir));
}

function opensCheck(key: Buffer, sealed: Uint8Array): boolean {
  try {
    return openSecret(key, CHECK_ID, sealed) === CHECK_VALUE;
  } catch {
    return false;
  }
}

/**
 * At start: refuses (SetupError, shown to the operator as is) when this
 * cell's key does not open the secrets already in the store; records the
 * check value when a store with secrets has none yet.
 */
export async function checkSecretsKeyAtStart(core: CellCore, key: () => Buffer): Promise<void> {
  const { store, clock } = core;
  // A key file given is read now: a wrong path or size is refused before the cell serves anything.
  if (core.config.secretsKeyFile) key();
  const check = await secretsKeyCheck(store);
  if (check) {
    if (!opensCheck(key(), check)) {
      throw new SetupError(
        `the secrets key of this cell (${core.config.secretsKeyFile ?? `${core.config.dataDir}/secrets.key`}) does not open the provider secrets already in the store; ${FLAG_HINT}`,
      );
    }
    return;
  }
  const stored = await sealedSecrets(store, LEGACY_CHECK_LIMIT);
  if (stored.length === 0) return;
  let unreadable = 0;
  for (const s of stored) {
    try {
      openSecret(key(), s.secretId, s.sealed);
    } catch {
      unreadable++;
    }
  }
  if (unreadable > 0) {
    throw new SetupError(
      `${unreadable} of the ${stored.length} provider secrets in the store cannot be opened with the secrets key of this cell (${core.config.secretsKeyFile ?? `${core.config.dataDir}/secrets.key`}); ${FLAG_HINT}`,
    );
  }
  const sealed = sealSecret(key(), CHECK_ID, CHECK_VALUE);
  const at = clock.now();
  await store.write((tx) => insertSecretsKeyCheck(tx, sealed, at));
}

/** The check value sealed under `key`, made before a transaction (sealing is random). */
export function prepareKeyCheck(key: Buffer): Uint8Array {
  return sealSecret(key, CHECK_ID, CHECK_VALUE);
}

/**
 * Inside the transaction that stores a secret: records the check value when
 * there is none; refuses (503 `secrets_key_mismatch`) when the recorded one
 * does not open under this cell's key, so no secret is sealed that the
 * group's other cells cannot open.
 */
export async function assertKeyMatchesTx(tx: Tx, key: Buffer, prepared: Uint8Array, at: number): Promise<void> {
  const check = await secretsKeyCheck(tx);
  if (!check) {
    await insertSecretsKeyCheck(tx, prepared, at);
    return;
  }
  if (!opensCheck(key, check)) throw secretsKeyMismatch();
}

export function secretsKeyMismatch(): ServiceError {
  return new ServiceError('service_unavailable', "this cell's secrets key is not the one the store's secrets are sealed with", {
    details: { reason: 'secrets_key_mismatch' },
    retryable: false,
  });
}

/** Whether `key` opens the store's check value (true when there is none yet). */
export async function keyMatchesStore(core: Pick<CellCore, 'store'>, key: Buffer): Promise<boolean> {
  const check = await secretsKeyCheck(core.store);
  return !check || opensCheck(key, check);
}

export { FLAG_HINT as SECRETS_KEY_HINT };
