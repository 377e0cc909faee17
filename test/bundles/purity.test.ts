// bundles/ stays pure like core/: no node: imports, no Node built-ins, no reach into cell/ or edge/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { importedModules, isNodeBuiltin } from '../helpers/imports.ts';

test('bundles/ imports nothing from node:, Node built-ins, cell/ or edge/', () => {
  const offenders: string[] = [];
  const files = readdirSync('bundles').filter((f) => f.endsWith('.ts'));
  assert.ok(files.length >= 6);
  for (const f of files) {
    const src = readFileSync(join('bundles', f), 'utf8');
    for (const s of importedModules(src)) {
      if (isNodeBuiltin(s) || s.startsWith('../cell') || s.startsWith('../edge')) offenders.push(`${f}: ${s}`);
    }
    if (/\bprocess\./.test(src) || /\bBuffer\b/.test(src)) offenders.push(`${f}: uses a Node global`);
  }
  assert.deepEqual(offenders, []);
});
