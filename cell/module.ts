/**
 * A cell module instance, as cell/server.ts wires it: a factory per module
 * (e.g. `createIamModule(core)`) takes what the module depends on (the
 * `CellCore` and other modules' typed APIs) and returns this, plus its own
 * typed API. Migrations are static per module and listed in cell/migrations.ts
 * (they are applied before any module is built).
 */
import type { OpenAPIHono } from '@hono/zod-openapi';
import type { AppEnv, Authenticator } from './context.ts';

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
