/**
 * Loads sql.js (SQLite compiled to WebAssembly) once per process.
 *
 * The WebAssembly bytes come from `import('sql.js/dist/sql-wasm.wasm')`: the
 * esbuild bundle (binary loader) embeds them, so dist/cell.mjs runs without
 * node_modules. Under tsx/plain Node that import is refused (unknown file
 * extension) and the file is read from node_modules instead.
 */
import initSqlJs, { type SqlJsStatic } from 'sql.js';

let loading: Promise<SqlJsStatic> | undefined;

/** The sql.js module, initialised once. */
export function loadSqlJs(): Promise<SqlJsStatic> {
  loading ??= init();
  return loading;
}

async function wasmBytes(): Promise<Uint8Array> {
  try {
    // @ts-expect-error: no typings for the .wasm file; esbuild's binary loader gives a Uint8Array.
    const m = (await import('sql.js/dist/sql-wasm.wasm')) as { default?: unknown };
    if (m.default instanceof Uint8Array) return m.default;
  } catch {
    // Not bundled: Node has no loader for .wasm imports; fall through to reading the file.
  }
  const { createRequire } = await import('node:module');
  const { readFileSync } = await import('node:fs');
  const require = createRequire(import.meta.url);
  return new Uint8Array(readFileSync(require.resolve('sql.js/dist/sql-wasm.wasm')));
}

async function init(): Promise<SqlJsStatic> {
  const bytes = await wasmBytes();
  const wasmBinary = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  // sql.js's CommonJS glue reads `__dirname` when it runs in Node; an ESM bundle
  // has none, so lend it one for the duration of the initialisation.
  const g = globalThis as { __dirname?: string };
  const lent = typeof g.__dirname === 'undefined' && !('__dirname' in globalThis);
  if (lent) g.__dirname = '/';
  try {
    return await initSqlJs({ wasmBinary });
  } finally {
    if (lent) delete g.__dirname;
  }
}
