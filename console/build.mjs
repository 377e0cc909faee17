// Builds the operator console (console/src) into the files the cell serves
// under /console/assets: console.js (the application), callback.js (the
// sign-in pop-up's return page) and console.css. esbuild, browser target, no
// source maps, no code splitting: three files, nothing fetched from anywhere
// else. Used by scripts/build.mjs (embedded into dist/cell.mjs by
// cell/console/build-plugin.mjs) and, when the cell runs from source, by
// cell/console/internal/assets.ts on the first request.
import { build } from 'esbuild';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));

/** The browsers the console supports: recent evergreen releases with WebCrypto Ed25519. */
export const CONSOLE_TARGETS = ['chrome120', 'firefox129', 'safari17'];

const TYPES = { '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };

/**
 * Bundles the console. Resolves to { 'console.js': {body, contentType}, 'callback.js': ..., 'console.css': ... }.
 * @param {{ minify?: boolean }} [opts]
 */
export async function buildConsole(opts = {}) {
  const r = await build({
    absWorkingDir: ROOT,
    entryPoints: { console: 'console/src/main.tsx', callback: 'console/src/callback.ts' },
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: CONSOLE_TARGETS,
    jsx: 'automatic',
    jsxImportSource: 'preact',
    minify: opts.minify ?? true,
    legalComments: 'eof',
    sourcemap: false,
    splitting: false,
    write: false,
    outdir: 'console-out',
    logLevel: 'warning',
    define: { 'process.env.NODE_ENV': '"production"' },
  });
  const files = {};
  for (const f of r.outputFiles) {
    const name = f.path.slice(f.path.lastIndexOf('/') + 1);
    const ext = name.slice(name.lastIndexOf('.'));
    files[name] = { body: f.text, contentType: TYPES[ext] ?? 'application/octet-stream' };
  }
  for (const want of ['console.js', 'callback.js', 'console.css']) {
    if (!files[want]) throw new Error(`console build: ${want} was not produced (got ${Object.keys(files).join(', ')})`);
  }
  return files;
}
