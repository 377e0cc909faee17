/**
 * What the purity tests (test/core/purity.test.ts, test/bundles/purity.test.ts) read of a source
 * file: every module it names (static, re-export and side-effect imports, dynamic `import()`, `require()`), and
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

/** The module names a source text imports, in order (side-effect imports included): the faces rule's reader. */
export { importedModules } from '../../scripts/lint-faces.ts';

/** A `node:` module or a Node built-in named bare. */
export const isNodeBuiltin = (s: string): boolean => s.startsWith('node:') || NODE_BUILTINS.includes(s);
