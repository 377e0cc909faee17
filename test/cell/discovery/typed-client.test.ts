// The README's typed-client command works: openapi-typescript generates
// types from a running cell's document, and test/fixtures/typed-client.ts
// type-checks against them with tsc (and a deliberately wrong use does not).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { startCellProcess, type CellProcess } from '../../helpers/cell-process.ts';
import { keyIds, listKeys } from '../../fixtures/typed-client.ts';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '../../..');
const BIN = (name: string) => join(ROOT, 'node_modules', '.bin', name);

let cell: CellProcess;
let dir: string;

before(async () => {
  cell = await startCellProcess();
  dir = mkdtempSync(join(tmpdir(), 'typed-client-'));
});
after(async () => {
  await cell?.stop();
  cell?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function tsc(files: string[]): Promise<{ ok: boolean; output: string }> {
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        lib: ['ES2022', 'DOM'],
        types: [],
        strict: true,
        noEmit: true,
        exactOptionalPropertyTypes: true,
        noUncheckedIndexedAccess: true,
        skipLibCheck: false,
      },
      files,
    }),
  );
  try {
    const r = await run(BIN('tsc'), ['--noEmit', '-p', join(dir, 'tsconfig.json')], { cwd: dir, timeout: 60_000 });
    return { ok: true, output: r.stdout + r.stderr };
  } catch (e) {
    const err = e as { stdout?: string; stderr?: string; message: string };
    return { ok: false, output: `${err.stdout ?? ''}${err.stderr ?? ''}` || err.message };
  }
}

test('openapi-typescript generates types from the served document and the fixture client type-checks', { timeout: 120_000 }, async () => {
  const schema = join(dir, 'schema.d.ts');
  await run(BIN('openapi-typescript'), [`${cell.url}/api/public/v1/openapi.json`, '-o', schema], { cwd: dir, timeout: 60_000 });
  const generated = readFileSync(schema, 'utf8');
  assert.match(generated, /"\/api\/public\/v1\/admin\/api-keys"/);
  copyFileSync(join(ROOT, 'test/fixtures/typed-client.ts'), join(dir, 'typed-client.ts'));
  const good = await tsc(['typed-client.ts']);
  assert.ok(good.ok, `the fixture client does not type-check:\n${good.output}`);

  // The types are real, not `any`: wrong uses fail to compile.
  writeFileSync(
    join(dir, 'wrong.ts'),
    [
      "import type { KeyList, MintKey } from './typed-client.js';",
      "import type { paths } from './schema.js';",
      "export const a: KeyList = { keys: [], limit: 1, offset: 'zero' };",
      'export const b: MintKey = { name: 1, scopes: [], rate_limit_rpm: null, allowed_ips: [], allowed_regions: [], expires_at: null };',
      "export const c: keyof paths = '/api/public/v1/admin/graphs';",
      '',
    ].join('\n'),
  );
  const bad = await tsc(['typed-client.ts', 'wrong.ts']);
  assert.ok(!bad.ok, 'a wrong use must not type-check');
  for (const line of [3, 4, 5]) assert.match(bad.output, new RegExp(`wrong\\.ts\\(${line},`), `line ${line} is an error:\n${bad.output}`);
  assert.doesNotMatch(bad.output, /typed-client\.ts\(/, 'the fixture itself stays clean');
});

test('the fixture client talks to the running cell', async () => {
  const list = await listKeys(cell.url, cell.adminKey, { limit: 10 });
  assert.equal(list.limit, 10);
  assert.ok(
    keyIds(list).some((s) => /^key_[0-9a-f]{20}:active$/.test(s)),
    keyIds(list).join(', '),
  );
  await assert.rejects(listKeys(cell.url, 'svck_live_' + 'B'.repeat(43)), /unauthorized/);
});
