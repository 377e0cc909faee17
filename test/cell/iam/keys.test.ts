// The spec's API key lifecycle, row by row, against the real app and store
// (in-process, with a manual clock for grace and retention windows).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { hashSecret } from '../../../core/apikey/hash.ts';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';

const KEYS = '/api/public/v1/admin/api-keys';
const PRINCIPALS = '/api/public/v1/admin/principals';
const ME_PROBE = '/api/public/v1/admin/api-keys?limit=1';

async function mint(t: InProcess, body: Record<string, unknown>, token = t.adminKey) {
  return t.request('POST', KEYS, { token, body: { name: 'k', ...body } });
}

async function newService(t: InProcess, name: string, roles: string[] = ['jobs']) {
  const r = await t.request('POST', PRINCIPALS, { token: t.adminKey, body: { kind: 'service', name, roles } });
  assert.equal(r.status, 201, r.text);
  return r.body.id as string;
}

test('bootstrap: owner key written 0600 and works; secret never stored, only its SHA-256', async () => {
  const t = await inProcessCell();
  try {
    const file = join(t.dir, 'bootstrap-admin.key');
    assert.equal(readFileSync(file, 'utf8').trim(), t.adminKey);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.match(t.adminKey, /^svck_live_[A-Za-z0-9_-]{43}$/);
    const r = await t.request('GET', ME_PROBE, { token: t.adminKey });
    assert.equal(r.status, 200);
    const rows = await t.rows('SELECT * FROM api_keys');
    const dump = JSON.stringify(rows);
    assert.ok(!dump.includes(t.adminKey), 'secret must not be stored');
    assert.ok(dump.includes(hashSecret(t.adminKey)));
  } finally {
    await t.close();
  }
});

test('mint: secret shown once; list and get never show it; requester is the session', async () => {
  const t = await inProcessCell();
  try {
    const m = await mint(t, { scopes: ['system.orchestration.admin.read'], created_by: 'forged' });
    assert.equal(m.status, 400, 'unknown fields are refused');
    const ok = await mint(t, { scopes: ['system.orchestration.admin.read'] });
    assert.equal(ok.status, 201, ok.text);
    assert.match(ok.body.secret, /^svck_live_/);
    const got = await t.request('GET', `${KEYS}/${ok.body.key_id}`, { token: t.adminKey });
    assert.equal(got.status, 200);
    assert.equal(got.body.secret, undefined);
    const list = await t.request('GET', KEYS, { token: t.adminKey });
    assert.ok(!list.text.includes(ok.body.secret));
    const owner = (await t.row("SELECT id FROM principals WHERE name = 'owner'"))!;
    assert.equal(ok.body.created_by, owner.id);
  } finally {
    await t.close();
  }
});

test('an admin mints for another entity: key owned by the target, acting admin on the audit trail', async () => {
  const t = await inProcessCell();
  try {
    const svc = await newService(t, 'batch');
    const m = await mint(t, { owner_id: svc });
    assert.equal(m.status, 201, m.text);
    assert.equal(m.body.owner_id, svc);
    const audit = await t.request('GET', `/api/public/v1/admin/audit?target=${m.body.key_id}`, { token: t.adminKey });
    const entry = audit.body.entries.find((e: { action: string }) => e.action === 'api_key.mint');
    assert.equal(entry.actor, (await t.row("SELECT id FROM principals WHERE name = 'owner'"))!.id);
    assert.equal(entry.details.owner_id, svc);
    // The key acts as the target: jobs role, not owner.
    const asSvc = await t.request('GET', '/api/public/v1/admin/principals', { token: m.body.secret });
    assert.equal(asSvc.status, 403);
  } finally {
    await t.close();
  }
});

test('a credential cannot mint wider than itself, nor for a principal it does not fully hold', async () => {
  const t = await inProcessCell();
  try {
    const narrow = await mint(t, { scopes: ['iam.keys'] });
    const wide = await mint(t, { scopes: [] }, narrow.body.secret);
    assert.equal(wide.status, 403);
    assert.equal(wide.body.details.reason, 'wider_than_caller');
    const ok = await mint(t, { scopes: ['iam.keys.read'] }, narrow.body.secret);
    assert.equal(ok.status, 201);
    // A jobs service may not mint a key for the owner.
    const svc = await newService(t, 'jobs-svc');
    const svcKey = await mint(t, { owner_id: svc });
    const owner = (await t.row("SELECT id FROM principals WHERE name = 'owner'"))!.id;
    const escalate = await mint(t, { owner_id: owner }, svcKey.body.secret);
    assert.equal(escalate.status, 404, 'the jobs service cannot even see the owner');
  } finally {
    await t.close();
  }
});

