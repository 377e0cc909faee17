/**
 * The edge program: `node dist/edge.mjs <command>` or the single executable `dist/edge <command>`.
 * Commands: init, trust, serve, verify-key, journal export, state adopt, attestation export|keys|verify, model keygen|sign. See HELP and docs/edge.md.
 * No top-level await: the same source is bundled as CommonJS for the Node SEA.
 */
import { parseArgs } from 'node:util';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { serve } from '@hono/node-server';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { isServiceError } from '../core/errors.ts';
import { generateEd25519 } from '../bundles/codec.ts';
import {
  initialState,
  paths,
  readDevice,
  readState,
  readTrust,
  writeFileDurable,
  writeState,
  type DeviceFile,
  type TrustFile,
} from './files.ts';
import { edgeClock } from './clock.ts';
import { loadKeyBundle } from './load.ts';
import { MAX_BUNDLE_BYTES } from '../runtime/read-artifact.ts';
import { authenticateOffline, authorizeOffline, type LoadedKeys } from './decide.ts';
import { createEdgeApp, type EdgeRuntime } from './gateway.ts';
import { DurableReplayCache } from './replay-log.ts';
import { modelCommand } from './model-cli.ts';
import { mountOffline, prepareOffline } from './offline.ts';
import { journalCommand } from './journal-cli.ts';
import { stateCommand } from './state-cli.ts';
import { attestationCommand } from './attestation-cli.ts';
import { runtimeChildBridge } from '../runtime/local-model.ts';
import { installNativeSha256 } from '../runtime/native-hash.ts';
import { dispatch, fail, type Command } from '../runtime/cli.ts';
import { LOG_FORMATS, LOG_LEVELS, createLogger, exitOnFatalError, type LogFormat, type LogLevel } from '../runtime/log.ts';

const HELP = `edge: offline keys and offline crews for an air-gapped device

Usage: edge <command> [options]        (or: node dist/edge.mjs <command>)

Commands:
  init --data DIR                      create the device key pair; prints device_id and public JWK
  trust --data DIR --file TRUST.json   pin the cell (file from POST /edge/devices or 'cell bundle trust')
        [--publisher PUB.json]         also pin a model publisher key ({kid, jwk})
  serve --data DIR --bundle FILE [--crew-bundle FILE] [--model FILE --model-manifest FILE]
        [--port N] [--host H] [--region R] [--rate-capacity N] [--rate-refill N]
        [--tls-cert PEM --tls-key PEM [--client-ca PEM]]
        [--log-level debug|info|warn|error] [--log-format json|pretty] [--max-bundle-bytes N]
                                       the offline gateway (port 0 picks a free one); API keys
                                       and access tokens for edge:<device_id>, DPoP-bound too;
                                       with --client-ca, certificate-bound tokens (mTLS)
  verify-key --data DIR --bundle FILE [--ip IP] [--region R] [--permission P] [--max-bundle-bytes N]
                                       reads a key from stdin; prints its effective authority
                                       or the refusal reason (exit 0 allowed, 1 refused)
  journal export RUN --data DIR --out FILE
                                       write a run's signed journal for the cell (POST /edge/journals),
                                       with its place in the device's own run log
  state adopt --data DIR               seal, as it is, the state.json an older release of the edge wrote
                                       (this release refuses an unsealed state)
  attestation export RUN --data DIR --out FILE [--format bundle|scitt] [--crew-bundle FILE] [--values]
                                       the run's in-toto attestation signed by the device key (DSSE,
                                       with its inclusion in the device's run log), or SCITT COSE_Sign1
  attestation keys --data DIR --out FILE
                                       the device's public key as a keys file, for verify
  attestation verify FILE --keys KEYS.json [--previous CHECKPOINT --consistency PROOF.json]
                                       check an attestation offline (exit 0 verified, 1 refused)
  model keygen --out PUBLISHER.json    a model publisher key pair (keep it off the device)
  model sign --model FILE --key PUBLISHER.json --name NAME --out MANIFEST
                                       sign a model manifest (file SHA-256 and size)
  help                                 this text

--max-bundle-bytes N: the largest key or crew bundle file read (default 67108864, 64 MiB; a larger one is
refused, artifact_too_large, before it is read).

Test mode only: with AGENT_CELL_EDGE_TEST_CLOCK=1, serve and verify-key take --now-offset-ms N.
`;

