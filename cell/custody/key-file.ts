/**
 * Where the secrets key comes from: the group's file (`--secrets-key-file`,
 * the same 32 bytes for every cell of a group), else the cell's own
 * `<data>/secrets.key`. The key never enters the store. A key of the data
 * directory is created only for a store that holds nothing sealed yet (a new
 * group): a process that finds sealed data and no key refuses, and writes no
 * key of its own (cell/custody/key-check.ts).
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { SetupError } from '../../runtime/setup-error.ts';
import { writeFileDurable } from '../../runtime/write-durable.ts';
import type { CellConfig } from '../config.ts';

export const KEY_FILE = 'secrets.key';

/** What to tell an operator whose cell does not hold the group's key. */
export const SECRETS_KEY_HINT = 'give every cell of the group the same --secrets-key-file (docs/configuration.md)';

type KeyConfig = Pick<CellConfig, 'dataDir' | 'secretsKeyFile'>;

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

/** The file this cell's key is read from (for messages). */
export function keyFileOf(config: KeyConfig): string {
  return config.secretsKeyFile ?? join(config.dataDir, KEY_FILE);
}

/** The cell's key: the group's file when given, else `<data>/secrets.key`; null when the data directory has none. */
export function readKey(config: KeyConfig): Buffer | null {
  if (config.secretsKeyFile) return readSecretsKeyFile(config.secretsKeyFile);
  const path = join(config.dataDir, KEY_FILE);
  if (!existsSync(path)) return null;
  const key = readFileSync(path);
  if (key.length !== 32) throw new SetupError(`${path} holds ${key.length} bytes; a secrets key is exactly 32 bytes`);
  return key;
}

/**
 * The key as the configuration names it, read once when first asked (for
 * what runs beside a started cell: the custody module made and proved it at
 * start). It creates no key: a missing file is a SetupError.
 */
export function secretsKeyLoader(config: KeyConfig): () => Buffer {
  let key: Buffer | null = null;
  return () => {
    key ??= readKey(config);
    if (!key) throw new SetupError(`${keyFileOf(config)} does not exist: the cell makes it at its first start`);
    return key;
  };
}

/**
 * A new key in `<data>/secrets.key` (mode 0600, fsync'd before the store records its check): for the first
 * cell of a new group, which has no key yet. Never replaces a key file.
 */
export function createDataDirKey(dataDir: string, key: Buffer): void {
  const path = join(dataDir, KEY_FILE);
  if (existsSync(path)) throw new SetupError(`${path} appeared while the cell started; start it again`);
  writeFileDurable(path, key, { mode: 0o600 });
}
