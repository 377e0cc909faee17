/**
 * The cell's command line: `node dist/cell.mjs <command> [options]`. CELL_PROGRAM is the table of
 * commands `--help` is printed from; cell/bin.ts, the bundle's entry, runs it.
 */
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { existsSync, statSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { BOOTSTRAP_KEY_FILE } from './iam/bootstrap.ts';
import { DEFAULTS, POSTURES, type CellConfig, type Posture } from './config.ts';
import { startCell } from './server.ts';
import { ClusterRefusal } from './cluster/cluster.ts';
import { BUNDLE_HELP, bundleCommand } from './edge/cli.ts';
import { MAX_BUNDLE_TTL_SECONDS } from './edge/export.ts';
import { BACKUP_HELP, RESTORE_HELP, backupCommand, restoreCommand } from './ops/backup-cli.ts';
import { ADMIN_HELP, adminCommand } from './iam/admin-cli.ts';
import { EXIT, dispatch, fail, type Program } from '../runtime/cli.ts';
import { ATTESTATION_HELP, verifyAttestationFile } from '../runtime/attestation-cli.ts';
import { LOG_FORMATS, LOG_LEVELS, type BannerLine, type ProcessLogger } from '../runtime/log.ts';
import { SHARED_SERVE_OPTIONS, egressAllowPrivateRules, serveLogger, tlsFiles } from '../runtime/serve-flags.ts';
import { tracesConfig } from './ops/traces-config.ts';
import { parseOAuthIssuer } from './oauth/settings.ts';
import { readToolSources } from './tools/sources/config.ts';

const SERVE_HELP = `    --port N           port to listen on (0 picks a free one; default 8080)
    --host H           address to bind (default 127.0.0.1)
    --data DIR         data directory (default ./.cell, or $CELL_DATA)
    --store URL        postgres://user@host:port/db: keep the store in PostgreSQL (also $CELL_STORE_URL);
                       default: the embedded store in DIR
    --store-pool N     PostgreSQL connections of this cell (default 10)
    --append-linger-ms N  PostgreSQL: how long a group of journal appends may wait for more runs'
                       appends to join it, when each waiting run's step took 5 times that at least
                       (default 1; 0: never)
    --region R         region this cell serves from (default local)
    --posture P        ${POSTURES.join(' | ')} (default single-cell)
    --cell-id ID       cell id (default: generated once and kept in DIR)
    --public-url URL   external base URL (issuer, DPoP htu); default http://host:port
    --rate-capacity N  gateway bucket capacity per client IP (default 600)
    --rate-refill N    gateway refill per second (default 100)
    --agent-quota N    standing-agent work quota (default 100)
    --schedule-min-interval S  shortest time between fires of a job definition, seconds (default 60)
    --run-storage-cap B   most bytes one run may store: journal, payloads, output (default 1048576)
    --workspace-quota B   most bytes a workspace's runs and SQL database may take (default 134217728)
    --run-storage-quota B most bytes all runs of the cell may keep in the store (default 536870912)
    --definition-quota N  most live job definitions acting as one principal (default 100)
    --max-delegation-depth N  longest token-exchange actor chain issued and honoured (default 3)
    --max-key-bundle-ttl S  longest lifetime of an edge key bundle, seconds (default 2592000: 30 days;
                       at most 31536000)
    --protected-resource URL,..  external services (RFC 8707 resource URIs) the cell issues tokens for
    --oauth-issuer URL  publish and sign with this issuer instead of service://<group id>, for
                       RFC 8414 clients (https; http on loopback only); the group accepts both
    --oauth-dynamic-registration  RFC 7591 registration at /oauth/register (default off)
    --oauth-registration-scope S,..  the most a self-registered or metadata-document client may get
                       (default: what the MCP tools need)
    --oauth-client-id-metadata on|off  https client_ids described by a metadata document the cell
                       fetches (default on; always off in the sovereign posture)
    --trusted-proxies A,B  socket addresses whose X-Forwarded-For is believed (default none)
    --clearance N      this cell's clearance ceiling (default 0)
    --topology k=v,..  this cell's topology labels (site, zone, network)
    --heartbeat-ms N   group membership: heartbeat interval (default 500)
    --lease-ms N       a run stays its owner's this long after the owner's last heartbeat (default 2000)
    --max-clock-skew-ms N  beyond this offset from the database's clock the cell stands down (default 2000)
    --tls-cert FILE    serve https with this PEM certificate (with --tls-key)
    --tls-key FILE     the certificate's PEM private key
    --client-ca FILE   PEM CA for client certificates (mTLS, RFC 8705 bound tokens)
    --egress-allow-private CIDR,..  non-public ranges tools may reach (default none: loopback,
                       private and link-local addresses are refused whatever an allowlist says)
    --tool-sources FILE  stdio MCP servers whose tools the catalog imports (JSON; docs/configuration.md);
                       the only place a command the cell starts for tools is named
    --metrics-port N   serve Prometheus metrics at http://127.0.0.1:N/metrics (loopback only;
                       0 picks a free port; default: not served)
    --otlp-endpoint URL  export traces over OTLP/HTTP to URL (its /v1/traces); default
                       OTEL_EXPORTER_OTLP_ENDPOINT, else off (docs/operations.md "Traces")
    --log-level L      ${LOG_LEVELS.join(' | ')} (default info: one access-log line per request)
    --log-format F     ${LOG_FORMATS.join(' | ')} (default json: one object per line)
    --secrets-key-file FILE  the group's 32-byte secrets key (it seals provider secrets and signing
                       keys); every cell of a group is given the same file, proven against the
                       store before anything is written (default: DIR/secrets.key, made by the
                       first start on a new store)
    --pg-bin-dir DIR   where pg_dump and pg_restore are (default: the PATH, then the usual
                       directories); moves SQL workspaces of an earlier version, once each
`;

async function serveCommand(argv: string[]): Promise<void> {
  const values = parseArgs({ args: argv, options: SERVE_OPTIONS, strict: true }).values;
  // Checked in the order of the help text; the first wrong option ends the command with its message.
  const config: ServeConfig = {
    ...placeConfig(values),
    ...limitsConfig(values),
    ...trustConfig(values),
    ...groupConfig(values),
  };
  const log = serveLogger(values);
  if (values['secrets-key-file'] !== undefined) config.secretsKeyFile = resolve(values['secrets-key-file']);
  if (values['pg-bin-dir'] !== undefined) config.pgBinDir = resolve(values['pg-bin-dir']);
  const tls = tlsFiles(values);
  // The last guard, not the design: every background loop catches and retries its own errors. A rejection
  // none handled is a bug to report, not a reason to stop serving (a cell that exits on a store outage
  // leaves its group a member short; the outage itself is answered with 503s and not-ready).
  process.on('unhandledRejection', (reason) => {
    log.error('unhandled rejection (a bug: please report it); the cell keeps serving', {
      error: reason,
    });
  });
  checkDataDir(config.dataDir);
  let running: RunningCell;
  try {
    running = await startCell({ config, log, ...(tls ? { tls } : {}) });
  } catch (err) {
    explainStartFailure(err, config);
    throw err;
  }
  log.banner(banner(running));
  stopOnSignals(running, log);
}

/** The options of `serve` (SERVE_HELP says what each means). */
const SERVE_OPTIONS = {
  ...SHARED_SERVE_OPTIONS,
  data: { type: 'string' },
  store: { type: 'string' },
  'store-pool': { type: 'string' },
  'append-linger-ms': { type: 'string' },
  posture: { type: 'string' },
  'cell-id': { type: 'string' },
  'public-url': { type: 'string' },
  'oauth-issuer': { type: 'string' },
  'oauth-dynamic-registration': { type: 'boolean' },
  'oauth-registration-scope': { type: 'string' },
  'oauth-client-id-metadata': { type: 'string' },
  'agent-quota': { type: 'string' },
  'schedule-min-interval': { type: 'string' },
  'definition-quota': { type: 'string' },
  'max-delegation-depth': { type: 'string' },
  'max-key-bundle-ttl': { type: 'string' },
  'protected-resource': { type: 'string' },
  'run-storage-cap': { type: 'string' },
  'workspace-quota': { type: 'string' },
  'run-storage-quota': { type: 'string' },
  'trusted-proxies': { type: 'string' },
  clearance: { type: 'string' },
  topology: { type: 'string' },
  'heartbeat-ms': { type: 'string' },
  'lease-ms': { type: 'string' },
  'max-clock-skew-ms': { type: 'string' },
  'metrics-port': { type: 'string' },
  'otlp-endpoint': { type: 'string' },
  'secrets-key-file': { type: 'string' },
  'pg-bin-dir': { type: 'string' },
} as const;

/** The options of `serve` as given (strings, and the one boolean switch). */
type ServeArgs = Partial<Record<Exclude<keyof typeof SERVE_OPTIONS, 'oauth-dynamic-registration'>, string>> & {
  'oauth-dynamic-registration'?: boolean;
};

type RunningCell = Awaited<ReturnType<typeof startCell>>;

/** The configuration given on the command line (the rest defaults in config.ts); the data directory always. */
type ServeConfig = Partial<CellConfig> & { dataDir: string };

/** Where the cell listens, keeps its data and stands: address, data and store, region, posture, names, rate budget. */
function placeConfig(values: ServeArgs): ServeConfig {
  const config: ServeConfig = { dataDir: resolve(values.data ?? process.env['CELL_DATA'] ?? './.cell') };
  if (values.port !== undefined) config.port = intArg('port', values.port);
  if (values.host !== undefined) config.host = values.host;
  const storeUrl = values.store ?? process.env['CELL_STORE_URL'];
  if (storeUrl !== undefined && storeUrl !== '') {
    if (!/^postgres(ql)?:\/\//.test(storeUrl)) fail('--store takes a postgres://user@host:port/db URL');
    config.storeUrl = storeUrl;
  }
  if (values['store-pool'] !== undefined) config.storePoolSize = Math.max(1, intArg('store-pool', values['store-pool']));
  if (values['append-linger-ms'] !== undefined) {
    config.appendLingerMs = intArg('append-linger-ms', values['append-linger-ms']);
    if (config.appendLingerMs > 1000) fail('--append-linger-ms must be at most 1000');
  }
  if (values.region !== undefined) config.region = values.region;
  if (values.posture !== undefined) {
    if (!POSTURES.includes(values.posture as Posture)) fail(`--posture must be one of ${POSTURES.join(', ')}`);
    config.posture = values.posture as Posture;
  }
  if (values['cell-id'] !== undefined) config.cellId = values['cell-id'];
  if (values['public-url'] !== undefined) config.publicUrl = values['public-url'];
  if (values['oauth-issuer'] !== undefined) {
    const r = parseOAuthIssuer(values['oauth-issuer']);
    if (!r.ok) fail(r.error);
    config.oauthIssuer = r.issuer;
  }
  Object.assign(config, registrationConfig(values, config.posture ?? DEFAULTS.posture));
  if (values['rate-capacity'] !== undefined || values['rate-refill'] !== undefined) {
    config.rate = {
      capacity: intArg('rate-capacity', values['rate-capacity'] ?? '600'),
      refillPerSecond: intArg('rate-refill', values['rate-refill'] ?? '100'),
    };
  }
  return config;
}

/** How OAuth clients may come without an operator: dynamic registration, metadata documents, their scope cap. */
function registrationConfig(values: ServeArgs, posture: Posture): Partial<CellConfig> {
  const config: Partial<CellConfig> = {};
  if (values['oauth-dynamic-registration']) config.dynamicRegistration = true;
  if (values['oauth-registration-scope'] !== undefined) {
    const list = commaList(values['oauth-registration-scope']);
    for (const sel of list)
      if (sel === '*' || !/^[a-z_]+(\.[a-z_]+)*$/.test(sel))
        fail(`--oauth-registration-scope: '${sel}' is not a permission selector (no '*')`);
    config.registrationScope = list;
  }
  const cimd = values['oauth-client-id-metadata'];
  if (cimd !== undefined && cimd !== 'on' && cimd !== 'off') fail('--oauth-client-id-metadata takes on or off');
  // Air-gapped: the cell fetches nothing a client names.
  if (cimd === 'on' && posture === 'sovereign')
    fail('--oauth-client-id-metadata on: the sovereign posture is air-gapped; it fetches no client document');
  if (cimd === 'off' || posture === 'sovereign') config.clientIdMetadataDocuments = false;
  return config;
}

/** Quotas and bounds: agents, schedules, definitions, delegation depth, protected resources, run storage. */
function limitsConfig(values: ServeArgs): Partial<CellConfig> {
  const config: Partial<CellConfig> = {};
  if (values['agent-quota'] !== undefined) config.agentQuota = intArg('agent-quota', values['agent-quota']);
  if (values['schedule-min-interval'] !== undefined)
    config.scheduleMinIntervalSeconds = intArg('schedule-min-interval', values['schedule-min-interval']);
  if (values['definition-quota'] !== undefined) config.definitionQuota = intArg('definition-quota', values['definition-quota']);
  if (values['max-delegation-depth'] !== undefined)
    config.maxDelegationDepth = Math.min(16, Math.max(1, intArg('max-delegation-depth', values['max-delegation-depth'])));
  if (values['max-key-bundle-ttl'] !== undefined) {
    const ttl = intArg('max-key-bundle-ttl', values['max-key-bundle-ttl']);
    if (ttl < 1 || ttl > MAX_BUNDLE_TTL_SECONDS) fail(`--max-key-bundle-ttl must be 1 to ${MAX_BUNDLE_TTL_SECONDS} seconds`);
    config.maxKeyBundleTtlSeconds = ttl;
  }
  if (values['protected-resource'] !== undefined) {
    const list = commaList(values['protected-resource']);
    for (const u of list)
      if (!/^https?:\/\/[^\s#]+$/.test(u)) fail(`--protected-resource: '${u}' is not an http(s) URL without a fragment`);
    config.protectedResources = list;
  }
  if (values['run-storage-cap'] !== undefined) config.runStorageCapBytes = intArg('run-storage-cap', values['run-storage-cap']);
  if (values['workspace-quota'] !== undefined) config.workspaceQuotaBytes = intArg('workspace-quota', values['workspace-quota']);
  if (values['run-storage-quota'] !== undefined) config.runStorageQuotaBytes = intArg('run-storage-quota', values['run-storage-quota']);
  return config;
}

/** Whom the cell believes and where it may reach: trusted proxies, clearance, topology, private egress, stdio tool sources. */
function trustConfig(values: ServeArgs): Partial<CellConfig> {
  const config: Partial<CellConfig> = {};
  if (values['trusted-proxies'] !== undefined) config.trustedProxies = commaList(values['trusted-proxies']);
  if (values.clearance !== undefined) config.clearance = intArg('clearance', values.clearance);
  if (values.topology !== undefined) {
    config.topology = Object.fromEntries(
      values.topology
        .split(',')
        .filter(Boolean)
        .map((kv) => {
          const [k, v] = kv.split('=');
          if (!k || v === undefined) fail('--topology takes k=v pairs separated by commas');
          return [k, v];
        }),
    );
  }
  if (values['egress-allow-private'] !== undefined) config.egressAllowPrivate = egressAllowPrivateRules(values['egress-allow-private']);
  if (values['tool-sources'] !== undefined) {
    try {
      config.toolSources = readToolSources(resolve(values['tool-sources']));
    } catch (e) {
      fail((e as Error).message);
    }
  }
  return config;
}

/** The group's timing (heartbeat, lease, clock skew) and what the cell exports: metrics, traces. */
function groupConfig(values: ServeArgs): Partial<CellConfig> {
  const config: Partial<CellConfig> = {};
  if (values['heartbeat-ms'] !== undefined) config.heartbeatMs = intArg('heartbeat-ms', values['heartbeat-ms']);
  if (values['lease-ms'] !== undefined) config.leaseMs = intArg('lease-ms', values['lease-ms']);
  if (values['max-clock-skew-ms'] !== undefined) config.maxClockSkewMs = intArg('max-clock-skew-ms', values['max-clock-skew-ms']);
  if (values['metrics-port'] !== undefined) config.metricsPort = intArg('metrics-port', values['metrics-port']);
  try {
    config.traces = tracesConfig(process.env, values['otlp-endpoint']);
  } catch (e) {
    fail((e as Error).message);
  }
  return config;
}

/** A comma-separated option as its trimmed, non-empty items. */
function commaList(v: string): string[] {
  return v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** Ends the command with what to do when the cell could not start for a reason an operator can fix; returns otherwise. */
function explainStartFailure(err: unknown, config: ServeConfig): void {
  const code = (err as NodeJS.ErrnoException).code;
  if (err instanceof ClusterRefusal) fail(err.message, EXIT.failure);
  const dataDirProblem = dataDirError(err, config.dataDir);
  if (dataDirProblem) fail(dataDirProblem, EXIT.failure);
  const where = err as { port?: number; address?: string };
  if (code === 'EADDRINUSE') {
    const flag =
      where.port !== undefined && where.port === config.metricsPort && where.address === '127.0.0.1' ? '--metrics-port' : '--port';
    fail(
      `port ${where.port ?? config.port ?? 8080} on ${where.address ?? config.host ?? '127.0.0.1'} is already in use; pick another with ${flag}`,
      EXIT.failure,
    );
  }
  if (code === 'EACCES' && (err as { syscall?: string }).syscall === 'listen')
    fail(`not allowed to listen on port ${config.port}; pick a port above 1023 with --port`, EXIT.failure);
}

/**
 * What the cell prints once it listens, in one write: whoever starts reading at "listening on" (scripts,
 * tests) also has the key lines. In the json format they are JSON lines with their fields (`url`,
 * `metrics_url`, `key_file`): stdout carries JSON only.
 */
function banner(running: RunningCell): BannerLine[] {
  const cellId = running.core.config.cellId;
  const lines: BannerLine[] = [{ msg: `cell ${cellId} listening on ${running.url}`, fields: { cell_id: cellId, url: running.url } }];
  const metricsUrl = running.modules.ops.ops.metricsUrl();
  if (metricsUrl) lines.push({ msg: `metrics on ${metricsUrl}`, fields: { metrics_url: metricsUrl } });
  const keyFile = join(running.core.config.dataDir, BOOTSTRAP_KEY_FILE);
  if (running.bootstrapSecret) {
    // Only a person at a terminal sees it: a log shipper reading a pipe or a file would keep it.
    lines.push({
      msg: process.stdout.isTTY
        ? `bootstrap admin key (shown once, also in ${keyFile}):\n${running.bootstrapSecret}`
        : `bootstrap admin key created, in ${keyFile} (mode 0600; not printed: stdout is not a terminal)`,
      fields: { key_file: keyFile },
    });
  } else if (existsSync(keyFile)) {
    lines.push({ msg: `the bootstrap admin key was printed at the first start; it is in ${keyFile}`, fields: { key_file: keyFile } });
  }
  return lines;
}

/**
 * SIGINT and SIGTERM stop the cell, then the process. A second signal during shutdown waits for the same
 * stop: the store's close is never cut short. Every line logged until then is written before the process exits.
 */
function stopOnSignals(running: RunningCell, log: ProcessLogger): void {
  let stopping: Promise<void> | null = null;
  const started = Date.now();
  const shutdown = async (signal: NodeJS.Signals) => {
    stopping ??= running.stop().then(() => {
      log.info('cell stopped', { cell_id: running.core.config.cellId, signal, uptime_s: Math.round((Date.now() - started) / 1000) });
      return log.close();
    });
    await stopping;
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
}

/** Refuses a --data that names something other than a directory, before anything is opened. */
function checkDataDir(dir: string): void {
  let st;
  try {
    st = statSync(dir, { throwIfNoEntry: false });
  } catch (err) {
    const problem = dataDirError(err, dir);
    if (problem) fail(problem, EXIT.failure);
    throw err;
  }
  if (st && !st.isDirectory())
    fail(`--data ${dir} is a file, not a directory: give a directory (it is created when missing)`, EXIT.failure);
}

/** What to do about a file-system error on the data directory (EACCES, EROFS, ENOTDIR, …), or null when it is not one. */
function dataDirError(err: unknown, dir: string): string | null {
  const e = err as NodeJS.ErrnoException;
  if (
    typeof e.code !== 'string' ||
    typeof e.path !== 'string' ||
    !(e.path === dir || e.path.startsWith(`${dir}/`) || dir.startsWith(e.path))
  )
    return null;
  const user = userInfoSafe();
  switch (e.code) {
    case 'EACCES':
    case 'EPERM':
      return `cannot use the data directory ${dir}: permission denied on ${e.path} (${e.code}); make it writable by ${user} (chown or chmod), or pick another with --data`;
    case 'EROFS':
      return `cannot use the data directory ${dir}: ${e.path} is on a read-only file system; pick a writable place with --data`;
    case 'ENOTDIR':
    case 'EEXIST':
      return `cannot use the data directory ${dir}: ${e.path} is a file where a directory belongs; move it away or pick another --data`;
    case 'ENOSPC':
    case 'EDQUOT':
      return `cannot use the data directory ${dir}: no space left on its disk; free some or pick another --data`;
    default:
      return null;
  }
}

function userInfoSafe(): string {
  try {
    return `user ${userInfo().username}`;
  } catch {
    return `uid ${process.getuid?.() ?? '?'}`;
  }
}

function intArg(name: string, v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) fail(`--${name} must be a non-negative integer`);
  return n;
}

/** The cell's commands: what each runs and what its `--help` says (test/e2e/cli-help.test.ts walks it). */
export const CELL_PROGRAM: Program = {
  name: 'cell',
  invocation: 'node dist/cell.mjs',
  about: 'agent teams and jobs under offline-verifiable authority',
  commands: {
    serve: { summary: 'start a cell', usage: '[options]', details: SERVE_HELP, run: serveCommand },
    // The commands that work on a stopped cell's store are given startCell: a module does not import the wiring.
    bundle: {
      summary: "signed files for an edge device, from a stopped cell's store",
      subcommands: BUNDLE_HELP,
      run: (argv) => bundleCommand(argv, startCell),
    },
    backup: { ...BACKUP_HELP, run: backupCommand },
    restore: { ...RESTORE_HELP, run: restoreCommand },
    admin: { summary: 'operator recovery on a stopped cell', subcommands: ADMIN_HELP, run: (argv) => adminCommand(argv, startCell) },
    attestation: { summary: "a run's attestation, checked offline", subcommands: { verify: ATTESTATION_HELP }, run: attestationCommand },
  },
};

/** `attestation verify`: argv[0] is the subcommand (the dispatcher checked it), the rest its file and options. */
async function attestationCommand(argv: string[]): Promise<void> {
  process.exitCode = await verifyAttestationFile(argv.slice(1));
}

export function main(argv: string[]): Promise<void> {
  return dispatch(argv, CELL_PROGRAM);
}
