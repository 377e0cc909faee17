/**
 * The edge program: `node dist/edge.mjs <command>` or the single executable `dist/edge <command>`.
 * Commands: init, trust, serve, verify-key, journal export, approvals list, state adopt, attestation export|keys|verify, model keygen|sign.
 * EDGE_PROGRAM is the table `--help` is printed from (docs/edge.md); edge/bin.ts, the bundle's entry, runs it.
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
import { readToolSources, type StdioSourceConfig } from '../runtime/mcp-client/config.ts';
import { authenticateOffline, authorizeOffline, type LoadedKeys } from './decide.ts';
import { createEdgeApp, type EdgeRuntime } from './gateway.ts';
import { DurableReplayCache } from './replay-log.ts';
import { MODEL_HELP, modelCommand } from './model-cli.ts';
import { mountOffline, prepareOffline } from './offline.ts';
import { mountMcp } from './mcp.ts';
import { mountApprovalsPage } from './approvals-page.ts';
import { JOURNAL_HELP, journalCommand } from './journal-cli.ts';
import { APPROVALS_HELP, approvalsCommand } from './approvals-cli.ts';
import { STATE_HELP, stateCommand } from './state-cli.ts';
import { ATTESTATION_EDGE_HELP, attestationCommand } from './attestation-cli.ts';
import { EXIT, Refusal, UsageError, dispatch, fail, type Program } from '../runtime/cli.ts';
import { LOG_FORMATS, LOG_LEVELS } from '../runtime/log.ts';
import { SHARED_SERVE_OPTIONS, egressAllowPrivateRules, serveLogger, tlsFiles } from '../runtime/serve-flags.ts';

async function initCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({ args: argv, options: { data: { type: 'string' } }, strict: true });
  if (!values.data) throw new UsageError('init needs --data DIR');
  const dir = resolve(values.data);
  const p = paths(dir);
  if (existsSync(p.device)) throw new Refusal(`a device key already exists in ${dir}; refusing to replace it`);
  const k = await generateEd25519();
  const device: DeviceFile = { format_version: 1, device_id: k.kid, public_jwk: k.publicJwk, private_jwk: k.privateJwk };
  // State first: a crash in between leaves no device.json, and init runs again from scratch.
  writeState(dir, initialState(device.device_id), device, { replace: true });
  writeFileDurable(p.device, JSON.stringify(device, null, 1) + '\n', 0o600);
  process.stdout.write(JSON.stringify({ device_id: k.kid, public_jwk: k.publicJwk }) + '\n');
}

async function trustCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: { data: { type: 'string' }, file: { type: 'string' }, publisher: { type: 'string', multiple: true } },
    strict: true,
  });
  if (!values.data || !values.file) throw new UsageError('trust needs --data DIR --file TRUST.json');
  const dir = resolve(values.data);
  readDevice(dir);
  let anchor: { cell_id?: unknown; keys?: unknown; trust?: { cell_id?: unknown; keys?: unknown } };
  try {
    anchor = JSON.parse(readFileSync(values.file, 'utf8')) as typeof anchor;
  } catch {
    fail(`cannot read ${values.file} as JSON`, EXIT.failure);
  }
  const a = anchor.trust ?? anchor; // accepts the POST /edge/devices response or the trust object itself
  if (typeof a.cell_id !== 'string' || !Array.isArray(a.keys) || a.keys.length === 0)
    fail('the trust file needs cell_id and keys', EXIT.failure);
  const publishers = (values.publisher ?? [])
    .map((f) => JSON.parse(readFileSync(f, 'utf8')) as { kid: string; jwk: JsonWebKey; private_jwk?: unknown })
    .map((pk) => ({ kid: pk.kid, jwk: { kty: 'OKP', crv: 'Ed25519', x: pk.jwk.x } as JsonWebKey }));
  const existing = existsSync(paths(dir).trust) ? readTrust(dir) : null;
  if (existing && existing.cell_id !== a.cell_id)
    throw new Refusal(`this device already trusts cell ${existing.cell_id}; refusing to re-pin to ${String(a.cell_id)}`);
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

/**
 * `--egress-allow-private CIDR,...`: the non-public ranges the device's HTTP tools may reach (runtime/ssrf.ts),
 * as the cell's flag; none by default.
 */
function egressAllowPrivate(v: string | undefined): string[] {
  return v === undefined ? [] : egressAllowPrivateRules(v);
}

/**
 * `--tool-sources FILE`: the stdio MCP servers the device starts for the crew bundle's imported tools, in the
 * cell's file format (runtime/mcp-client/config.ts); none by default.
 */
