/**
 * The group's key check: the proof, before a process writes anything, that
 * its secrets key is the group's.
 *
 * The first process that starts on a new store (no check, nothing sealed)
 * seals a known value under its key and records it (`custody_key_check`);
 * on the embedded engine the key is then created in `<data>/secrets.key` when
 * no `--secrets-key-file` names one. From then on, on both engines, every
 * process that opens the store (`serve`, `bundle keys`, `bundle trust`,
 * `admin reset-owner`) opens the check with its key first, and refuses to go
 * on when it does not open, or when it has no key: it writes nothing, and
 * creates no key file of its own.
 *
 * A store from before the check (written by an earlier version) holds sealed
 * data but no check value: its witnesses (the group's OAuth signing keys,
 * the provider secrets; the modules that seal them name them, cell/server.ts
 * hands them over) must all open under the key before the check is recorded.
 * A store that holds none is a new store.
 *
 * The check value is the one the ai module recorded before (ai-005): the same
 * additional data and plaintext, so a check moved by custody-001 still opens.
 */
import { randomBytes } from 'node:crypto';
import { SetupError } from '../../runtime/setup-error.ts';
import type { CellConfig } from '../config.ts';
import type { Clock } from '../context.ts';
import type { Reader, Store } from '../store/types.ts';
import { createDataDirKey, keyFileOf, readKey, SECRETS_KEY_HINT } from './key-file.ts';
import { insertKeyCheck, keyCheck } from './repository.ts';
import { openSecret, sealSecret } from './seal.ts';

const CHECK_AAD = 'secrets-key-check';
const CHECK_VALUE = 'agent-cell secrets key check, format 1';

/** Something a store from before the check holds sealed under the group's key (a signing key, a provider secret). */
export interface Witness {
  /** What it is, for the refusal (`OAuth signing key <kid>`, `provider secret <id>`). */
  what: string;
  /** Whether `key` opens it. */
  opens(key: Buffer): boolean;
}

/** Reads a module's witnesses from the store (before any module is built). */
export type WitnessReader = (db: Reader) => Promise<Witness[]>;

/** Whether `key` opens the recorded check value. */
export function opensCheck(key: Buffer, sealed: Uint8Array): boolean {
  try {
    return openSecret(key, CHECK_AAD, sealed) === CHECK_VALUE;
  } catch {
    return false;
  }
}

/** Whether `key` opens the store's key check (true when none is recorded yet). */
export async function keyMatchesStore(core: { store: Reader }, key: Buffer): Promise<boolean> {
  const check = await keyCheck(core.store);
  return !check || opensCheck(key, check);
}

/** A new check value sealed under `key` (sealing is random: made before a transaction). */
export function sealCheck(key: Buffer): Uint8Array {
  return sealSecret(key, CHECK_AAD, CHECK_VALUE);
}

function notTheGroupsKey(where: string, why: string): SetupError {
  return new SetupError(`the secrets key of this process (${where}) ${why}; it wrote nothing and stops. ${SECRETS_KEY_HINT}`);
}

function noKey(where: string, why: string): SetupError {
  return new SetupError(
    `this process has no secrets key (${where} does not exist) and ${why}; it wrote nothing and stops. ${SECRETS_KEY_HINT}`,
  );
}

/**
 * Proves this process's secrets key against the store's check (recording the
 * check on a new store, or on one from before the check once its witnesses
 * open), and returns the key. Refuses with a SetupError, having written
 * nothing, when the key is not the group's.
 */
export async function proveKey(
  core: { config: Pick<CellConfig, 'dataDir' | 'secretsKeyFile'>; store: Store; clock: Clock },
  witnesses: readonly WitnessReader[],
): Promise<Buffer> {
  const { config, store, clock } = core;
  const where = keyFileOf(config);
  // A key file given is read first: a wrong path or size is refused before anything else.
  let key = readKey(config);
  const check = await keyCheck(store);
  if (check) {
    if (!key) throw noKey(where, "the store's secrets are sealed with the group's key");
    if (!opensCheck(key, check))
      throw notTheGroupsKey(
        where,
        "does not open the store's key check: it is not the key this group's secrets and signing keys are sealed with",
      );
    return key;
  }
  const seen = (await Promise.all(witnesses.map((w) => w(store)))).flat();
  if (seen.length > 0) {
    if (!key) throw noKey(where, `the store holds ${seen.length} thing(s) sealed with the group's key (${seen[0]!.what}, …)`);
    const closed = seen.filter((w) => !w.opens(key!));
    if (closed.length > 0)
      throw notTheGroupsKey(
        where,
        `does not open ${closed.length} of the ${seen.length} things the store holds sealed (${closed[0]!.what}${closed.length > 1 ? ', …' : ''})`,
      );
  }
  if (!key) {
    // The first cell of a new group keeps its own key (the data directory's), made now.
    key = randomBytes(32);
    createDataDirKey(config.dataDir, key);
  }
  const sealed = sealCheck(key);
  const at = clock.now();
  await store.write((tx) => insertKeyCheck(tx, sealed, at));
  // Cells starting at once on a new store: the first commit is the group's check; the others must open it.
  const recorded = await keyCheck(store);
  if (!recorded || !opensCheck(key, recorded))
    throw notTheGroupsKey(where, 'does not open the key check another cell recorded at the same moment');
  return key;
}
