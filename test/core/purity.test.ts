// core/ stays pure: no node:* imports, no Node built-ins, no reach into cell/ or edge/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { importedModules, isNodeBuiltin } from '../helpers/imports.ts';

function* files(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) yield* files(p);
    else if (p.endsWith('.ts')) yield p;
  }
}

test('core/ imports nothing from node:, Node built-ins, cell/ or edge/', () => {
  const offenders: string[] = [];
  for (const f of files('core')) {
    const src = readFileSync(f, 'utf8');
    for (const s of importedModules(src)) {
      if (isNodeBuiltin(s) || /(^|\/)(cell|edge)\//.test(s) || s.startsWith('../cell') || s.startsWith('../edge')) {
        offenders.push(`${f}: ${s}`);
      }
    }
  }
  assert.deepEqual(offenders, []);
});

test('the purity check catches a node: import', () => {
  const found = importedModules(`import { readFileSync } from 'node:fs';`);
  assert.deepEqual(found, ['node:fs']);
});
