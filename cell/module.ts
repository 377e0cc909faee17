/**
 * A cell module: its tables, its routes, and what it starts and stops.
 * The list of modules and their order is in cell/modules.ts.
 */
import type { OpenAPIHono } from '@hono/zod-openapi';
import type { AppEnv, Cell } from './context.ts';
import type { Migration } from './store/types.ts';

export interface CellModule {
  name: string;
  /** Applied in order, each once, as logged transactions. Ids are never renamed. */
  migrations: readonly Migration[];
  /** Called once after the store is open and migrated, before routes are mounted. */
  init?(cell: Cell): Promise<void> | void;
  /** Mounts this module's routes. */
  routes?(app: OpenAPIHono<AppEnv>, cell: Cell): void;
  /** Called once the server listens (schedulers, recovery sweeps). */
  start?(cell: Cell): Promise<void> | void;
  /** Called on shutdown, in reverse module order. */
  stop?(cell: Cell): Promise<void> | void;
}