test('rotate: previous secret verifies within the grace window, only the new one after it', async () => {
  const t = await inProcessCell({ config: { keyRotationGraceSeconds: 3600 } });
  try {
    const m = await mint(t, {});
    const r = await t.request('POST', `${KEYS}/${m.body.key_id}/rotate`, { token: t.adminKey, body: { grace_seconds: 600 } });
    assert.equal(r.status, 200, r.text);
    assert.notEqual(r.body.secret, m.body.secret);
    assert.equal(r.body.previous_secret_valid_until, new Date(t.clock.now() + 600_000).toISOString());
    assert.equal((await t.request('GET', ME_PROBE, { token: m.body.secret })).status, 200, 'old within grace');
    assert.equal((await t.request('GET', ME_PROBE, { token: r.body.secret })).status, 200, 'new');
    t.clock.advance(600_001);
    const old = await t.request('GET', ME_PROBE, { token: m.body.secret });
    assert.equal(old.status, 401);
    assert.equal(old.body.details.reason, 'grace_elapsed');
    assert.equal((await t.request('GET', ME_PROBE, { token: r.body.secret })).status, 200);
  } finally {
    await t.close();
  }
});

test('rotate: grace is bounded by the configured window and never passes the key expiry; an expired key cannot rotate', async () => {
  const t = await inProcessCell({ config: { keyRotationGraceSeconds: 3600 } });
  try {
    const m = await mint(t, {});
    const r = await t.request('POST', `${KEYS}/${m.body.key_id}/rotate`, { token: t.adminKey, body: { grace_seconds: 999_999 } });
    assert.equal(r.body.previous_secret_valid_until, new Date(t.clock.now() + 3600_000).toISOString());
    const exp = new Date(t.clock.now() + 120_000).toISOString();
    const short = await mint(t, { expires_at: exp });
    const r2 = await t.request('POST', `${KEYS}/${short.body.key_id}/rotate`, { token: t.adminKey });
    assert.equal(r2.body.previous_secret_valid_until, exp);
    t.clock.advance(120_001);
    const r3 = await t.request('POST', `${KEYS}/${short.body.key_id}/rotate`, { token: t.adminKey });
    assert.equal(r3.status, 409);
    assert.equal(r3.body.details.reason, 'key_expired');
    const used = await t.request('GET', ME_PROBE, { token: r2.body.secret });
    assert.equal(used.status, 401);
    assert.equal(used.body.details.reason, 'expired');
  } finally {
    await t.close();
  }
});

test('revoke: both secrets refused at once; idempotent', async () => {
  const t = await inProcessCell();
  try {
    const m = await mint(t, {});
    const r = await t.request('POST', `${KEYS}/${m.body.key_id}/rotate`, { token: t.adminKey });
    const v = await t.request('POST', `${KEYS}/${m.body.key_id}/revoke`, { token: t.adminKey });
    assert.equal(v.status, 200);
    assert.equal(v.body.status, 'revoked');
    for (const s of [m.body.secret, r.body.secret]) {
      const x = await t.request('GET', ME_PROBE, { token: s });
      assert.equal(x.status, 401);
      assert.equal(x.body.details.reason, 'revoked');
    }
    assert.equal((await t.request('POST', `${KEYS}/${m.body.key_id}/revoke`, { token: t.adminKey })).status, 200);
    assert.equal((await t.request('POST', `${KEYS}/${m.body.key_id}/rotate`, { token: t.adminKey })).status, 409);
  } finally {
    await t.close();
  }
});

