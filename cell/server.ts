/**
 * Starts a cell: opens the store (snapshot + log replay + migrations), settles
 * the cell id, runs every module's init, mounts the app, listens, and starts
 * the modules. `stop()` undoes it in reverse.
 */
import { serve, type ServerType } from '@hono/node-server';
import { mkdirSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { OpenAPIHono } from '@hono/zod-openapi';
import { DEFAULTS, type CellConfig } from './config.ts';
import { systemClock, type AppEnv, type Cell, type Clock, type Logger } from './context.ts';
import { createApp } from './app.ts';
import type { CellModule } from './module.ts';
import { MODULES } from './modules.ts';
import { openStore } from './store/store.ts';
import type { Migration } from './store/types.ts';

export interface StartOptions {
  config?: Partial<CellConfig>;
  clock?: Clock;
  modules?: readonly CellModule[];
  log?: Logger;
  /** Listen on a socket (default true). In-process tests use `app.request()` instead. */
  listen?: boolean;
  /** Terminate TLS in the cell (PEM). With `ca`, clients may present certificates (RFC 8705 mTLS); the request is not refused without one. */
  tls?: { cert: string | Buffer; key: string | Buffer; ca?: string | Buffer };
}

export interface RunningCell {
  cell: Cell;
  app: OpenAPIHono<AppEnv>;
  server: ServerType | null;
  /** Base URL, e.g. http://127.0.0.1:41234 (null when not listening). */
  url: string | null;
  stop(): Promise<void>;
}

const SYSTEM_MIGRATIONS: Migration[] = [
  { id: 'sys-001-meta', sql: 'CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)' },
];

export const consoleLogger: Logger = {
  info: (msg, f) => console.log(JSON.stringify({ level: 'info', msg, ...f })),
  warn: (msg, f) => console.warn(JSON.stringify({ level: 'warn', msg, ...f })),
  error: (msg, f) => console.error(JSON.stringify({ level: 'error', msg, ...f })),
};

export async function startCell(opts: StartOptions = {}): Promise<RunningCell> {
  const config: CellConfig = { ...DEFAULTS, ...opts.config };
  const modules = opts.modules ?? MODULES;
  const log = opts.log ?? consoleLogger;
  const clock = opts.clock ?? systemClock;
  mkdirSync(config.dataDir, { recursive: true });
  const store = await openStore({
    dir: join(config.dataDir, 'store'),
    migrations: [...SYSTEM_MIGRATIONS, ...modules.flatMap((m) => m.migrations)],
    log: (msg) => log.warn(msg),
  });
  const cellId = await settleCellId(store, config.cellId);
  const cell: Cell = {
    config: { ...config, cellId },
    store, clock, log,
    authenticators: [],
    services: new Map(),
  };
  for (const m of modules) await m.init?.(cell);
  const app = createApp(cell, modules);

  let server: ServerType | null = null;
  let url: string | null = null;
  if (opts.listen !== false) {
    server = await new Promise<ServerType>((resolve) => {
      const tls = opts.tls;
      const s = tls
        ? serve({
          fetch: app.fetch, port: config.port, hostname: config.host, createServer: createHttpsServer,
          serverOptions: { cert: tls.cert, key: tls.key, ...(tls.ca ? { ca: tls.ca, requestCert: true, rejectUnauthorized: false } : {}) },
        }, () => resolve(s))
        : serve({ fetch: app.fetch, port: config.port, hostname: config.host }, () => resolve(s));
    });
    const addr = server.address() as AddressInfo;
    url = `${opts.tls ? 'https' : 'http'}://${config.host.includes(':') ? `[${config.host}]` : config.host}:${addr.port}`;
    if (!config.publicUrl) cell.config.publicUrl = url;
  }
  for (const m of modules) await m.start?.(cell);

  let stopping: Promise<void> | null = null;
  const stopOnce = async () => {
    for (const m of [...modules].reverse()) await m.stop?.(cell);
    if (server) {
      const s = server;
      await new Promise<void>((resolve) => {
        s.close(() => resolve());
        (s as { closeAllConnections?: () => void }).closeAllConnections?.();
      });
    }
    await store.close();
  };
  return {
    cell, app, server, url,
    /** Idempotent: every caller waits for the same shutdown. */
    stop() {
      stopping ??= stopOnce();
      return stopping;
    },
  };
}

async function settleCellId(store: Cell['store'], wanted: string | null): Promise<string> {
  const row = store.get<{ value: string }>("SELECT value FROM meta WHERE key = 'cell_id'");
  if (wanted) {
    if (!row) await store.write((tx) => tx.run("INSERT INTO meta (key, value) VALUES ('cell_id', ?)", [wanted]));
    return wanted;
  }
  if (row) return row.value;
  const id = `cell-${crypto.randomUUID().slice(0, 8)}`;
  await store.write((tx) => tx.run("INSERT INTO meta (key, value) VALUES ('cell_id', ?)", [id]));
  return id;
}
