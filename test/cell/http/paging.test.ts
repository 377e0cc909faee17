// Paging of every list (cell/http/openapi.ts: pageQuery, listSchema, pageOf, slicePage): `limit`
// and `offset` with a default and a ceiling per endpoint, documented; `total` in every answer;
// 400 for a value that is not a decimal integer in range. The lists are found in the served
// document (a GET whose path ends in a literal segment and whose answer holds an array), so a new
// list is swept as soon as it is served. Over HTTP (app.request), on both engines.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { checkResponse, operations, schemaChecker, type Json, type Operation } from '../discovery/_openapi.ts';
import { seededCell, type Seeded } from '../../helpers/seed.ts';

const A = '/api/public/v1/admin';

/** GETs that answer an array but are not lists, and why. */
const NOT_LISTS: Record<string, string> = {
  '/.well-known/cell-keys.json': 'a key set document, always served whole (a handful of keys)',
  [`${A}/whoami`]: "one caller's roles, scopes and permissions, not a list",
  '/.well-known/agent-cell/run-log/consistency':
    'an RFC 9162 consistency proof: its hashes are a path of at most log2(size) nodes, read whole',
  [`${A}/catalog/sources/{source_id}/review`]:
    "one source's pinned and live definitions side by side, read whole (a source holds at most 500 tools)",
};

/** Lists paged by sequence number instead of offset, tested on their own below. */
const SEQ_PAGED = new Set([`${A}/jobs/runs/{run_id}/journal`]);

let s: Seeded;
let doc: Json;
let lists: { o: Operation; key: string; max: number; dflt: number }[];

function deref(schema: Json | undefined): Json | undefined {
  if (schema?.['$ref']) return deref(doc['components']['schemas'][String(schema['$ref']).split('/').pop()!]);
  return schema;
}

before(async () => {
  s = await seededCell();
  doc = (await s.t.request('GET', '/api/public/v1/openapi.json')).body;
  lists = [];
  for (const o of operations(doc)) {
    if (o.method !== 'get' || /\}$/.test(o.path) || NOT_LISTS[o.path] || SEQ_PAGED.has(o.path)) continue;
    const body = deref(o.op['responses']?.['200']?.['content']?.['application/json']?.['schema']);
    const arrays = Object.entries((body?.['properties'] ?? {}) as Record<string, Json>).filter(([, v]) => deref(v)?.['type'] === 'array');
    if (arrays.length === 0) continue;
    assert.equal(arrays.length, 1, `${o.path}: one array per list answer`);
    const params = (o.op['parameters'] ?? []) as Json[];
    const limit = params.find((p) => p['name'] === 'limit' && p['in'] === 'query');
    const offset = params.find((p) => p['name'] === 'offset' && p['in'] === 'query');
    assert.ok(limit && offset, `${o.path}: a list takes limit and offset`);
    assert.equal(limit['schema']['type'], 'integer', `${o.path}: limit`);
    assert.equal(limit['schema']['minimum'], 1, `${o.path}: limit minimum`);
    assert.equal(typeof limit['schema']['maximum'], 'number', `${o.path}: limit has a documented ceiling`);
    assert.equal(typeof limit['schema']['default'], 'number', `${o.path}: limit has a documented default`);
    assert.match(String(limit['description']), new RegExp(`1 to ${limit['schema']['maximum']}, default ${limit['schema']['default']}`));
    assert.deepEqual([offset['schema']['type'], offset['schema']['minimum'], offset['schema']['default']], ['integer', 0, 0], o.path);
    for (const f of ['limit', 'offset', 'total']) {
      assert.equal(deref(body?.['properties']?.[f])?.['type'], 'integer', `${o.path}: the answer documents ${f}`);
      assert.ok(((body?.['required'] ?? []) as string[]).includes(f), `${o.path}: ${f} is required`);
    }
    lists.push({ o, key: arrays[0]![0], max: limit['schema']['maximum'], dflt: limit['schema']['default'] });
  }
});
after(async () => {
  await s.close();
});

function fill(path: string): string {
  return path.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const v = s.ids[name];
    assert.ok(v, `no seeded value for path parameter ${name}`);
    return v;
  });
}

async function get(path: string) {
  const r = await s.t.request('GET', path, { token: s.t.adminKey });
  return { ...r, contentType: r.headers.get('content-type') };
}

test('the sweep finds every list the cell serves', () => {
  const found = lists.map((l) => l.o.path).sort();
  // The lists of this release; a new one joins the sweep by itself (this only guards against finding none).
  for (const p of [
    `${A}/principals`,
    `${A}/roles`,
    `${A}/audit`,
    `${A}/api-keys`,
    `${A}/oauth/clients`,
    `${A}/secrets`,
    `${A}/ai/model-providers`,
    `${A}/ai/agent-runtimes`,
    `${A}/ai/tool-registry`,
    `${A}/agent-teams/skills`,
    `${A}/agent-teams/blueprints`,
    `${A}/agent-teams/agents`,
    `${A}/agent-teams/contracts`,
    `${A}/agent-teams/formations`,
    `${A}/agent-teams/formations/{formation_id}/billets`,
    `${A}/agent-teams/formations/{formation_id}/versions`,
    `${A}/agent-teams/crews`,
    `${A}/agent-teams/crews/{crew_id}/runs`,
    `${A}/agent-teams/runs`,
    `${A}/jobs/runs`,
    `${A}/jobs/definitions`,
    `${A}/jobs/endpoints`,
    `${A}/edge/devices`,
    `${A}/cells`,
  ]) {
    assert.ok(found.includes(p), `${p} is swept (found: ${found.join(', ')})`);
  }
});

