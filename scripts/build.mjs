// Bundles the cell and the edge into single ESM files with esbuild.
// sql.js's WebAssembly is embedded (binary loader), so dist/cell.mjs runs with
// no node_modules beside it.
import { build } from 'esbuild';
import { existsSync } from 'node:fs';
import { embedSwaggerUi } from '../cell/discovery/build-plugin.mjs';
import { embedConsole } from '../cell/console/build-plugin.mjs';
import { buildConsole } from '../console/build.mjs';

const banner = {
  // Bundled CommonJS dependencies call require(); give ESM output one.
  js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);",
};

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

// Build-time constants of builds that are not shipped (runtime/log.ts, cell/jobs/steps.ts test for them): false in
// the shipped bundle, so esbuild drops the code they guard and the program has no such switch or hook.
const notShipped = { AGENT_CELL_BENCH_LOG_TOGGLE: 'false', AGENT_CELL_CRASH_AFTER_SQL_EFFECT: 'false' };

// The docs page's swagger-ui files (cell/discovery/build-plugin.mjs) and the operator console,
// built from console/src first (cell/console/build-plugin.mjs), are embedded in the cell bundle.
const consoleFiles = await buildConsole();
await build({
  ...common,
  entryPoints: ['cell/main.ts'],
  outfile: 'dist/cell.mjs',
  plugins: [embedSwaggerUi, embedConsole(consoleFiles)],
  define: notShipped,
});
// The fault build for the crash tests (test/e2e/jobs-exactly-once.test.ts): this cell SIGKILLs itself right after a
// SQL step's effect committed, before its journal record. Never shipped; only the tests start it.
await build({
  ...common,
  entryPoints: ['cell/main.ts'],
  outfile: 'dist/test/cell-crash-after-sql-effect.mjs',
  plugins: [embedSwaggerUi, embedConsole(consoleFiles)],
  define: { ...notShipped, AGENT_CELL_CRASH_AFTER_SQL_EFFECT: 'true' },
});
// --bench-log-toggle: also a build for bench/access-log-toggle.ts, in which SIGUSR2 switches the info
// lines (the access log) off and on, so that one process serves both sides of the comparison. The
// shipped bundle has no such switch (runtime/log.ts tests for this build-time constant).
if (process.argv.includes('--bench-log-toggle')) {
  await build({
    ...common,
    entryPoints: ['cell/main.ts'],
    outfile: 'dist/bench/cell-log-toggle.mjs',
    plugins: [embedSwaggerUi, embedConsole(consoleFiles)],
    define: { ...notShipped, AGENT_CELL_BENCH_LOG_TOGGLE: 'true' },
  });
}
if (existsSync('edge/main.ts')) {
  await build({ ...common, entryPoints: ['edge/main.ts'], outfile: 'dist/edge.mjs' });
}
console.log('built dist/cell.mjs' + (existsSync('edge/main.ts') ? ' and dist/edge.mjs' : '') + ' (and the fault build, dist/test/)');
