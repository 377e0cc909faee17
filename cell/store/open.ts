/**
 * Opens the cell's store on the engine the configuration names: the
 * embedded engine in a data directory (the default) or a PostgreSQL
 * database. Both return the same contract (cell/store/types.ts).
 *
 * @example
 * const store = await openStore({ engine: 'embedded', dir: join(dataDir, 'store') }, { migrations, log });
 * const store = await openStore({ engine: 'postgres', url: process.env.CELL_STORE_URL!, poolSize: 10 }, { migrations, log });
 */
import { openEmbeddedStore, type EmbeddedStore } from './embedded.ts';
import { openPostgresStore, type NotifyMode, type PostgresStore } from './postgres.ts';
import type { OpenStoreOptions } from './types.ts';

export interface EmbeddedConfig {
  engine: 'embedded';
  /** The store's directory (the cell uses `$CELL_DATA/store`). */
  dir: string;
}

export interface PostgresConfig {
  engine: 'postgres';
  /** `postgres://user:password@host:port/database`. */
  url: string;
  /** Pool connections (default 10); one more is used for change notifications. */
  poolSize?: number;
  /** When other cells hear of a commit (default `in-transaction`; see cell/store/postgres.ts). */
  notify?: NotifyMode;
}

export type StoreConfig = EmbeddedConfig | PostgresConfig;

export function openStore(config: EmbeddedConfig, options: OpenStoreOptions): Promise<EmbeddedStore>;
export function openStore(config: PostgresConfig, options: OpenStoreOptions): Promise<PostgresStore>;
export function openStore(config: StoreConfig, options: OpenStoreOptions): Promise<EmbeddedStore | PostgresStore>;
/** Opens (creating when new) the store and applies the migrations not yet applied. */
export function openStore(config: StoreConfig, options: OpenStoreOptions): Promise<EmbeddedStore | PostgresStore> {
  switch (config.engine) {
    case 'embedded':
      return openEmbeddedStore({ ...options, dir: config.dir });
    case 'postgres':
      return openPostgresStore({
        ...options,
        url: config.url,
        ...(config.poolSize !== undefined ? { poolSize: config.poolSize } : {}),
        ...(config.notify !== undefined ? { notify: config.notify } : {}),
      });
    default:
      throw new TypeError(`openStore: unknown engine ${String((config as { engine?: unknown }).engine)}`);
  }
}
