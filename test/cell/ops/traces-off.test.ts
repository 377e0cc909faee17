/**
 * Trace export is off by default and then costs nothing: a cell started with
 * no OTLP endpoint loads none of the OpenTelemetry SDK (only
 * @opentelemetry/api, which prom-client loads for every cell); with an
 * endpoint it loads the SDK and the OTLP exporter (the control that shows
 * the check sees them). Each case runs in a child process of its own
 * (test/fixtures/otel-loaded.ts). The shipped build keeps the SDK out of
 * dist/cell.mjs altogether (dist/cell-otel.mjs, read only when export is
 * on). Also the settings' reading of the standard OTEL_* variables and the flag.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { tracesConfig } from '../../../cell/ops/traces-config.ts';

const FIXTURE = resolve(import.meta.dirname, '../../fixtures/otel-loaded.ts');

function loadedPackages(env: Record<string, string>): string[] {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OTEL_')));
  const r = spawnSync(process.execPath, ['--import', 'tsx', FIXTURE], { env: { ...clean, ...env }, encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 0, r.stderr);
  return (JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { packages: string[] }).packages;
}

const sdk = (pkgs: string[]) => pkgs.filter((p) => p !== '@opentelemetry/api');

describe('trace export off by default', () => {
  test('no endpoint: no OpenTelemetry SDK module is loaded', { timeout: 150_000 }, () => {
    assert.deepEqual(sdk(loadedPackages({})), []);
  });

  test('OTEL_SDK_DISABLED=true wins over an endpoint: nothing loaded', { timeout: 150_000 }, () => {
    assert.deepEqual(sdk(loadedPackages({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', OTEL_SDK_DISABLED: 'true' })), []);
  });

  test('with an endpoint the SDK and the OTLP exporter are loaded (the control)', { timeout: 150_000 }, () => {
    // Nothing listens there: the exporter's flush at the cell's stop fails, and without a short timeout its
    // retries would hold the process ~9 s.
    const pkgs = loadedPackages({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', OTEL_EXPORTER_OTLP_TIMEOUT: '300' });
    assert.ok(pkgs.includes('@opentelemetry/sdk-trace-base'), pkgs.join());
    assert.ok(pkgs.includes('@opentelemetry/exporter-trace-otlp-proto'), pkgs.join());
  });
});

describe('the shipped build: the SDK in a file of its own', () => {
  const DIST = resolve(import.meta.dirname, '../../../dist');

  test('dist/cell.mjs holds no OpenTelemetry SDK code; dist/cell-otel.mjs does, and the cell imports it by name', () => {
    const cell = readFileSync(join(DIST, 'cell.mjs'), 'utf8');
    const otel = readFileSync(join(DIST, 'cell-otel.mjs'), 'utf8');
    for (const name of ['BatchSpanProcessor', 'OTLPTraceExporter', 'BasicTracerProvider']) {
      assert.ok(!cell.includes(name), `dist/cell.mjs carries ${name}`);
      assert.ok(otel.includes(name), `dist/cell-otel.mjs lacks ${name}`);
    }
    assert.ok(cell.includes('"./cell-otel.mjs"'), 'the cell imports the file beside it');
  });

  test('a dist/cell.mjs copied without cell-otel.mjs and started with an OTLP endpoint says what is missing (exit 1)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cell-no-otel-'));
    try {
      copyFileSync(join(DIST, 'cell.mjs'), join(dir, 'cell.mjs'));
      const r = spawnSync(process.execPath, ['cell.mjs', 'serve', '--port', '0', '--data', join(dir, 'data')], {
        cwd: dir,
        env: { ...process.env, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' },
        encoding: 'utf8',
        timeout: 60_000,
      });
      assert.equal(r.status, 1, r.stderr);
      assert.match(r.stderr, /^error: trace export needs cell-otel\.mjs beside cell\.mjs/m);
      assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('the cell is minified with its names kept (stack traces and logged errors still name functions and classes)', () => {
    const cell = readFileSync(join(DIST, 'cell.mjs'), 'utf8');
    assert.ok(cell.split('\n').length < 2000, 'minified');
    // Kept as written, not restored at run time: esbuild's keepNames calls `__name(fn, "…")` (a defineProperty) each
    // time a function is created, which cost a quarter of an authenticated GET's CPU (scripts/build.mjs).
    for (const declared of ['function startCell(', 'ServiceError=class ', 'function createLogger('])
      assert.ok(cell.includes(declared), `${declared} is in the bundle as written`);
    assert.ok(!cell.includes('__name('), 'no name is restored at run time');
  });
});

describe('trace settings from the environment and the flag', () => {
  test('off unless an endpoint is given', () => {
    assert.equal(tracesConfig({}, undefined), null);
    assert.equal(tracesConfig({ OTEL_SERVICE_NAME: 'x' }, undefined), null);
  });

  test('the base endpoint gets /v1/traces; the traces endpoint is used as is; the flag wins', () => {
    assert.equal(
      tracesConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }, undefined)?.endpoint,
      'http://collector:4318/v1/traces',
    );
    assert.equal(tracesConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/otlp/' }, undefined)?.endpoint, 'http://c:4318/otlp/v1/traces');
    const both = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://b/t' };
    assert.equal(tracesConfig(both, undefined)?.endpoint, 'https://b/t');
    assert.equal(
      tracesConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318' }, 'http://flag:4318')?.endpoint,
      'http://flag:4318/v1/traces',
    );
  });

  test('service name, content capture (off unless true)', () => {
    const c = tracesConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318' }, undefined);
    assert.equal(c?.serviceName, 'agent-cell');
    assert.equal(c?.captureContent, false);
    const d = tracesConfig(
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318',
        OTEL_SERVICE_NAME: 'cells-eu',
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'TRUE',
      },
      undefined,
    );
    assert.equal(d?.serviceName, 'cells-eu');
    assert.equal(d?.captureContent, true);
    const e = tracesConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a', OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: '1' }, undefined);
    assert.equal(e?.captureContent, false);
  });

  test('OTEL_TRACES_EXPORTER=none and OTEL_SDK_DISABLED=true turn it off', () => {
    assert.equal(tracesConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a', OTEL_TRACES_EXPORTER: 'none' }, undefined), null);
    assert.equal(tracesConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a', OTEL_SDK_DISABLED: 'true' }, undefined), null);
    assert.equal(tracesConfig({ OTEL_TRACES_EXPORTER: 'none' }, 'http://flag:4318'), null, 'whatever the endpoint');
  });

  test('refused: a URL that is not http(s), credentials in the URL, another protocol or exporter', () => {
    assert.throws(() => tracesConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, undefined), /http\(s\) URL/);
    assert.throws(() => tracesConfig({}, 'ftp://x'), /--otlp-endpoint must be an http\(s\) URL/);
    assert.throws(() => tracesConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://u:p@a:4318' }, undefined), /OTEL_EXPORTER_OTLP_HEADERS/);
    assert.throws(
      () => tracesConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, undefined),
      /http\/protobuf/,
    );
    assert.throws(() => tracesConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a', OTEL_TRACES_EXPORTER: 'zipkin' }, undefined), /OTLP only/);
  });
});
