/**
 * Starts a cell: opens the store (every module's migrations applied), settles
 * the cell id, builds each module from what it depends on (this file is the
 * one place modules are wired), bootstraps the owner on a fresh store, mounts
 * the app, listens, and starts the modules. `stop()` undoes it in reverse.
 */
import { serve, type ServerType } from '@hono/node-server';
import { mkdirSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { OpenAPIHono } from '@hono/zod-openapi';
import { DEFAULTS, type CellConfig } from './config.ts';
import { systemClock, type AppEnv, type CellCore, type Clock, type Logger } from './context.ts';
import { createApp } from './app.ts';
import type { CellModule } from './module.ts';
import { MIGRATIONS, settleCellId } from './migrations.ts';
import { openStore } from './store/open.ts';
import { createIamModule } from './iam/module.ts';
import { createClusterModule } from './cluster/module.ts';
import { createOAuthModule } from './oauth/module.ts';
import { createToolsModule } from './tools/module.ts';
import { createAiModule } from './ai/module.ts';
import { createRunsModule } from './runs/module.ts';
import { createTeamsModule } from './teams/module.ts';
import { createJobsModule } from './jobs/module.ts';
import { createEdgeModule } from './edge/module.ts';
import { createDiscoveryModule } from './discovery/module.ts';
import { createConsoleModule } from './console/module.ts';
import { Devices } from './edge/devices.ts';
import { localRuntime } from './edge/local-runtime.ts';

export interface StartOptions {
  config?: Partial<CellConfig>;
  clock?: Clock;
  log?: Logger;
  /** Listen on a socket (default true). In-process tests use `app.request()` instead. */
  listen?: boolean;
  /** Terminate TLS in the cell (PEM). With `ca`, clients may present certificates (RFC 8705 mTLS); the request is not refused without one. */
  tls?: { cert: string | Buffer; key: string | Buffer; ca?: string | Buffer };
}

/** Every module of a running cell, by name, with its typed API. */
export type Modules = Awaited<ReturnType<typeof buildModules>>;

export interface RunningCell {
  core: CellCore;
  modules: Modules;
  app: OpenAPIHono<AppEnv>;
  server: ServerType | null;
  /** Base URL, e.g. http://127.0.0.1:41234 (null when not listening). */
  url: string | null;
  /** The bootstrap owner's API key when this start created it (main.ts prints it once the cell listens). */
  bootstrapSecret: string | null;
  stop(): Promise<void>;
}

export const consoleLogger: Logger = {
  info: (msg, f) => console.log(JSON.stringify({ level: 'info', msg, ...f })),
  warn: (msg, f) => console.warn(JSON.stringify({ level: 'warn', msg, ...f })),
  error: (msg, f) => console.error(JSON.stringify({ level: 'error', msg, ...f })),
};

/**
 * The wiring: each module built from what it depends on, in dependency order
 * (which is also the order of their routes in the OpenAPI document, and the
 * reverse of the order they stop in). Discovery is last: its document is
 * built from every route mounted before it.
 */
async function buildModules(core: CellCore) {
  // Joins the group on this store (or refuses to, by posture) before anything is written.
  // Its member list names each cell's identity keys (iam's, read when a request asks).
  const cluster = await createClusterModule(core, { identityKeys: () => iam.iam.groupIdentityKeys() });
  const iam = await createIamModule(core);
  // The device registry is the edge module's, but the OAuth server needs it to issue device-addressed tokens.
  const devices = new Devices(core.store);
  const oauth = await createOAuthModule(core, { iam: iam.iam, deviceExists: (id) => devices.exists(id) });
  const tools = await createToolsModule(core);
  const runs = await createRunsModule(core, { iam: iam.iam, cluster: cluster.cluster });
  // The local-signed model runtime when node-llama-cpp is installed beside the program (edge-runtime/).
  const runtime = localRuntime(core.config.dataDir);
  const ai = await createAiModule(core, { iam: iam.iam, tools: tools.tools, ...(runtime ? { localRuntime: runtime } : {}) });
  const teams = await createTeamsModule(core, { iam: iam.iam, ai: ai.ai, tools: tools.tools, runs: runs.runs });
  const jobs = createJobsModule(core, { iam: iam.iam, lifecycle: iam.lifecycle, runs: runs.runs, teams: teams.teams, tools: tools.tools });
  const edge = createEdgeModule(core, { iam: iam.iam, teams: teams.teams, oauth: oauth.api, devices });
  const console = createConsoleModule(core, { oauth: oauth.api });
  const discovery = createDiscoveryModule(core);
  return { iam, cluster, oauth, tools, runs, ai, teams, jobs, edge, console, discovery };
}

export async function startCell(opts: StartOptions = {}): Promise<RunningCell> {
  const config: CellConfig = { ...DEFAULTS, ...opts.config };
  const log = opts.log ?? consoleLogger;
  const clock = opts.clock ?? systemClock;
  mkdirSync(config.dataDir, { recursive: true });
  const store = await openStore(
    config.storeUrl
      ? { engine: 'postgres', url: config.storeUrl, poolSize: config.storePoolSize }
      : { engine: 'embedded', dir: join(config.dataDir, 'store') },
    { migrations: MIGRATIONS, log: (msg) => log.warn(msg) },
  );
  let modules: Modules;
  let core: CellCore;
  let bootstrapSecret: string | null;
  try {
    const cellId = await settleCellId(store, config.dataDir, config.cellId);
    core = { config: { ...config, cellId }, store, clock, log };
    modules = await buildModules(core);
    bootstrapSecret = await modules.iam.bootstrap();
  } catch (err) {
    await store.close();
    throw err;
  }
  const ordered: CellModule[] = Object.values(modules);
  const app = createApp(core, ordered);

  let server: ServerType | null = null;
  let url: string | null = null;
  if (opts.listen !== false) {
    try {
      server = await listen(app, config, opts.tls);
    } catch (err) {
      await store.close();
      throw err;
    }
    const addr = server.address() as AddressInfo;
    url = `${opts.tls ? 'https' : 'http'}://${config.host.includes(':') ? `[${config.host}]` : config.host}:${addr.port}`;
    if (!config.publicUrl) core.config.publicUrl = url;
  }
  for (const m of ordered) await m.start?.();

  let stopping: Promise<void> | null = null;
  const stopOnce = async () => {
    for (const m of [...ordered].reverse()) await m.stop?.();
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
    core,
    modules,
    app,
    server,
    url,
    bootstrapSecret,
    /** Idempotent: every caller waits for the same shutdown. */
    stop() {
      stopping ??= stopOnce();
      return stopping;
    },
  };
}

/** Listens; rejects (instead of crashing the process) when the address is taken. */
function listen(app: OpenAPIHono<AppEnv>, config: CellConfig, tls: StartOptions['tls']): Promise<ServerType> {
  return new Promise<ServerType>((resolve, reject) => {
    const s = tls
      ? serve(
          {
            fetch: app.fetch,
            port: config.port,
            hostname: config.host,
            createServer: createHttpsServer,
            serverOptions: {
              cert: tls.cert,
              key: tls.key,
              ...(tls.ca ? { ca: tls.ca, requestCert: true, rejectUnauthorized: false } : {}),
            },
          },
          () => resolve(s),
        )
      : serve({ fetch: app.fetch, port: config.port, hostname: config.host }, () => resolve(s));
    s.once('error', reject);
  });
}
