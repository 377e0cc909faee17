// Stored provider secrets over HTTP (in process, both engines): metadata only
// (never a value), rotation seen by a real HTTP server speaking the provider's
// protocol, deletion refused while a provider sends the secret, and who may
// do what (secrets.read; creator or secrets.use to rotate or delete).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { actor } from '../../helpers/actors.ts';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { startOpenAIServer, type FakeOpenAI } from '../../fixtures/openai-server.ts';

const A = '/api/public/v1/admin';
const S = `${A}/secrets`;
let t: InProcess;
let ai: FakeOpenAI;

before(async () => {
  t = await inProcessCell({ config: { posture: 'sovereign' } });
  ai = await startOpenAIServer({ respond: () => ({ content: 'pong' }) });
});
after(async () => {
  await t?.close();
  await ai?.close();
});

async function secret(name: string, value: string, token = t.adminKey): Promise<string> {
  const r = await t.request('POST', S, { token, body: { name, value } });
  assert.equal(r.status, 201, r.text);
  return r.body.secret_id as string;
}

async function provider(secretId: string, token = t.adminKey): Promise<string> {
  const r = await t.request('POST', `${A}/ai/model-providers`, {
    token,
    body: {
      provider_type: 'openai-compatible',
      default_model: 'fake-1',
      base_url: `${ai.url}/v1`,
      api_key_secret_id: secretId,
      max_retries: 0,
    },
  });
  assert.equal(r.status, 201, r.text);
  return r.body.provider_id as string;
}

async function callAndSeeKey(providerId: string): Promise<string | undefined> {
  await t.modules.ai.ai.call(providerId, { messages: [{ role: 'user', content: 'ping' }] });
  return ai.requests.at(-1)!.authorization;
}

test('list and get: metadata only, paged, with the providers that send each secret; never a value', async () => {
  const a = await secret('alpha', 'sk-alpha-value');
  const b = await secret('beta', 'sk-beta-value');
  const p = await provider(b);
  const list = await t.request('GET', `${S}?limit=100`, { token: t.adminKey });
  assert.equal(list.status, 200, list.text);
  assert.ok(list.body.total >= 2);
  const byId = new Map(list.body.secrets.map((s: { secret_id: string }) => [s.secret_id, s]));
  const owner = (await t.row("SELECT id FROM principals WHERE name = 'owner'"))!['id'];
  assert.deepEqual(byId.get(a), {
    secret_id: a,
    name: 'alpha',
    created_at: new Date(t.clock.now()).toISOString(),
    created_by: owner,
    rotated_at: null,
    last_used_at: null,
    provider_ids: [],
  });
  assert.deepEqual((byId.get(b) as { provider_ids: string[] }).provider_ids, [p]);
  for (const v of ['sk-alpha-value', 'sk-beta-value', 'sealed']) assert.ok(!list.text.includes(v), v);

  const page = await t.request('GET', `${S}?limit=1&offset=1`, { token: t.adminKey });
  assert.equal(page.body.secrets.length, 1);
  assert.equal(page.body.total, list.body.total);
  assert.equal((await t.request('GET', `${S}?limit=0`, { token: t.adminKey })).status, 400);
  assert.equal((await t.request('GET', `${S}?limit=1001`, { token: t.adminKey })).status, 400);

  const one = await t.request('GET', `${S}/${b}`, { token: t.adminKey });
  assert.equal(one.status, 200);
  assert.deepEqual(one.body, byId.get(b));
  assert.equal((await t.request('GET', `${S}/sec_00000000000000000000`, { token: t.adminKey })).status, 404);
  assert.equal((await t.request('GET', `${S}/nope`, { token: t.adminKey })).status, 400);

  // secrets.read: the viewer has it; a writer without it does not.
  const viewer = await actor(t, { roles: ['viewer'] });
  assert.equal((await t.request('GET', S, { token: viewer.key })).status, 200);
  const writer = await actor(t, { permissions: ['secrets.write'] });
  const denied = await t.request('GET', S, { token: writer.key });
  assert.equal(denied.status, 403);
  assert.equal(denied.body.details.required_permission, 'secrets.read');
  assert.equal((await t.request('GET', `${S}/${a}`, { token: writer.key })).status, 403);
  assert.equal((await t.request('GET', S)).status, 401);
});

