// core/ stays pure: no node:* imports, no Node built-ins, no reach into cell/ or edge/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

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

function* files(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) yield* files(p);
    else if (p.endsWith('.ts')) yield p;
  }
}

test('core/ imports nothing from node:, Node built-ins, cell/ or edge/', () => {
  const offenders: string[] = [];
  const spec = /(?:import|export)[^'"]*?from\s*['"]([^'"]+)['"]|import\s*\(\s*['"]([^'"]+)['"]\s*\)|require\(\s*['"]([^'"]+)['"]\s*\)/g;
  for (const f of files('core')) {
    const src = readFileSync(f, 'utf8');
    for (const m of src.matchAll(spec)) {
      const s = m[1] ?? m[2] ?? m[3] ?? '';
      if (
        s.startsWith('node:') ||
        NODE_BUILTINS.includes(s) ||
        /(^|\/)(cell|edge)\//.test(s) ||
        s.startsWith('../cell') ||
        s.startsWith('../edge')
      ) {
        offenders.push(`${f}: ${s}`);
      }
    }
  }
  assert.deepEqual(offenders, []);
});

test('the purity check catches a node: import', () => {
  const spec = /(?:import|export)[^'"]*?from\s*['"]([^'"]+)['"]/g;
  const found = [...`import { readFileSync } from 'node:fs';`.matchAll(spec)].map((m) => m[1]);
  assert.deepEqual(found, ['node:fs']);
});
