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
  assert.deepEqual(
    reaches('cell', ['console']).map((x) => x.split(' -> ')[0]),
    ['cell/console/internal/assets.ts'],
  );
});

const SOURCE = ['core', 'bundles', 'runtime', 'cell', 'edge', 'console'];

test('an internal/ folder is private to the folder that holds it', () => {
  const bad: string[] = [];
  for (const d of [...SOURCE, 'test', 'bench', 'scripts']) {
    for (const f of files(d)) {
      for (const m of readFileSync(f, 'utf8').matchAll(SPEC)) {
        const s = m[1] ?? m[2] ?? '';
        if (!s.startsWith('.')) continue;
        const target = join(f, '..', s);
        const i = target.indexOf('/internal/');
        if (i < 0) continue;
        const owner = target.slice(0, i);
        // The owner folder and its subfolders may import it; so may the owner's tests (test/<owner>/)
        // and the benchmarks, which build fixtures below the public surface (a store's log).
        if (!(f.startsWith(owner + '/') || f.startsWith(join('test', owner) + '/') || f.startsWith('bench/'))) bad.push(`${f} -> ${s}`);
      }
    }
  }
  assert.deepEqual(bad, []);
});

test('source files private to a folder live in internal/, not behind a _ prefix', () => {
  const prefixed = SOURCE.flatMap((d) => [...files(d)]).filter((f) => /\/_[^/]+$/.test(f));
  assert.deepEqual(prefixed, []);
});