test('owner archived: keys soft-deleted (refused) and recoverable by restore within retention', async () => {
  const t = await inProcessCell({ config: { retentionSeconds: 3600 } });
  try {
    const svc = await newService(t, 'archivable');
    const k = await mint(t, { owner_id: svc });
    assert.equal((await t.request('GET', '/api/public/v1/admin/api-keys', { token: k.body.secret })).status, 200);
    const a = await t.request('POST', `${PRINCIPALS}/${svc}/archive`, { token: t.adminKey });
    assert.equal(a.status, 200);
    assert.equal(a.body.status, 'archived');
    const refused = await t.request('GET', '/api/public/v1/admin/api-keys', { token: k.body.secret });
    assert.equal(refused.status, 401);
    const row = await t.request('GET', `${KEYS}/${k.body.key_id}`, { token: t.adminKey });
    assert.equal(row.body.status, 'soft_deleted');
    const restored = await t.request('POST', `${PRINCIPALS}/${svc}/restore`, { token: t.adminKey });
    assert.equal(restored.body.status, 'active');
    assert.equal((await t.request('GET', '/api/public/v1/admin/api-keys', { token: k.body.secret })).status, 200);
  } finally {
    await t.close();
  }
});

test('owner soft-deleted then the sweep: keys hard-deleted and tombstoned after retention', async () => {
  const t = await inProcessCell({ config: { retentionSeconds: 3600 } });
  try {
    const svc = await newService(t, 'deletable');
    const k = await mint(t, { owner_id: svc });
    assert.equal((await t.request('DELETE', `${PRINCIPALS}/${svc}`, { token: t.adminKey })).body.status, 'deleted');
    assert.deepEqual(await t.modules.iam.lifecycle.sweep(), { principals: 0, keys: 0 }, 'nothing before retention passes');
    t.clock.advance(3600_001);
    const late = await t.request('POST', `${PRINCIPALS}/${svc}/restore`, { token: t.adminKey });
    assert.equal(late.status, 409);
    assert.deepEqual(await t.modules.iam.lifecycle.sweep(), { principals: 1, keys: 1 });
    assert.equal(await t.row('SELECT 1 AS x FROM api_keys WHERE id = ?', [k.body.key_id]), undefined);
    assert.ok(await t.row('SELECT 1 AS x FROM key_tombstones WHERE key_id = ?', [k.body.key_id]));
    assert.equal((await t.request('GET', '/api/public/v1/admin/api-keys', { token: k.body.secret })).status, 401);
  } finally {
    await t.close();
  }
});

test('owner purged: every key hard-deleted and tombstoned, including ones already soft-deleted', async () => {
  const t = await inProcessCell();
  try {
    const svc = await newService(t, 'purgeable');
    const k1 = await mint(t, { owner_id: svc });
    const k2 = await mint(t, { owner_id: svc });
    await t.request('POST', `${KEYS}/${k2.body.key_id}/revoke`, { token: t.adminKey });
    await t.request('POST', `${PRINCIPALS}/${svc}/archive`, { token: t.adminKey });
    const p = await t.request('POST', `${PRINCIPALS}/${svc}/purge`, { token: t.adminKey });
    assert.equal(p.status, 200);
    assert.equal(p.body.status, 'purged');
    for (const k of [k1, k2]) {
      assert.equal(await t.row('SELECT 1 AS x FROM api_keys WHERE id = ?', [k.body.key_id]), undefined);
      assert.ok(await t.row('SELECT 1 AS x FROM key_tombstones WHERE key_id = ?', [k.body.key_id]));
    }
    assert.equal((await t.request('GET', `${PRINCIPALS}/${svc}`, { token: t.adminKey })).status, 404);
  } finally {
    await t.close();
  }
});

test('scopes narrow: a jobs-only key reaches jobs permissions and nothing else', async () => {
  const t = await inProcessCell();
  try {
    const k = await mint(t, { scopes: ['system.orchestration.admin.read', 'system.orchestration.admin.write'] });
    assert.equal((await t.request('GET', '/api/public/v1/admin/principals', { token: k.body.secret })).status, 403);
    assert.equal((await t.request('GET', KEYS, { token: k.body.secret })).status, 403);
    assert.equal((await t.request('GET', '/api/public/v1/admin/audit', { token: k.body.secret })).status, 403);
    const dotted = await mint(t, { scopes: ['audit'] });
    assert.equal((await t.request('GET', '/api/public/v1/admin/audit', { token: dotted.body.secret })).status, 200);
  } finally {
    await t.close();
  }
});