function readSources(path: string | undefined): StdioSourceConfig[] {
  if (path === undefined) return [];
  try {
    return readToolSources(path);
  } catch (e) {
    return fail(e instanceof Error && e.message.startsWith('--tool-sources') ? e.message : `cannot read --tool-sources ${path}`);
  }
}

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
      ...SHARED_SERVE_OPTIONS,
      ...NOW_OPT,
      ...MAX_BYTES_OPT,
    },
    strict: true,
  });
  if (!values.data) throw new UsageError('serve needs --data DIR');
  const allowPrivate = egressAllowPrivate(values['egress-allow-private']);
  const maxBytes = maxBundleBytes(values['max-bundle-bytes']);
  const toolSources = readSources(values['tool-sources']);
  const log = serveLogger(values);
  const readPem = (flag: string, f: string) => {
    try {
      return readFileSync(f);
    } catch {
      return fail(`cannot read --${flag} ${f}`, EXIT.failure);
    }
  };
  const tls = tlsFiles(values, readPem) ?? null;
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
    egressAllowPrivate: allowPrivate,
    toolSources,
  });
  state = writeState(dir, offline.state, device);
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
  let closeTools: () => Promise<void> = async () => undefined;
  const app = createEdgeApp(rt, (a, guard) => {
    const runs = mountOffline(a, guard, rt, offline);
    closeTools = runs.close;
    // The same /mcp as the cell's, for this device's crew (edge/mcp.ts).
    mountMcp(a, guard, rt, runs, device.public_jwk);
    // The approver's page (edge/approvals-page.ts): static, its data from the guarded routes above.
    mountApprovalsPage(a);
  });
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
  const url = `${tls ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${port}`;
  log.banner([
    {
      msg: `edge ${device.device_id} listening on ${url} (keys: ${keys ? `bundle v${keys.version}, ${keys.index.size} keys${tokenInfo}` : 'none: no key can be resolved'})`,
      fields: { device_id: device.device_id, url, key_bundle_version: keys ? keys.version : null },
    },
  ]);
  // Persist the clock high-water mark now and then, and on the way out.
  const persist = () => {
    try {
      rt.state = writeState(dir, rt.state, device);
    } catch (e) {
      log.error('state write failed', { error: e });
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
        void Promise.all([replay.close(clock.now()), closeTools().catch(() => undefined)])
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
  if (!values.data) throw new UsageError('verify-key needs --data DIR');
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
      state = writeState(dir, loaded.state, device);
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
    process.exit(EXIT.refused);
  }
}

const SERVE_DETAILS = `    the offline gateway (port 0 picks a free one; default 8090); API keys and access tokens for
    edge:<device_id>, DPoP-bound too; with --client-ca, certificate-bound tokens (mTLS); the
    crew as an MCP tool at /mcp (receipts signed by the device)
    --egress-allow-private: non-public ranges the crew's http.get and http.request may reach
    (default none: loopback, private and link-local addresses are refused whatever the bundle allows)
    --tool-sources FILE: the stdio MCP servers the device starts for the crew bundle's MCP tools (the
    cell's file format: { "sources": [ { "name", "command", "args"?, "env"?, "cwd"?, ... } ] }); a run
    is refused (device_tools_unavailable) unless each server's definition hashes to the bundle's pin
`;

/** The edge's commands: what each runs and what its `--help` says (test/e2e/cli-help.test.ts walks it). */
export const EDGE_PROGRAM: Program = {
  name: 'edge',
  invocation: 'edge',
  about: 'offline keys and offline crews for an air-gapped device (or: node dist/edge.mjs <command>)',
  commands: {
    init: { summary: 'create the device key pair; prints device_id and public JWK', usage: '--data DIR', run: initCommand },
    trust: {
      summary: "pin the cell (the file from POST /edge/devices or 'cell bundle trust')",
      usage: '--data DIR --file TRUST.json [--publisher PUB.json]',
      details: '    --publisher: also pin a model publisher key ({kid, jwk}); repeatable\n',
      run: trustCommand,
    },
    serve: {
      summary: 'the offline gateway, and offline crew runs with --crew-bundle',
      usage: `--data DIR --bundle FILE [--crew-bundle FILE] [--model FILE --model-manifest FILE]
        [--port N] [--host H] [--region R] [--rate-capacity N] [--rate-refill N]
        [--tls-cert PEM --tls-key PEM [--client-ca PEM]]
        [--log-level ${LOG_LEVELS.join('|')}] [--log-format ${LOG_FORMATS.join('|')}] [--max-bundle-bytes N]
        [--egress-allow-private CIDR,..] [--tool-sources FILE]`,
      details: SERVE_DETAILS,
      run: serveCommand,
    },
    'verify-key': {
      summary: 'read a key from stdin; print its effective authority or the refusal reason (exit 0 allowed, 3 refused)',
      usage: '--data DIR --bundle FILE [--ip IP] [--region R] [--permission P] [--max-bundle-bytes N]',
      run: verifyKeyCommand,
    },
    journal: { summary: "a run's signed journal, for the cell", subcommands: JOURNAL_HELP, run: journalCommand },
    approvals: { summary: 'the approvals waiting runs wait on', subcommands: APPROVALS_HELP, run: approvalsCommand },
    state: { summary: "the device's state file: seal the one an older release wrote", subcommands: STATE_HELP, run: stateCommand },
    attestation: {
      summary: "a device run's attestation: export, the device's keys, verify",
      subcommands: ATTESTATION_EDGE_HELP,
      run: attestationCommand,
    },
    model: { summary: 'the model publisher: a key pair, a signed manifest', subcommands: MODEL_HELP, run: modelCommand },
  },
  notes:
    '--max-bundle-bytes N: the largest key or crew bundle file read (default 67108864, 64 MiB; a larger one is\n' +
    'refused, artifact_too_large, before it is read).\n\n' +
    'Test mode only: with AGENT_CELL_EDGE_TEST_CLOCK=1, serve and verify-key take --now-offset-ms N.\n',
};

export function main(argv: string[]): Promise<void> {
  return dispatch(argv, EDGE_PROGRAM);
}
