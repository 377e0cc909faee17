/**
 * A cell module instance, as cell/server.ts wires it: a factory per module
 * (e.g. `createIamModule(core)`) takes what the module depends on (the
 * `CellCore` and other modules' typed APIs) and returns this, plus its own
 * typed API. Migrations are static per module and listed in cell/migrations.ts
 * (they are applied before any module is built).
 */
import type { OpenAPIHono } from '@hono/zod-openapi';
import type { CellConfig } from './config.ts';
import type { AppEnv, Authenticator, CellCore, Logger } from './context.ts';

export interface CellModule {
  name: string;
  /** Authenticators this module contributes to the gateway, tried in module order. */
  authenticators?: readonly Authenticator[];
  /** Mounts this module's routes. */
  routes?(app: OpenAPIHono<AppEnv>): void;
  /** Called once the server listens (schedulers, recovery sweeps). */
  start?(): Promise<void>;
  /** Called on shutdown, in reverse module order. */
  stop?(): Promise<void>;
}

/**
 * Starts a cell that does not listen, for a command that works on a stopped
 * cell's store (`bundle keys`, `admin reset-owner`): cell/server.ts's
 * `startCell`, which cell/main.ts hands to the command, so that a module's
 * command does not import the wiring above it. `M`: the modules it uses.
 */
export type StartCell<M> = (opts: {
  config: Partial<CellConfig> & { dataDir: string };
  listen: false;
  log: Logger;
}) => Promise<{ core: CellCore; modules: M; stop(): Promise<void> }>;
