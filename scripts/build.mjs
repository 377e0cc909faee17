// Bundles the cell and the edge into single ESM files with esbuild.
// sql.js's WebAssembly is embedded (binary loader), so dist/cell.mjs runs with
// no node_modules beside it.
import { build } from 'esbuild';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { embedSwaggerUi } from '../cell/discovery/build-plugin.mjs';
import { embedConsole } from '../cell/console/build-plugin.mjs';
import { buildConsole } from '../console/build.mjs';

const banner = {
  // Bundled CommonJS dependencies call require(); give ESM output one.
  js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);",
};

// runtime/version.ts imports package.json for its version: the bundles are given that field alone (not the
// dependency lists, scripts and the rest).
const packageJson = resolve('package.json');
const { version } = JSON.parse(readFileSync(packageJson, 'utf8'));
const versionOnly = {
  name: 'package-version-only',
  setup(b) {
    b.onLoad({ filter: /[\\/]package\.json$/ }, (args) =>
      args.path === packageJson ? { contents: JSON.stringify({ version }), loader: 'json' } : undefined,
    );
  },
};

// --edge-sea: only dist/edge.cjs, the edge as CommonJS (a Node single executable runs CommonJS), for
// scripts/build-sea.sh.
if (process.argv.includes('--edge-sea')) {
  await build({
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node22',
    loader: { '.wasm': 'binary' },
    logLevel: 'warning',
    legalComments: 'none',
    entryPoints: ['edge/bin.ts'],
    outfile: 'dist/edge.cjs',
    plugins: [versionOnly],
  });
  process.exit(0);
}

const common = {
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node22',
  loader: { '.wasm': 'binary' },
  banner,
  logLevel: 'warning',
  legalComments: 'none',
};

// The OpenTelemetry SDK behind cell/ops/otel-sink.ts is a file of its own beside the cell, dist/cell-otel.mjs, which
// cell/server.ts imports only when trace export is on: a cell that exports no traces neither reads nor parses it.
const otelApart = {
  name: 'otel-sink-apart',
  setup(b) {
    b.onResolve({ filter: /[\\/]ops[\\/]otel-sink\.ts$/ }, (args) =>
      args.kind === 'dynamic-import' ? { path: './cell-otel.mjs', external: true } : undefined,
    );
  },
};

// The shipped cell has its whitespace and syntax minified, not its identifiers: function and class names stay as
// they are (a name esbuild had to rename in the bundle gets a digit, e.g. `dispatch2`), so stack traces and logged
// errors still name them. Not `keepNames`: it keeps minified names readable by redefining `name` on every function
// as it is created (`Object.defineProperty`), and closures are created on every request and step; that turned
// their objects' shapes slow and cost a quarter of an authenticated GET's CPU (bench/RESULTS.md "Stop 43").
const shipped = { minifyWhitespace: true, minifySyntax: true };

// Build-time constants of builds that are not shipped (runtime/log.ts, cell/jobs/steps.ts test for them): false in
// the shipped bundle, so esbuild drops the code they guard and the program has no such switch or hook.
const notShipped = { AGENT_CELL_BENCH_LOG_TOGGLE: 'false', AGENT_CELL_CRASH_AFTER_SQL_EFFECT: 'false' };

// The docs page's swagger-ui files (cell/discovery/build-plugin.mjs) and the operator console,
// built from console/src first (cell/console/build-plugin.mjs), are embedded in the cell bundle.
const consoleFiles = await buildConsole();
await build({
  ...common,
  ...shipped,
  entryPoints: ['cell/bin.ts'],
  outfile: 'dist/cell.mjs',
  plugins: [versionOnly, otelApart, embedSwaggerUi, embedConsole(consoleFiles)],
  define: notShipped,
});
await build({ ...common, ...shipped, entryPoints: ['cell/ops/otel-sink.ts'], outfile: 'dist/cell-otel.mjs', plugins: [versionOnly] });
// The fault build for the crash tests (test/e2e/jobs-exactly-once.test.ts): this cell SIGKILLs itself right after a
// SQL step's effect committed, before its journal record. Never shipped; only the tests start it (beside it, in
// dist/test/, no cell-otel.mjs: it exports no traces).
await build({
  ...common,
  entryPoints: ['cell/bin.ts'],
  outfile: 'dist/test/cell-crash-after-sql-effect.mjs',
  plugins: [versionOnly, otelApart, embedSwaggerUi, embedConsole(consoleFiles)],
  define: { ...notShipped, AGENT_CELL_CRASH_AFTER_SQL_EFFECT: 'true' },
});
// --bench-log-toggle: also a build for bench/access-log-toggle.ts, in which SIGUSR2 switches the info
// lines (the access log) off and on, so that one process serves both sides of the comparison. The
// shipped bundle has no such switch (runtime/log.ts tests for this build-time constant).
if (process.argv.includes('--bench-log-toggle')) {
  await build({
    ...common,
    entryPoints: ['cell/bin.ts'],
    outfile: 'dist/bench/cell-log-toggle.mjs',
    plugins: [versionOnly, otelApart, embedSwaggerUi, embedConsole(consoleFiles)],
    define: { ...notShipped, AGENT_CELL_BENCH_LOG_TOGGLE: 'true' },
  });
}
if (existsSync('edge/main.ts')) {
  await build({ ...common, entryPoints: ['edge/bin.ts'], outfile: 'dist/edge.mjs', plugins: [versionOnly] });
}
console.log(
  'built dist/cell.mjs, dist/cell-otel.mjs' +
    (existsSync('edge/main.ts') ? ' and dist/edge.mjs' : '') +
    ' (and the fault build, dist/test/)',
);
