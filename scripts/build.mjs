// Bundles the cell and the edge into single ESM files with esbuild.
// sql.js's WebAssembly is embedded (binary loader), so dist/cell.mjs runs with
// no node_modules beside it.
import { build } from 'esbuild';
import { existsSync } from 'node:fs';

const banner = {
  // Bundled CommonJS dependencies call require(); give ESM output one.
  js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);",
};

const common = {
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  loader: { '.wasm': 'binary' },
  banner,
  logLevel: 'warning',
  legalComments: 'none',
};

await build({ ...common, entryPoints: ['cell/main.ts'], outfile: 'dist/cell.mjs' });
if (existsSync('edge/main.ts')) {
  await build({ ...common, entryPoints: ['edge/main.ts'], outfile: 'dist/edge.mjs' });
}
console.log('built dist/cell.mjs' + (existsSync('edge/main.ts') ? ' and dist/edge.mjs' : ''));