test('every list: default page, limit and offset move the window, total counts the whole list, answers as documented', async () => {
  const checker = schemaChecker(doc);
  for (const { o, key, max, dflt } of lists) {
    const base = fill(o.path);
    const whole = await get(`${base}?limit=${max}`);
    assert.equal(whole.status, 200, `${base}: ${whole.text}`);
    checkResponse(checker, o, whole, 'limit=max');
    const total = whole.body.total as number;
    const all = whole.body[key] as unknown[];
    assert.ok(total >= 2, `${base}: seeded with at least two items, total ${total}`);
    assert.equal(all.length, Math.min(total, max), `${base}: a page of limit=max holds everything up to the ceiling`);
    assert.deepEqual([whole.body.limit, whole.body.offset], [max, 0], base);

    const first = await get(base);
    assert.deepEqual([first.body.limit, first.body.offset, first.body.total], [dflt, 0, total], `${base}: defaults`);
    assert.equal((first.body[key] as unknown[]).length, Math.min(total, dflt), base);

    const second = await get(`${base}?limit=1&offset=1`);
    assert.equal(second.status, 200, second.text);
    checkResponse(checker, o, second, 'limit=1&offset=1');
    assert.deepEqual([second.body.limit, second.body.offset, second.body.total], [1, 1, total], base);
    assert.deepEqual(second.body[key], [all[1]], `${base}: offset 1 starts at the second item`);

    const rest = await get(`${base}?offset=1`);
    assert.deepEqual(rest.body[key], all.slice(1, 1 + dflt), `${base}: offset alone`);

    const past = await get(`${base}?offset=${total}`);
    assert.equal(past.status, 200);
    assert.deepEqual([past.body[key], past.body.total], [[], total], `${base}: past the end: an empty page, the same total`);

    for (const q of [`limit=${max + 1}`, 'limit=0', 'limit=-1', 'limit=two', 'limit=1.5', 'offset=-1', 'offset=1e3', 'offset=']) {
      const bad = await get(`${base}?${q}`);
      assert.equal(bad.status, 400, `${base}?${q}: ${bad.text}`);
      checkResponse(checker, o, bad, q);
      assert.equal(bad.body.error, 'invalid_request');
      assert.deepEqual(
        bad.body.details.issues.map((i: { path: string }) => i.path),
        [q.split('=')[0]],
        `${base}?${q}`,
      );
    }
  }
});

test('pageQuery: limit and offset are decimal integers in range, anything else is 400 naming the parameter', async () => {
  const bad: [string, string][] = [
    ['limit=0x10', 'limit'],
    ['limit=1e2', 'limit'],
    ['limit=', 'limit'],
    ['limit=%205', 'limit'],
    ['limit=5&limit=6', 'limit'],
    ['offset=1000000001', 'offset'],
  ];
  for (const [q, param] of bad) {
    const r = await get(`${A}/principals?${q}`);
    assert.equal(r.status, 400, q);
    assert.equal(r.body.error, 'invalid_request', q);
    assert.deepEqual(
      r.body.details.issues.map((i: { path: string }) => i.path),
      [param],
      q,
    );
  }
  const ok = await get(`${A}/principals?limit=007&offset=000`);
  assert.deepEqual([ok.status, ok.body.limit, ok.body.offset], [200, 7, 0]);
});

test('a list read in part counts only what the caller may see', async () => {
  // API keys without iam.principals.read: the caller's own keys, and a total of those alone.
  const owner = (await get(`${A}/principals?kind=user`)).body.principals[0].id as string;
  const svc = (await get(`${A}/principals?kind=service`)).body.principals[0].id as string;
  assert.equal((await s.t.request('POST', `${A}/api-keys`, { token: s.t.adminKey, body: { name: 'other', owner_id: svc } })).status, 201);
  const self = await s.t.request('POST', `${A}/api-keys`, { token: s.t.adminKey, body: { name: 'self', scopes: ['iam.keys.read'] } });
  assert.equal(self.status, 201, self.text);
  const everyone = await get(`${A}/api-keys`);
  const owners = await get(`${A}/api-keys?owner_id=${owner}`);
  const mine = await s.t.request('GET', `${A}/api-keys?limit=1`, { token: self.body.secret });
  assert.equal(mine.status, 200, mine.text);
  assert.ok(everyone.body.total > owners.body.total, 'the admin sees the service account key too');
  assert.equal(mine.body.total, owners.body.total, "without iam.principals.read: the total of the caller's own keys");
  assert.equal(mine.body.keys.length, 1);
});

test('the journal pages by sequence: after_seq and limit, with the total so far', async () => {
  const runId = s.ids['run_id']!;
  const all = await get(`${A}/jobs/runs/${runId}/journal`);
  assert.equal(all.status, 200);
  const n = all.body.records.length as number;
  assert.ok(n >= 3);
  assert.equal(all.body.total, n, 'total: the records the journal holds');
  const page = await get(`${A}/jobs/runs/${runId}/journal?after_seq=1&limit=1`);
  assert.deepEqual(
    page.body.records.map((r: { seq: number }) => r.seq),
    [2],
  );
  assert.equal(page.body.total, n);
  for (const q of ['limit=0', 'limit=10001', 'after_seq=-1', 'after_seq=x', 'limit=1e2']) {
    const bad = await get(`${A}/jobs/runs/${runId}/journal?${q}`);
    assert.equal(bad.status, 400, `${q}: ${bad.text}`);
  }
});
