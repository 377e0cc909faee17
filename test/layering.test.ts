// The layering of DESIGN.md: cell/ and edge/ import core/, bundles/ and runtime/,
// never each other; core/, bundles/ and runtime/ import neither cell/ nor edge/;
// the console (console/, a browser application) imports only core/ of ours.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

function* files(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (name === 'node_modules') continue;
    if (statSync(p).isDirectory()) yield* files(p);
    else if (p.endsWith('.ts') || p.endsWith('.tsx')) yield p;
  }
}

const SPEC = /(?:import|export)[^'"]*?from\s*['"]([^'"]+)['"]|import\s*\(\s*['"]([^'"]+)['"]\s*\)/g;

function reaches(dir: string, forbidden: string[]): string[] {
  const bad: string[] = [];
  for (const f of files(dir)) {
    for (const m of readFileSync(f, 'utf8').matchAll(SPEC)) {
      const s = m[1] ?? m[2] ?? '';
      if (!s.startsWith('.')) continue;
      const target = join(f, '..', s).split('/')[0]!;
      if (forbidden.includes(target)) bad.push(`${f} -> ${s}`);
    }
  }
  return bad;
}

test('cell/ never imports edge/, edge/ never imports cell/', () => {
  assert.deepEqual(reaches('cell', ['edge']), []);
  assert.deepEqual(reaches('edge', ['cell']), []);
});

test('core/, bundles/ and runtime/ import neither cell/ nor edge/', () => {
  for (const d of ['core', 'bundles', 'runtime']) assert.deepEqual(reaches(d, ['cell', 'edge']), [], d);
});

test('console/ imports only core/ of the project; nothing imports console/ but the build', () => {
  assert.deepEqual(reaches('console', ['cell', 'edge', 'bundles', 'runtime', 'scripts']), []);
  for (const d of ['core', 'bundles', 'runtime', 'edge']) assert.deepEqual(reaches(d, ['console']), [], d);
  // The cell reaches console/ only through its dev-time asset loader (replaced in the bundle).
  assert.deepEqual(reaches('cell', ['console']).map((x) => x.split(' -> ')[0]), ['cell/console/_assets.ts']);
});
