// bundles/ stays pure like core/: no node: imports, no Node built-ins, no reach into cell/ or edge/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const BUILTINS = [
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

test('bundles/ imports nothing from node:, Node built-ins, cell/ or edge/', () => {
  const offenders: string[] = [];
  const spec = /(?:import|export)[^'"]*?from\s*['"]([^'"]+)['"]|import\s*\(\s*['"]([^'"]+)['"]\s*\)|require\(\s*['"]([^'"]+)['"]\s*\)/g;
  const files = readdirSync('bundles').filter((f) => f.endsWith('.ts'));
  assert.ok(files.length >= 6);
  for (const f of files) {
    const src = readFileSync(join('bundles', f), 'utf8');
    for (const m of src.matchAll(spec)) {
      const s = m[1] ?? m[2] ?? m[3] ?? '';
      if (s.startsWith('node:') || BUILTINS.includes(s) || s.startsWith('../cell') || s.startsWith('../edge')) offenders.push(`${f}: ${s}`);
    }
    if (/\bprocess\./.test(src) || /\bBuffer\b/.test(src)) offenders.push(`${f}: uses a Node global`);
  }
  assert.deepEqual(offenders, []);
});
