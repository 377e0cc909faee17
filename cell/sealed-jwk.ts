/**
 * @deprecated Private signing keys at rest moved to the custody module
 * (cell/custody/api.ts: `sealJwk`, `openJwk`, `isSealedJwk`, and the
 * `Custody` instance the cell builds first). This file re-exports them, and
 * the loader of the key as it was, for branches written against it; new code
 * imports cell/custody/api.ts.
 */
export {
  isSealedJwk,
  openJwk,
  openSecret,
  sealJwk,
  sealSecret,
  secretsKeyLoader as sealingKeyLoader,
  type KeyTable,
  type SealedJwk,
} from './custody/api.ts';