test('last_used_at: set by a provider call, to the minute', async () => {
  const s = await secret('used', 'sk-used');
  const p = await provider(s);
  assert.equal(await callAndSeeKey(p), 'Bearer sk-used');
  const first = new Date(t.clock.now()).toISOString();
  assert.equal((await t.request('GET', `${S}/${s}`, { token: t.adminKey })).body.last_used_at, first);
  t.clock.advance(30_000);
  await callAndSeeKey(p);
  assert.equal(
    (await t.request('GET', `${S}/${s}`, { token: t.adminKey })).body.last_used_at,
    first,
    'within the minute: not written again',
  );
  t.clock.advance(31_000);
  await callAndSeeKey(p);
  assert.equal((await t.request('GET', `${S}/${s}`, { token: t.adminKey })).body.last_used_at, new Date(t.clock.now()).toISOString());
});

test('rotate: the provider sends the new value from its next call; audited; the value is never echoed', async () => {
  const s = await secret('rot', 'sk-old-value');
  const p = await provider(s);
  assert.equal(await callAndSeeKey(p), 'Bearer sk-old-value');
  t.clock.advance(1000);
  const r = await t.request('POST', `${S}/${s}/rotate`, { token: t.adminKey, body: { value: 'sk-new-value' } });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.rotated_at, new Date(t.clock.now()).toISOString());
  assert.deepEqual(r.body.provider_ids, [p]);
  assert.ok(!r.text.includes('sk-new-value') && !r.text.includes('sk-old-value'));
  assert.equal(await callAndSeeKey(p), 'Bearer sk-new-value');
  const audit = await t.request('GET', `${A}/audit?target=${s}`, { token: t.adminKey });
  assert.ok(audit.body.entries.some((e: { action: string; outcome: string }) => e.action === 'secret.rotate' && e.outcome === 'ok'));
  assert.ok(!audit.text.includes('sk-new-value'));

  for (const body of [{}, { value: '' }, { value: 'x'.repeat(8193) }, { value: 'x', name: 'y' }]) {
    const bad = await t.request('POST', `${S}/${s}/rotate`, { token: t.adminKey, body });
    assert.equal(bad.status, 400, JSON.stringify(body).slice(0, 40));
  }
  assert.equal((await t.request('POST', `${S}/sec_00000000000000000000/rotate`, { token: t.adminKey, body: { value: 'v' } })).status, 404);
  assert.equal(await callAndSeeKey(p), 'Bearer sk-new-value', 'refusals wrote nothing');
});

