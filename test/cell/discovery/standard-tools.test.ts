// Standard tools accept the served document (issue 25): `redocly lint` with
// its recommended rules reports no problem at all (every operation has an
// operationId and its security, info has a licence), and openapi-typescript
// generates types from it. Both run from node_modules/.bin on the document a
// real cell process serves.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { startCellProcess, type CellProcess } from '../../helpers/cell-process.ts';
import { operationIdFor } from '../../../cell/discovery/internal/complete.ts';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '../../..');
const BIN = (name: string) => join(ROOT, 'node_modules', '.bin', name);

let cell: CellProcess;
let dir: string;
let file: string;
let doc: { paths: Record<string, Record<string, { operationId?: string; security?: unknown[] }>>; info: Record<string, unknown> };

before(async () => {
  cell = await startCellProcess();
  dir = mkdtempSync(join(tmpdir(), 'standard-tools-'));
  const text = await (await fetch(`${cell.url}/api/public/v1/openapi.json`)).text();
  file = join(dir, 'openapi.json');
  writeFileSync(file, text);
  doc = JSON.parse(text) as typeof doc;
});
after(async () => {
  await cell?.stop();
  cell?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('operationId is derived from method and path', () => {
  assert.equal(operationIdFor('get', '/api/public/v1/admin/principals/{id}'), 'getAdminPrincipalsById');
  assert.equal(operationIdFor('post', '/oauth/device_authorization'), 'postOauthDeviceAuthorization');
  assert.equal(operationIdFor('get', '/.well-known/oauth-authorization-server'), 'getWellKnownOauthAuthorizationServer');
});

test('every operation has a unique operationId and a security list; public ones need nothing', () => {
  const ids = new Set<string>();
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      if (typeof op !== 'object' || op === null || !('responses' in op)) continue;
      assert.equal(typeof op.operationId, 'string', `${method} ${path}`);
      assert.ok(!ids.has(op.operationId!), `unique: ${op.operationId}`);
      ids.add(op.operationId!);
      assert.ok(Array.isArray(op.security), `${method} ${path} has security`);
    }
  }
  assert.deepEqual(doc.paths['/oauth/token']?.['post']?.security, []);
  assert.deepEqual(doc.paths['/api/public/v1/openapi.json']?.['get']?.security, []);
  assert.ok((doc.paths['/api/public/v1/admin/principals']?.['get']?.security ?? []).length > 0);
  assert.deepEqual(doc.info['license'], { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' });
});

test('redocly lint (recommended rules) finds no problem', { timeout: 180_000 }, async () => {
  let out: string;
  try {
    out = (
      await run(BIN('redocly'), ['lint', '--extends=recommended', '--format=json', file], {
        cwd: dir,
        timeout: 170_000,
        maxBuffer: 64 << 20,
      })
    ).stdout;
  } catch (e) {
    out = (e as { stdout?: string }).stdout ?? '';
  }
  const report = JSON.parse(out.slice(out.indexOf('{'))) as {
    totals: { errors: number; warnings: number };
    problems: { ruleId: string; message: string; location: { pointer: string }[] }[];
  };
  const problems = report.problems.map((p) => `${p.ruleId} ${p.location[0]?.pointer}: ${p.message}`);
  assert.deepEqual(problems, []);
  assert.deepEqual(report.totals, { ...report.totals, errors: 0, warnings: 0 });
});

test('openapi-typescript generates types from it', { timeout: 120_000 }, async () => {
  const out = join(dir, 'schema.d.ts');
  await run(BIN('openapi-typescript'), [file, '-o', out], { cwd: dir, timeout: 110_000 });
  const types = readFileSync(out, 'utf8');
  assert.match(types, /getAdminPrincipals: \{/);
  assert.match(types, /"\/api\/public\/v1\/admin\/principals": \{/);
});
