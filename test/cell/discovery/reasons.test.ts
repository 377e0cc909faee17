// The served document lists the closed set of refusal reasons (core/reasons.ts, issue 27):
// `x-reasons` on the Error schema, and a table in the description of its `details` that
// the docs page (Swagger UI) renders. In process, against the real app's document.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ERROR_STATUS } from '../../../core/errors.ts';
import { REASONS } from '../../../core/reasons.ts';
import { readFileSync } from 'node:fs';
import { withReasonsTable } from '../../../cell/discovery/reasons.ts';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import type { Json } from './_openapi.ts';

let t: InProcess;
let error: Json;

before(async () => {
  t = await inProcessCell();
  const r = await t.request('GET', '/api/public/v1/openapi.json');
  assert.equal(r.status, 200);
  error = r.body['components']['schemas']['Error'];
});
after(async () => {
  await t?.close();
});

test('the Error schema carries every reason with its statuses, codes, run codes and sentence', () => {
  const listed = error['x-reasons'] as Record<string, { status: number[]; code: string[]; run?: string[]; sentence: string }>;
  assert.deepEqual(Object.keys(listed), Object.keys(REASONS));
  for (const [name, e] of Object.entries(REASONS)) {
    const got = listed[name]!;
    assert.deepEqual(got.code, [...e.codes], name);
    assert.deepEqual(
      got.status,
      e.codes.map((c) => ERROR_STATUS[c]),
      name,
    );
    assert.deepEqual(got.run, 'runs' in e ? [...e.runs] : undefined, name);
    assert.equal(got.sentence, e.sentence, name);
  }
  assert.deepEqual(listed['bad_signature']?.status, [401, 403]);
  assert.deepEqual(listed['graph_changed']?.run, ['refused']);
});

test('the description of details is a table with one row per reason (what the docs page shows)', () => {
  const text = error['properties']['details']['description'] as string;
  assert.match(text, /`details\.reason`/);
  const rows = text.split('\n').filter((l: string) => /^\| `[a-z0-9_]+` \|/.test(l));
  assert.equal(rows.length, Object.keys(REASONS).length);
  assert.ok(rows.includes('| `no_budget_ledger` | 409 `conflict` | `refused` | No budget ledger is registered for an agent of the run. |'));
  // Only described: the schema of details accepts what it accepted before.
  assert.equal(error['properties']['details']['properties'], undefined);
});

test('docs/errors.md lists the registry as it is (node --import tsx scripts/errors-doc.ts rewrites it)', () => {
  const doc = readFileSync('docs/errors.md', 'utf8');
  assert.equal(doc, withReasonsTable(doc));
});