test('who may rotate and delete: the creator, or a holder of secrets.use who manages the creator (the right to act on a credential); secrets.write first', async () => {
  const ownerSecret = await secret('owners', 'sk-owners');
  const p = await provider(ownerSecret);
  const mallory = await actor(t, { name: 'mallory', permissions: ['secrets.write', 'secrets.read'] });
  const rot = await t.request('POST', `${S}/${ownerSecret}/rotate`, { token: mallory.key, body: { value: 'sk-mallory' } });
  assert.equal(rot.status, 403, rot.text);
  assert.equal(rot.body.details.reason, 'wider_than_caller');
  assert.equal(rot.body.details.owner_id, (await t.request('GET', `${A}/whoami`, { token: t.adminKey })).body.principal.id);
  const del = await t.request('DELETE', `${S}/${await secret('owners-unused', 'sk-u')}`, { token: mallory.key });
  assert.equal(del.status, 403);
  assert.equal(del.body.details.reason, 'wider_than_caller');
  assert.equal(await callAndSeeKey(p), 'Bearer sk-owners', 'the value is unchanged');
  const refused = await t.request('GET', `${A}/audit?actor=${mallory.id}`, { token: t.adminKey });
  assert.deepEqual(
    refused.body.entries
      .filter((e: { outcome: string }) => e.outcome === 'refused')
      .map((e: { action: string }) => e.action)
      .sort(),
    ['secret.delete', 'secret.rotate'],
  );

  // Its own secret the creator rotates and deletes without secrets.use.
  const own = await secret('malloys', 'sk-m1', mallory.key);
  assert.equal((await t.request('POST', `${S}/${own}/rotate`, { token: mallory.key, body: { value: 'sk-m2' } })).status, 200);
  assert.equal((await t.request('DELETE', `${S}/${own}`, { token: mallory.key })).status, 200);

  // secrets.use (with secrets.write) acts on the secrets of principals it manages, not on a wider creator's.
  const ops = await actor(t, { name: 'ops2', permissions: ['secrets'] });
  const wider = await t.request('POST', `${S}/${ownerSecret}/rotate`, { token: ops.key, body: { value: 'sk-ops' } });
  assert.equal(wider.status, 403, wider.text);
  assert.equal(await callAndSeeKey(p), 'Bearer sk-owners');
  const small = await actor(t, { name: 'small-writer', permissions: ['secrets.write'] });
  const smalls = await secret('smalls', 'sk-s1', small.key);
  assert.equal((await t.request('POST', `${S}/${smalls}/rotate`, { token: ops.key, body: { value: 'sk-ops' } })).status, 200);
  // secrets.use without secrets.write: the permission gate.
  const user = await actor(t, { name: 'user2', permissions: ['secrets.use', 'secrets.read'] });
  const gate = await t.request('POST', `${S}/${ownerSecret}/rotate`, { token: user.key, body: { value: 'x' } });
  assert.equal(gate.status, 403);
  assert.equal(gate.body.details.required_permission, 'secrets.write');
  assert.equal((await t.request('DELETE', `${S}/${ownerSecret}`, { token: user.key })).status, 403);
  assert.equal((await t.request('DELETE', `${S}/${ownerSecret}`)).status, 401);
});

test('delete: refused while a provider sends the secret (naming it); then gone, and no provider can bind it', async () => {
  const used = await secret('in-use', 'sk-in-use');
  const p = await provider(used);
  const r = await t.request('DELETE', `${S}/${used}`, { token: t.adminKey });
  assert.equal(r.status, 409, r.text);
  assert.equal(r.body.details.reason, 'secret_in_use');
  assert.deepEqual(r.body.details.providers, [p]);
  assert.equal(await callAndSeeKey(p), 'Bearer sk-in-use', 'still there');

  const free = await secret('free', 'sk-free');
  const d = await t.request('DELETE', `${S}/${free}`, { token: t.adminKey });
  assert.equal(d.status, 200, d.text);
  assert.equal(d.body.secret_id, free);
  assert.equal(d.body.name, 'free');
  assert.ok(!d.text.includes('sk-free'));
  assert.equal((await t.request('GET', `${S}/${free}`, { token: t.adminKey })).status, 404);
  assert.equal((await t.request('DELETE', `${S}/${free}`, { token: t.adminKey })).status, 404);
  assert.equal(await t.row('SELECT secret_id FROM ai_secrets WHERE secret_id = ?', [free]), undefined);
  const bind = await t.request('POST', `${A}/ai/model-providers`, {
    token: t.adminKey,
    body: { provider_type: 'openai-compatible', default_model: 'm', base_url: `${ai.url}/v1`, api_key_secret_id: free },
  });
  assert.equal(bind.status, 400);
  assert.equal(bind.body.details.reason, 'unknown_secret');
  const audit = await t.request('GET', `${A}/audit?target=${free}`, { token: t.adminKey });
  assert.ok(audit.body.entries.some((e: { action: string }) => e.action === 'secret.delete'));
});
