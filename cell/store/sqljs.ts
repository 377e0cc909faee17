/**
 * Loads sql.js (SQLite compiled to WebAssembly) once per process.
 *
 * The WebAssembly bytes come from `require('sql.js/dist/sql-wasm.wasm')`: the
 * esbuild bundle (binary loader) embeds them, so dist/cell.mjs runs without
 * node_modules. Under tsx/plain Node there is no such module and the file is
 * read from node_modules instead.
 */
import initSqlJs, { type SqlJsStatic } from 'sql.js';

let loading: Promise<SqlJsStatic> | undefined;

/** The sql.js module, initialised once. */
export function loadSqlJs(): Promise<SqlJsStatic> {
  loading ??= init();
  return loading;
}

async function wasmBytes(): Promise<Uint8Array> {
  // In the esbuild bundle this `require` is resolved at build time to the
  // embedded bytes (binary loader); a plain require avoids esbuild's ESM interop,
  // which copies a Uint8Array index by index (~0.5 s at start-up). Under tsx or
  // plain Node there is no bundled module: fall through to reading the file.
  try {
    const m: unknown = typeof require === 'function' ? require('sql.js/dist/sql-wasm.wasm') : undefined;
    if (m instanceof Uint8Array) return m;
  } catch {
    // Not bundled: Node cannot require a .wasm file; read it below.
  }
  const { createRequire } = await import('node:module');
  const { readFileSync } = await import('node:fs');
  const req = createRequire(import.meta.url);
  return new Uint8Array(readFileSync(req.resolve('sql.js/dist/sql-wasm.wasm')));
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
