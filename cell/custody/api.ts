/**
 * The custody module's face (docs/architecture.md, "Faces"): what another
 * module of cell/ may use of it. `Custody` is the instance (the group's
 * secrets key, proven at start; sealing and opening; private signing keys at
 * rest and which stored key pairs are the group's; the check inside a sealing
 * transaction). The functions below work on a key given to them, for what
 * runs without a cell (the backup's restore) and for the modules' witnesses
 * of a store from before the key check.
 */
export { Custody, secretsKeyMismatch } from './custody.ts';
export { keyMatchesStore, opensCheck, proveKey, type Witness, type WitnessReader } from './key-check.ts';
export { keyFileOf, readKey, readSecretsKeyFile, SECRETS_KEY_HINT, secretsKeyLoader } from './key-file.ts';
export { deriveKey, openSecret, sealSecret, type DerivedKeyPurpose } from './seal.ts';
export { isSealedJwk, openJwk, sealJwk, type KeyTable, type SealedJwk, type StoredKeyPair } from './sealed-jwk.ts';
