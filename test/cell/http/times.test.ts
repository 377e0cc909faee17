// Every timestamp in one format: ISO 8601 UTC (`2026-01-01T00:00:00.000Z`). Two sweeps:
// the served document (every response property named `*_at`, `due` or `at` is a string of
// format date-time), and the answers of a seeded cell (every GET the document lists, with each
// list's items read one by one, walked recursively: no such field holds anything else).
// The one exception is the signed journal record, whose `at` is part of the signed bytes
// (docs/formats.md): integer milliseconds, as the edge verifies them.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { operations, type Json } from '../discovery/_openapi.ts';
import { seededCell, type Seeded } from '../../helpers/seed.ts';

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const TIME_FIELD = /(_at|^due|^at)$/;
/** Schemas that are signed records carried as they were signed. */
const SIGNED = new Set(['JournalRecord']);

let s: Seeded;
let doc: Json;
before(async () => {
  s = await seededCell();
  doc = (await s.t.request('GET', '/api/public/v1/openapi.json')).body;
});
after(async () => {
  await s.close();
});

test('the document: every time field of every answer is an ISO 8601 date-time', () => {
  const bad: string[] = [];
  let seen = 0;
  const walk = (schema: Json | undefined, where: string, visiting: Set<string>): void => {
    if (!schema || typeof schema !== 'object') return;
    const ref = schema['$ref'] as string | undefined;
    if (ref) {
      const name = ref.split('/').pop()!;
      if (SIGNED.has(name) || visiting.has(name)) return;
      walk(doc['components']['schemas'][name], name, new Set([...visiting, name]));
      return;
    }
    for (const [k, v] of Object.entries((schema['properties'] ?? {}) as Record<string, Json>)) {
      if (TIME_FIELD.test(k) && !v['$ref']) {
        seen++;
        const types = ([] as unknown[]).concat(v['type'] ?? v['anyOf']?.map((x: Json) => x['type']) ?? []);
        const format = v['format'] ?? v['anyOf']?.find((x: Json) => x['format'])?.['format'];
        if (!types.includes('string') || format !== 'date-time') bad.push(`${where}.${k}: ${JSON.stringify(v)}`);
      }
      walk(v, `${where}.${k}`, visiting);
    }
    for (const key of ['items', 'additionalProperties']) if (typeof schema[key] === 'object') walk(schema[key], `${where}[]`, visiting);
    for (const key of ['anyOf', 'oneOf', 'allOf']) for (const x of (schema[key] ?? []) as Json[]) walk(x, where, visiting);
  };
  for (const o of operations(doc)) {
    for (const [status, r] of Object.entries((o.op['responses'] ?? {}) as Record<string, Json>)) {
      walk(r['content']?.['application/json']?.['schema'], `${o.method.toUpperCase()} ${o.path} ${status}`, new Set());
    }
  }
  assert.ok(seen > 40, `the sweep saw the time fields (${seen})`);
  assert.deepEqual(bad, [], 'time fields that are not documented as ISO 8601 date-times');
});

/** Every time field of `body` (outside signed records), with where it was found. */
function timeFields(body: unknown, where: string, out: [string, unknown][] = []): [string, unknown][] {
  if (Array.isArray(body)) {
    for (const [i, x] of body.entries()) timeFields(x, `${where}[${i}]`, out);
  } else if (body && typeof body === 'object') {
    if ('sig' in body && 'prev_hash' in body) return out; // a signed journal record
    for (const [k, v] of Object.entries(body)) {
      if (TIME_FIELD.test(k)) out.push([`${where}.${k}`, v]);
      timeFields(v, `${where}.${k}`, out);
    }
  }
  return out;
}

test('the answers: every time field a seeded cell returns is ISO 8601 UTC or null', async () => {
  const ids: Record<string, string> = { ...s.ids };
  // A seeded id may name nothing on another path (a job run has no imported edge journal): 404 skips it.
  const get = async (path: string) => {
    const r = await s.t.request('GET', path, { token: s.t.adminKey });
    if (r.status === 404 && r.body?.error === 'not_found') return null;
    assert.equal(r.status, 200, `${path}: ${r.text.slice(0, 300)}`);
    return r.body as Json;
  };
  const gets = operations(doc).filter((o) => o.op && o.method === 'get' && !/sse|openapi|docs|\.well-known/.test(o.path));
  const read = new Set<string>();
  const fields: [string, unknown][] = [];
  // Lists first (no parameter after the last literal segment), so their items give the ids of the item reads.
  gets.sort((a, b) => a.path.split('{').length - b.path.split('{').length);
  for (const o of gets) {
    const names = [...o.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
    if (names.some((n) => !ids[n])) continue;
    const path = o.path.replace(/\{([^}]+)\}/g, (_, n: string) => ids[n]!);
    const body = await get(path);
    if (body === null) continue;
    read.add(o.path);
    timeFields(body, path, fields);
    // An item of the list names the id its item read takes.
    for (const v of Object.values(body)) {
      if (!Array.isArray(v) || typeof v[0] !== 'object' || v[0] === null) continue;
      for (const [k, x] of Object.entries(v[0] as Json)) if (/_id$/.test(k) && typeof x === 'string' && !ids[k]) ids[k] = x;
    }
  }
  for (const p of [
    '/api/public/v1/admin/jobs/definitions/{schedule_id}',
    '/api/public/v1/admin/jobs/endpoints/{endpoint_id}',
    '/api/public/v1/admin/jobs/runs/{run_id}',
    '/api/public/v1/admin/agent-teams/crews/{crew_id}/runs',
    '/api/public/v1/admin/secrets',
    '/api/public/v1/admin/edge/devices',
  ]) {
    assert.ok(read.has(p), `${p} was read (read: ${[...read].sort().join(', ')})`);
  }
  assert.ok(fields.length > 100, `the answers held time fields (${fields.length})`);
  const bad = fields.filter(([, v]) => v !== null && !(typeof v === 'string' && ISO_UTC.test(v)));
  assert.deepEqual(bad, [], 'time fields that are not ISO 8601 UTC');
});