test('allowed_ips (exact and CIDR, v4 and v6) and allowed_regions', async () => {
  const t = await inProcessCell({ config: { region: 'eu-west' } });
  try {
    const k = await mint(t, { allowed_ips: ['10.1.2.3', '192.168.0.0/16', '2001:db8::/32'] });
    const probe = (ip: string) => t.request('GET', ME_PROBE, { token: k.body.secret, ip });
    assert.equal((await probe('10.1.2.3')).status, 200);
    assert.equal((await probe('::ffff:192.168.4.5')).status, 200);
    assert.equal((await probe('2001:db8:1::7')).status, 200);
    const no = await probe('10.1.2.4');
    assert.equal(no.status, 403);
    assert.equal(no.body.details.reason, 'ip_not_allowed');
    assert.equal((await probe('2001:db9::1')).status, 403);
    const here = await mint(t, { allowed_regions: ['eu-west', 'us-east'] });
    assert.equal((await t.request('GET', ME_PROBE, { token: here.body.secret })).status, 200);
    const elsewhere = await mint(t, { allowed_regions: ['us-east'] });
    const r = await t.request('GET', ME_PROBE, { token: elsewhere.body.secret });
    assert.equal(r.status, 403);
    assert.equal(r.body.details.reason, 'region_not_allowed');
    assert.equal((await mint(t, { allowed_ips: ['10.0.0.0/33'] })).status, 400);
  } finally {
    await t.close();
  }
});

test('per-key rate_limit_rpm answers 429 with Retry-After after the permission check', async () => {
  const t = await inProcessCell();
  try {
    const k = await mint(t, { rate_limit_rpm: 3, scopes: ['iam.keys.read'] });
    for (let i = 0; i < 3; i++) assert.equal((await t.request('GET', ME_PROBE, { token: k.body.secret })).status, 200);
    const r = await t.request('GET', ME_PROBE, { token: k.body.secret });
    assert.equal(r.status, 429);
    assert.equal(r.body.error, 'rate_limited');
    assert.equal(r.body.retryable, true);
    assert.ok(Number(r.headers.get('retry-after')) >= 1);
    // Authorization comes before the per-key budget: a forbidden call is 403, not 429.
    assert.equal((await t.request('GET', '/api/public/v1/admin/audit', { token: k.body.secret })).status, 403);
    t.clock.advance(20_000);
    assert.equal((await t.request('GET', ME_PROBE, { token: k.body.secret })).status, 200);
  } finally {
    await t.close();
  }
});

test('gate order: 429 before 401 before 403; headers on every response', async () => {
  const t = await inProcessCell({ config: { rate: { capacity: 3, refillPerSecond: 0.001 } } });
  try {
    const k = await mint(t, { scopes: ['audit'] });
    const forbidden = await t.request('GET', '/api/public/v1/admin/principals', { token: k.body.secret });
    assert.equal(forbidden.status, 403);
    const unauth = await t.request('GET', '/api/public/v1/admin/principals', { token: 'svck_live_' + 'A'.repeat(43) });
    assert.equal(unauth.status, 401);
    assert.ok(unauth.headers.get('www-authenticate'));
    const limited = await t.request('GET', '/api/public/v1/admin/principals');
    assert.equal(limited.status, 429, 'no credential at all, yet the rate budget speaks first');
    assert.ok(limited.headers.get('retry-after'));
    for (const r of [forbidden, unauth, limited]) {
      for (const h of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'ratelimit', 'ratelimit-policy'])
        assert.ok(r.headers.get(h), h);
    }
    assert.equal(limited.headers.get('x-ratelimit-remaining'), '0');
    // Another client IP has its own bucket.
    assert.equal((await t.request('GET', '/api/public/v1/admin/principals', { token: t.adminKey, ip: '127.0.0.9' })).status, 200);
  } finally {
    await t.close();
  }
});

test('a custom role narrows; built-ins cannot be changed; a principal cannot get more than its creator', async () => {
  const t = await inProcessCell();
  try {
    assert.equal(
      (await t.request('POST', '/api/public/v1/admin/roles', { token: t.adminKey, body: { name: 'owner', permissions: ['audit.read'] } }))
        .status,
      409,
    );
    const role = await t.request('POST', '/api/public/v1/admin/roles', {
      token: t.adminKey,
      body: { name: 'auditor', permissions: ['audit.read'] },
    });
    assert.equal(role.status, 201);
    const svc = await newService(t, 'auditor-svc', ['auditor']);
    const k = await mint(t, { owner_id: svc });
    assert.equal((await t.request('GET', '/api/public/v1/admin/audit', { token: k.body.secret })).status, 200);
    assert.equal((await t.request('GET', KEYS, { token: k.body.secret })).status, 403);
    const opKey = await mint(t, { scopes: ['iam.principals'] });
    const r = await t.request('POST', PRINCIPALS, { token: opKey.body.secret, body: { kind: 'service', name: 'x', roles: ['owner'] } });
    assert.equal(r.status, 403);
    assert.equal(r.body.details.reason, 'wider_than_caller');
  } finally {
    await t.close();
  }
});