async function initCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({ args: argv, options: { data: { type: 'string' } }, strict: true });
  if (!values.data) fail('init needs --data DIR');
  const dir = resolve(values.data);
  const p = paths(dir);
  if (existsSync(p.device)) fail(`a device key already exists in ${dir}; refusing to replace it`);
  const k = await generateEd25519();
  const device: DeviceFile = { format_version: 1, device_id: k.kid, public_jwk: k.publicJwk, private_jwk: k.privateJwk };
  // State first: a crash in between leaves no device.json, and init runs again from scratch.
  writeState(dir, initialState(device.device_id), device);
  writeFileDurable(p.device, JSON.stringify(device, null, 1) + '\n', 0o600);
  process.stdout.write(JSON.stringify({ device_id: k.kid, public_jwk: k.publicJwk }) + '\n');
}

async function trustCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: { data: { type: 'string' }, file: { type: 'string' }, publisher: { type: 'string', multiple: true } },
    strict: true,
  });
  if (!values.data || !values.file) fail('trust needs --data DIR --file TRUST.json');
  const dir = resolve(values.data);
  readDevice(dir);
  let anchor: { cell_id?: unknown; keys?: unknown; trust?: { cell_id?: unknown; keys?: unknown } };
  try {
    anchor = JSON.parse(readFileSync(values.file, 'utf8')) as typeof anchor;
  } catch {
    fail(`cannot read ${values.file} as JSON`);
  }
  const a = anchor.trust ?? anchor; // accepts the POST /edge/devices response or the trust object itself
  if (typeof a.cell_id !== 'string' || !Array.isArray(a.keys) || a.keys.length === 0) fail('the trust file needs cell_id and keys');
  const publishers = (values.publisher ?? [])
    .map((f) => JSON.parse(readFileSync(f, 'utf8')) as { kid: string; jwk: JsonWebKey; private_jwk?: unknown })
    .map((pk) => ({ kid: pk.kid, jwk: { kty: 'OKP', crv: 'Ed25519', x: pk.jwk.x } as JsonWebKey }));
  const existing = existsSync(paths(dir).trust) ? readTrust(dir) : null;
  if (existing && existing.cell_id !== a.cell_id)
    fail(`this device already trusts cell ${existing.cell_id}; refusing to re-pin to ${String(a.cell_id)}`);
  const trust: TrustFile = {
    format_version: 1,
    cell_id: a.cell_id,
    keys: (a.keys as { kid: string; jwk: JsonWebKey }[]).map((k) => ({
      kid: k.kid,
      jwk: { kty: 'OKP', crv: 'Ed25519', x: k.jwk.x } as JsonWebKey,
    })),
    publishers: [...(existing?.publishers ?? []), ...publishers],
  };
  writeFileDurable(paths(dir).trust, JSON.stringify(trust, null, 1) + '\n');
  process.stdout.write(`pinned cell ${trust.cell_id} (${trust.keys.length} key(s)), ${trust.publishers.length} model publisher(s)\n`);
}

const NOW_OPT = { 'now-offset-ms': { type: 'string' } } as const;
const MAX_BYTES_OPT = { 'max-bundle-bytes': { type: 'string' } } as const;

/** `--max-bundle-bytes`: the largest key or crew bundle file read (default 64 MiB), checked before it is read. */
function maxBundleBytes(v: string | undefined): number {
  return v === undefined ? MAX_BUNDLE_BYTES : positiveInt('max-bundle-bytes', v);
}

