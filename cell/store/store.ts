/** Durable store on sql.js: being built (see cell/store/types.ts for the contract). */
import type { OpenStoreOptions, Store } from './types.ts';

export async function openStore(_opts: OpenStoreOptions): Promise<Store> {
  throw new TypeError('openStore: not built yet');
}