test('a verified-key cache never outlives a change: role created later, owner archived, key revoked', async () => {
  const t = await inProcessCell();
  try {
    const svc = await newService(t, 'late-role', []);
    await t.core.store.write((tx) => tx.run('UPDATE principals SET roles = \'["latecomer"]\' WHERE id = ?', [svc]));
    const k = await mint(t, { owner_id: svc });
    assert.equal((await t.request('GET', '/api/public/v1/admin/audit', { token: k.body.secret })).status, 403);
    await t.request('POST', '/api/public/v1/admin/roles', { token: t.adminKey, body: { name: 'latecomer', permissions: ['audit.read'] } });
    assert.equal((await t.request('GET', '/api/public/v1/admin/audit', { token: k.body.secret })).status, 200);
    await t.request('POST', `${KEYS}/${k.body.key_id}/revoke`, { token: t.adminKey });
    assert.equal((await t.request('GET', '/api/public/v1/admin/audit', { token: k.body.secret })).status, 401);
  } finally {
    await t.close();
  }
});

test('X-Forwarded-For is ignored unless the socket peer is a trusted proxy', async () => {
  const t = await inProcessCell({ config: { trustedProxies: ['10.9.9.9'] } });
  try {
    const k = await mint(t, { allowed_ips: ['203.0.113.7'] });
    const spoof = await t.request('GET', ME_PROBE, {
      token: k.body.secret,
      ip: '198.51.100.1',
      headers: { 'x-forwarded-for': '203.0.113.7' },
    });
    assert.equal(spoof.status, 403, 'an untrusted peer cannot claim another address');
    const viaProxy = await t.request('GET', ME_PROBE, {
      token: k.body.secret,
      ip: '10.9.9.9',
      headers: { 'x-forwarded-for': '1.1.1.1, 203.0.113.7' },
    });
    assert.equal(viaProxy.status, 200, "the trusted proxy's last hop is the client");
  } finally {
    await t.close();
  }
});

test('the cell publishes its identity keys (public part only), including the journal signer', async () => {
  const t = await inProcessCell();
  try {
    const r = await t.request('GET', '/.well-known/cell-keys.json');
    assert.equal(r.status, 200);
    assert.equal(r.body.cell_id, 'cell-test');
    assert.equal(r.body.keys.length, 1);
    assert.equal(r.body.keys[0].jwk.kty, 'OKP');
    assert.equal(r.body.keys[0].jwk.d, undefined, 'never the private part');
    assert.equal(r.body.keys[0].kid, t.modules.iam.iam.signer().kid);
    assert.equal(r.body.keys[0].cell_id, 'cell-test', 'each key names the cell it belongs to');
    assert.ok(r.headers.get('x-ratelimit-limit'), 'rate-limited like everything else');
  } finally {
    await t.close();
  }
});

test('a key file left by a first start that died before committing is replaced on the next start', async () => {
  const { mkdtempSync, writeFileSync, readFileSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const dir = mkdtempSync(join(tmpdir(), 'cell-boot-'));
  writeFileSync(join(dir, 'bootstrap-admin.key'), 'svck_live_' + 'Z'.repeat(43) + '\n', { mode: 0o600 });
  const t = await inProcessCell({ config: { dataDir: dir } });
  try {
    const onDisk = readFileSync(join(dir, 'bootstrap-admin.key'), 'utf8').trim();
    assert.equal(onDisk, t.adminKey);
    assert.notEqual(onDisk, 'svck_live_' + 'Z'.repeat(43));
    assert.equal((await t.request('GET', ME_PROBE, { token: onDisk })).status, 200);
  } finally {
    await t.close();
    (await import('node:fs')).rmSync(dir, { recursive: true, force: true });
  }
});