async function serveCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      data: { type: 'string' },
      bundle: { type: 'string' },
      'crew-bundle': { type: 'string' },
      model: { type: 'string' },
      'model-manifest': { type: 'string' },
      port: { type: 'string' },
      host: { type: 'string' },
      region: { type: 'string' },
      'rate-capacity': { type: 'string' },
      'rate-refill': { type: 'string' },
      'tls-cert': { type: 'string' },
      'tls-key': { type: 'string' },
      'client-ca': { type: 'string' },
      'log-level': { type: 'string' },
      'log-format': { type: 'string' },
      ...NOW_OPT,
      ...MAX_BYTES_OPT,
    },
    strict: true,
  });
  if (!values.data) fail('serve needs --data DIR');
  const maxBytes = maxBundleBytes(values['max-bundle-bytes']);
  const logLevel = (values['log-level'] ?? 'info') as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) fail(`--log-level must be one of ${LOG_LEVELS.join(', ')}`);
  const logFormat = (values['log-format'] ?? 'json') as LogFormat;
  if (!LOG_FORMATS.includes(logFormat)) fail(`--log-format must be one of ${LOG_FORMATS.join(', ')}`);
  const log = createLogger({ level: logLevel, format: logFormat });
  exitOnFatalError(log);
  if ((values['tls-cert'] === undefined) !== (values['tls-key'] === undefined)) fail('--tls-cert and --tls-key go together');
  if (values['client-ca'] !== undefined && values['tls-cert'] === undefined) fail('--client-ca needs --tls-cert and --tls-key');
  const readPem = (flag: string, f: string) => {
    try {
      return readFileSync(f);
    } catch {
      return fail(`cannot read --${flag} ${f}`);
    }
  };
  const tls =
    values['tls-cert'] !== undefined && values['tls-key'] !== undefined
      ? {
          cert: readPem('tls-cert', values['tls-cert']),
          key: readPem('tls-key', values['tls-key']),
          ...(values['client-ca'] !== undefined ? { ca: readPem('client-ca', values['client-ca']) } : {}),
        }
      : null;
  const dir = resolve(values.data);
  const clock = edgeClock(values['now-offset-ms']);
  const device = readDevice(dir);
  const trust = readTrust(dir);
  let state = readState(dir, device);
  let keys: LoadedKeys | null = null;
  if (values.bundle) {
    const loaded = await loadKeyBundle(values.bundle, trust, state, clock.now(), maxBytes);
    keys = loaded.keys;
    state = loaded.state;
  }
  const offline = await prepareOffline({
    dir,
    device,
    trust,
    state,
    clock,
    crewBundle: values['crew-bundle'],
    maxBundleBytes: maxBytes,
    model: values.model,
    modelManifest: values['model-manifest'],
  });
  state = offline.state;
  writeState(dir, state, device);
  // DPoP proofs seen before a restart stay refused after it, for as long as they could pass the freshness check.
  const replay = await DurableReplayCache.open(dir, clock.now());
  // After a crash, proofs issued before the last horizon are refused: start once the clock has passed it.
  const waited = await replay.untilFresh(clock);
  if (waited > 0) log.info('waited for the DPoP replay horizon a crash left', { waited_ms: waited });
  if (clock.now() < replay.freshFrom)
    log.warn('the clock is behind the DPoP replay horizon: proofs issued before it are refused', {
      fresh_from: new Date(replay.freshFrom).toISOString(),
    });
  const rt: EdgeRuntime = {
    deviceId: device.device_id,
    cellId: trust.cell_id,
    region: values.region ?? 'local',
    clock,
    keys,
    state,
    rate: {
      capacity: positiveInt('rate-capacity', values['rate-capacity'] ?? '600'),
      refillPerSecond: positiveInt('rate-refill', values['rate-refill'] ?? '100'),
    },
    info: offline.info,
    replay,
    clientCa: tls?.ca !== undefined,
    log,
  };
  const app = createEdgeApp(rt, (a, guard) => mountOffline(a, guard, rt, offline));
  const host = values.host ?? '127.0.0.1';
  const port0 = values.port === undefined ? 8090 : Number(values.port);
  if (!Number.isInteger(port0) || port0 < 0 || port0 > 65535) fail('--port must be 0 to 65535');
  const server = await new Promise<ReturnType<typeof serve>>((res) => {
    const s = tls
      ? serve(
          {
            fetch: app.fetch,
            port: port0,
            hostname: host,
            createServer: createHttpsServer,
            // A client certificate is asked for, not required: bearer and DPoP clients connect without one.
            serverOptions: {
              cert: tls.cert,
              key: tls.key,
              ...(tls.ca ? { ca: tls.ca, requestCert: true, rejectUnauthorized: false } : {}),
            },
          },
          () => res(s),
        )
      : serve({ fetch: app.fetch, port: port0, hostname: host }, () => res(s));
  });
  const port = (server.address() as AddressInfo).port;
  const tokenInfo = keys?.index.tokens ? `, tokens for edge:${device.device_id}` : ', no token keys';
  log.print(
    `edge ${device.device_id} listening on ${tls ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${port} (keys: ${keys ? `bundle v${keys.version}, ${keys.index.size} keys${tokenInfo}` : 'none: no key can be resolved'})\n`,
  );
  // Persist the clock high-water mark now and then, and on the way out.
  const persist = () => {
    try {
      writeState(dir, rt.state, device);
    } catch (e) {
      log.error('state write failed', { error: String(e) });
    }
  };
  const timer = setInterval(persist, 10_000);
  timer.unref();
  const shutdown = () => {
    clearInterval(timer);
    persist();
    // Every line logged until the server closed is written before the process exits; the replay
    // cache's live proofs too, so the next start refuses exactly those and need not wait.
    server.close(
      () =>
        void replay
          .close(clock.now())
          .catch((e: unknown) => log.error('dpop replay log close failed', { error: String(e) }))
          .then(() => log.close())
          .then(() => process.exit(0)),
    );
    (server as { closeAllConnections?: () => void }).closeAllConnections?.();
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
}

