/**
 * What the purity tests (test/core/purity.test.ts, test/bundles/purity.test.ts) read of a source
 * file: every module it names (static and re-export `from`, dynamic `import()`, `require()`), and
 * whether a name is a Node built-in (a `node:` name or a bare built-in such as 'fs').
 */

const NODE_BUILTINS = [
  'fs',
  'path',
  'os',
  'http',
  'https',
  'net',
  'crypto',
  'child_process',
  'worker_threads',
  'zlib',
  'stream',
  'util',
  'url',
  'buffer',
  'process',
  'events',
  'tls',
  'dns',
];

const SPEC = /(?:import|export)[^'"]*?from\s*['"]([^'"]+)['"]|import\s*\(\s*['"]([^'"]+)['"]\s*\)|require\(\s*['"]([^'"]+)['"]\s*\)/g;

/** The module names a source text imports, in order. */
export function importedModules(src: string): string[] {
  return [...src.matchAll(SPEC)].map((m) => m[1] ?? m[2] ?? m[3] ?? '');
}

/** A `node:` module or a Node built-in named bare. */
export const isNodeBuiltin = (s: string): boolean => s.startsWith('node:') || NODE_BUILTINS.includes(s);
