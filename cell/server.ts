/**
 * Starts a cell: opens the store (every module's migrations applied), settles
 * the cell id, builds each module from what it depends on (this file is the
 * one place modules are wired), bootstraps the owner on a fresh store, mounts
 * the app, listens, and starts the modules. `stop()` undoes it in reverse.
 */
import { serve, type ServerType } from '@hono/node-server';
import { mkdirSync } from 'node:fs';
import type { Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { OpenAPIHono } from '@hono/zod-openapi';
import { DEFAULTS, type CellConfig } from './config.ts';
import { systemClock, type AppEnv, type CellCore, type Clock, type Logger } from './context.ts';
import { createApp } from './app.ts';
import type { CellModule } from './module.ts';
import { MIGRATIONS, settleCellId, settleGroupId } from './migrations.ts';
import { openStore } from './store/open.ts';
import { keepConnectionsOnEarlyAnswers } from './http/keep-alive.ts';
import { GatewayResponse } from '../runtime/gateway.ts';
import { proveKey } from './custody/api.ts';
import { createCustodyModule } from './custody/module.ts';
import { createIamModule } from './iam/module.ts';
import { createClusterModule } from './cluster/module.ts';
import { createOAuthModule } from './oauth/module.ts';
import { createToolsModule } from './tools/module.ts';
import { guardedDispatcher } from './tools/api.ts';
import { createAiModule } from './ai/module.ts';
import { secretWitnesses } from './ai/api.ts';
import { signingKeyWitnesses } from './oauth/api.ts';
import { createRunsModule } from './runs/module.ts';
import { createTeamsModule } from './teams/module.ts';
import { createJobsModule } from './jobs/module.ts';
import { createEdgeModule } from './edge/module.ts';
import { createReceiptsModule } from './receipts/module.ts';
import { createMcpModule } from './mcp/module.ts';
import { createDiscoveryModule } from './discovery/module.ts';
import { createOpsModule } from './ops/module.ts';
import { CellMetrics } from './ops/metrics.ts';
import { RequestTraces, type SpanSink } from './http/trace.ts';
import { SetupError } from '../runtime/setup-error.ts';
import { createConsoleModule } from './console/module.ts';
import { Devices } from './edge/devices.ts';

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
async function buildModules(core: CellCore, metrics: CellMetrics, secretsKey: Buffer) {
  // The group's secrets key, proven before anything was written (startCell): every module that seals takes it from here.
  const custody = createCustodyModule(core, { key: secretsKey });
  // Joins the group on this store (or refuses to, by posture).
  // Its member list names each cell's identity keys (iam's, read when a request asks).
  const cluster = await createClusterModule(core, { identityKeys: () => iam.iam.groupIdentityKeys(), metrics });
  // A member whose clock is beyond the bound stands down: the modules' background writes ask it.
  const standing = cluster.cluster;
  const iam = await createIamModule(core, { custody: custody.custody, standing });
  // The device registry is the edge module's, but the OAuth server needs it to issue device-addressed tokens.
  const devices = new Devices(core.store);
  const oauth = await createOAuthModule(core, {
    iam: iam.iam,
    custody: custody.custody,
    standing,
    deviceExists: (id) => devices.isActive(id),
    egress: guardedDispatcher(core.config.egressAllowPrivate),
  });
  const tools = await createToolsModule(core, {
    iam: iam.iam,
    delegation: oauth.api.delegateForTool,
    trust: {
      issuers: () => [...oauth.api.acceptedIssuers(), oauth.api.issuer(), oauth.api.publicBase()],
      protectedResourceOf: (url) => oauth.api.protectedResourceOf(url),
    },
  });
  const runs = await createRunsModule(core, { iam: iam.iam, cluster: cluster.cluster, metrics });
  const ai = await createAiModule(core, { custody: custody.custody, iam: iam.iam, tools: tools.tools, runs: runs.runs, metrics });
  const teams = await createTeamsModule(core, {
    iam: iam.iam,
    lifecycle: iam.lifecycle,
    ai: ai.ai,
    tools: tools.tools,
    runs: runs.runs,
    standing,
  });
  const jobs = createJobsModule(core, {
    iam: iam.iam,
    lifecycle: iam.lifecycle,
    runs: runs.runs,
    teams: teams.teams,
    tools: tools.tools,
    custody: custody.custody,
    metrics,
    groupClock: cluster.cluster,
  });
  const receipts = createReceiptsModule(core, { iam: iam.iam, runs: runs.runs, teams: teams.teams });
  const edge = createEdgeModule(core, {
    iam: iam.iam,
    teams: teams.teams,
    tools: tools.tools,
    oauth: oauth.api,
    devices,
    runLog: receipts.log,
  });
  const mcp = createMcpModule(core, { iam: iam.iam, oauth: oauth.api, teams: teams.teams, endpoints: jobs.endpoints, runs: runs.runs });
  const console = createConsoleModule(core, { oauth: oauth.api });
  const discovery = createDiscoveryModule(core);
  // Last: it starts once every other module started (readiness) and stops first.
  const ops = createOpsModule(core, { metrics, member: () => cluster.cluster.health() });
  return { custody, iam, cluster, oauth, tools, runs, ai, teams, jobs, receipts, edge, mcp, console, discovery, ops };
}

export async function startCell(opts: StartOptions = {}): Promise<RunningCell> {
  // Client certificates are verified only when the cell itself terminates TLS with a client CA.
  const config: CellConfig = { ...DEFAULTS, ...opts.config, clientCertificates: opts.tls?.ca !== undefined };
  const log = opts.log ?? consoleLogger;
  const clock = opts.clock ?? systemClock;
  mkdirSync(config.dataDir, { recursive: true });
  // This cell's metrics (its own Registry): the store, the gateway and the modules record into it.
  const metrics = new CellMetrics();
  const store = await openStore(
    config.storeUrl
      ? { engine: 'postgres', url: config.storeUrl, poolSize: config.storePoolSize }
      : { engine: 'embedded', dir: join(config.dataDir, 'store') },
    { migrations: MIGRATIONS, log: (msg) => log.warn(msg), observe: metrics.storeObserver },
  );
  let modules: Modules;
  let core: CellCore;
  let bootstrapSecret: string | null;
  try {
    // First, before anything is written (the store, the data directory's cell id): this process's secrets key is
    // proven against the group's key check (or, on a store from before the check, against what the oauth and ai
    // modules hold sealed); a key that is not the group's stops the start here (docs/security.md, "What a holder
    // of the database URL can and cannot do").
    const secretsKey = await proveKey({ config, store, clock }, [signingKeyWitnesses, secretWitnesses]);
    const cellId = await settleCellId(store, config.dataDir, config.cellId);
    const groupId = await settleGroupId(store, cellId);
    core = {
      config: { ...config, cellId, groupId },
      store,
      clock,
      log,
      traces: new RequestTraces(await spanSink(config, cellId, groupId, log)),
    };
    modules = await buildModules(core, metrics, secretsKey);
    bootstrapSecret = await modules.iam.bootstrap();
  } catch (err) {
    await store.close();
    throw err;
  }
  const ordered: CellModule[] = Object.values(modules);
  const app = createApp(core, ordered, {
    metrics,
    // A 401 names the protected resource metadata of what was asked (RFC 9728 §5.1): MCP clients start there.
    challenge: (c) => modules.oauth.api.challenge(c.req.path),
    ...(modules.iam.sharedBuckets ? { sharedBuckets: modules.iam.sharedBuckets } : {}),
  });

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
  try {
    for (const m of ordered) await m.start?.();
  } catch (err) {
    // A module that cannot start (e.g. the metrics port is taken): undo what started, then say why.
    for (const m of [...ordered].reverse()) await m.stop?.().catch(() => undefined);
    if (server) await new Promise<void>((resolve) => server!.close(() => resolve()));
    await store.close();
    throw err;
  }

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
    // The spans batched so far are exported before the process goes (docs/operations.md "Traces").
    await core.traces.shutdown().catch((e: unknown) => log.warn('traces not exported at stop', { error: e }));
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

/**
 * The span sink when trace export is on: the OpenTelemetry SDK is imported
 * here and only here, so a cell that exports no traces never loads it. In
 * the shipped build it is a file of its own beside dist/cell.mjs
 * (dist/cell-otel.mjs, scripts/build.mjs), not even read otherwise.
 */
async function spanSink(config: CellConfig, cellId: string, groupId: string, log: Logger): Promise<SpanSink | null> {
  if (config.traces === null) return null;
  let sinkModule: typeof import('./ops/otel-sink.ts');
  try {
    sinkModule = await import('./ops/otel-sink.ts');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ERR_MODULE_NOT_FOUND') throw err;
    throw new SetupError(
      'trace export needs cell-otel.mjs beside cell.mjs (both are built into dist/): copy it there, or start without an OTLP endpoint',
    );
  }
  const { createOtelSink } = sinkModule;
  const sink = createOtelSink(config.traces, { 'service.instance.id': cellId, 'agent_cell.group.id': groupId });
  log.info('exporting traces over OTLP/HTTP', {
    endpoint: config.traces.endpoint,
    service_name: sink.serviceName,
    capture_message_content: config.traces.captureContent,
  });
  return sink;
}

/** Listens; rejects (instead of crashing the process) when the address is taken. */
function listen(app: OpenAPIHono<AppEnv>, config: CellConfig, tls: StartOptions['tls']): Promise<ServerType> {
  // Hono's own clean-up of unread bodies closes a connection whose body takes over 500 ms; ours drains it.
  const drainOptions = { maxDrainBytes: 4 * config.bodyLimitBytes, drainTimeoutMs: 10_000 };
  return new Promise<ServerType>((resolve, reject) => {
    const s = tls
      ? serve(
          {
            fetch: app.fetch,
            autoCleanupIncoming: false,
            port: config.port,
            hostname: config.host,
            createServer: createHttpsServer,
            serverOptions: {
              ServerResponse: GatewayResponse,
              cert: tls.cert,
              key: tls.key,
              ...(tls.ca ? { ca: tls.ca, requestCert: true, rejectUnauthorized: false } : {}),
            },
          },
          () => resolve(s),
        )
      : serve(
          {
            fetch: app.fetch,
            autoCleanupIncoming: false,
            port: config.port,
            hostname: config.host,
            // The gateway's headers written with the answer's in one writeHead (runtime/gateway.ts).
            serverOptions: { ServerResponse: GatewayResponse },
          },
          () => resolve(s),
        );
    keepConnectionsOnEarlyAnswers(s as Server, drainOptions);
    s.once('error', reject);
  });
}