function positiveInt(name: string, v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) fail(`--${name} must be a positive integer`);
  return n;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8').trim();
}

async function verifyKeyCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      data: { type: 'string' },
      bundle: { type: 'string' },
      ip: { type: 'string' },
      region: { type: 'string' },
      permission: { type: 'string' },
      ...NOW_OPT,
      ...MAX_BYTES_OPT,
    },
    strict: true,
  });
  if (!values.data) fail('verify-key needs --data DIR');
  const maxBytes = maxBundleBytes(values['max-bundle-bytes']);
  const dir = resolve(values.data);
  const clock = edgeClock(values['now-offset-ms']);
  const device = readDevice(dir);
  const trust = readTrust(dir);
  let state = readState(dir, device);
  const secret = await readStdin();
  const now = clock.now();
  let keys: LoadedKeys | null = null;
  try {
    if (values.bundle) {
      const loaded = await loadKeyBundle(values.bundle, trust, state, now, maxBytes);
      keys = loaded.keys;
      state = loaded.state;
      writeState(dir, state, device);
    }
    const auth = authenticateOffline(keys, secret, { now, ip: values.ip ?? null, region: values.region ?? 'local' });
    if (values.permission) authorizeOffline(auth, values.permission);
    process.stdout.write(
      JSON.stringify({
        allowed: true,
        key_id: auth.key_id,
        owner_id: auth.owner_id,
        effective: auth.effective,
        matched: auth.matched,
        rate_limit_rpm: auth.rate_limit_rpm,
      }) + '\n',
    );
  } catch (e) {
    if (!isServiceError(e)) throw e;
    process.stdout.write(
      JSON.stringify({ allowed: false, error: e.code, reason: e.details?.['reason'] ?? null, message: e.message }) + '\n',
    );
    process.exit(1);
  }
}

const COMMANDS: Record<string, Command> = {
  init: initCommand,
  trust: trustCommand,
  serve: serveCommand,
  'verify-key': verifyKeyCommand,
  journal: journalCommand,
  state: stateCommand,
  attestation: attestationCommand,
  model: modelCommand,
};

export function main(argv: string[]): Promise<void> {
  return dispatch(argv, COMMANDS, HELP);
}

installNativeSha256();
if (!runtimeChildBridge()) main(process.argv.slice(2)).catch((e: unknown) => fail(String(e)));
