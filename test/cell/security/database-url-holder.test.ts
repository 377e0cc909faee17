// docs/security.md, "What a holder of the database URL can and cannot do": each claim of the section, tried
// as that holder would (issue 36). A group's cell on PostgreSQL with the group's key file; the holder has the
// database URL (a connection of their own, able to read and write every table) and a secrets key of their own,
// but not the group's key file. Without it they open no sealed secret, sign nothing as the cell, plant no key
// the group trusts, forge no bundle a device honours, and no process of theirs starts on the store; they read
// what is stored in the clear and can write rows (database write access is administrative access), which the
// section says plainly. With the key file as well they hold the cell (not tried: nothing stands in the way).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { importJWK, SignJWT, type JWK } from 'jose';
import pg from 'pg';
import { openKeyBundle } from '../../../bundles/key-bundle.ts';
import { generateEd25519 } from '../../../bundles/codec.ts';
import { hashSecret } from '../../../core/apikey/hash.ts';
import { newSecret } from '../../../cell/iam/keys.ts';
import { isSealedJwk, openJwk, openSecret, sealJwk } from '../../../cell/custody/api.ts';
import { wsNames } from '../../../cell/jobs/sandbox/pg-workspace.ts';
import { startCell, type RunningCell } from '../../../cell/server.ts';
import { startOpenAIServer, type FakeOpenAI } from '../../fixtures/openai-server.ts';
import { TEST_ENGINE } from '../../helpers/inproc.ts';
import { pgDatabase, pgUnavailable, type PgDatabase } from '../../helpers/postgres.ts';
import { forgedKeyBundle } from '../../helpers/forged-bundle.ts';

const A = '/api/public/v1/admin';
const quiet = { info() {}, warn() {}, error() {} };
const skip =
  TEST_ENGINE !== 'postgres' ? "the database URL is PostgreSQL's (CELL_TEST_STORE=postgres runs it)" : (pgUnavailable() ?? false);

describe('a holder of the database URL without the secrets key file', { skip, timeout: 180_000 }, () => {
  let work: string;
  let db: PgDatabase;
  let cell: RunningCell;
  let owner: string;
  let ai: FakeOpenAI;
  let theirKey: Buffer;
  let theirKeyFile: string;
  /** The holder's own connection to the database. */
  let sql: pg.Client;
  const PROVIDER_SECRET = 'sk-the-provider-secret-value';

  async function req(method: string, path: string, token: string, body?: unknown) {
    const r = await cell.app.request(path, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await r.text();
    return { status: r.status, body: text ? JSON.parse(text) : undefined, text };
  }

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'db-url-holder-'));
    const groupKeyFile = join(work, 'group.key');
    writeFileSync(groupKeyFile, randomBytes(32), { mode: 0o600 });
    theirKeyFile = join(work, 'theirs.key');
    theirKey = randomBytes(32);
    writeFileSync(theirKeyFile, theirKey, { mode: 0o600 });
    db = await pgDatabase();
    ai = await startOpenAIServer({ apiKey: PROVIDER_SECRET });
    cell = await startCell({
      config: { dataDir: join(work, 'cell'), storeUrl: db.url, secretsKeyFile: groupKeyFile },
      listen: false,
      log: quiet,
    });
    owner = cell.bootstrapSecret!;
    // What the store then holds: a provider secret, a SQL workspace, a journal.
    const s = await req('POST', `${A}/secrets`, owner, { name: 'openai', value: PROVIDER_SECRET });
    assert.equal(s.status, 201, s.text);
    const job = await req('POST', `${A}/jobs/runs`, owner, {
      job_type: 'sql',
      workspace_id: 'books',
      spec: { sql: 'CREATE TABLE t (n INTEGER)' },
    });
    assert.equal(job.status, 202, job.text);
    for (let i = 0; i < 400; i++) {
      const r = await req('GET', `${A}/jobs/runs/${job.body.run_id}`, owner);
      if (r.body.state === 'completed') break;
      assert.ok(!['failed', 'refused', 'cancelled'].includes(r.body.state), r.text);
      await new Promise((res) => setTimeout(res, 25));
    }
    sql = new pg.Client({ connectionString: db.url });
    await sql.connect();
  });
  after(async () => {
    await sql?.end();
    await cell?.stop();
    await ai?.close();
    await db?.drop();
    rmSync(work, { recursive: true, force: true });
  });

  test('cannot open a sealed secret: provider secrets and private keys are ciphertext only a key outside the store opens', async () => {
    const secrets = (await sql.query('SELECT secret_id, sealed FROM ai_secrets')).rows as { secret_id: string; sealed: Buffer }[];
    assert.equal(secrets.length, 1);
    for (const r of secrets) {
      assert.ok(!r.sealed.includes(Buffer.from(PROVIDER_SECRET)), 'the value is not in the row');
      assert.throws(() => openSecret(theirKey, r.secret_id, r.sealed), 'a key of their own opens nothing');
    }
    for (const table of ['cell_keys', 'oauth_signing_keys'] as const) {
      for (const r of (await sql.query(`SELECT kid, private_jwk FROM ${table}`)).rows as { kid: string; private_jwk: string }[]) {
        const stored = JSON.parse(r.private_jwk) as unknown;
        assert.ok(isSealedJwk(stored), `${table} ${r.kid} sealed`);
        assert.doesNotMatch(r.private_jwk, /"d"\s*:/);
        assert.throws(() => openJwk(theirKey, table, r.kid, stored), /does not open the private key/);
      }
    }
  });

  test('cannot plant a key the group trusts, sign as the cell, or forge a bundle or a token with one', async () => {
    const identity = await generateEd25519();
    const clear = await generateEd25519();
    const tokenKey = await generateEd25519();
    const ins =
      'INSERT INTO cell_keys (kid, purpose, cell_id, private_jwk, public_jwk, created_at, retired_at) VALUES ($1, $2, $3, $4, $5, $6, NULL)';
    await sql.query(ins, [
      identity.kid,
      'identity',
      'cell-planted',
      JSON.stringify(sealJwk(theirKey, 'cell_keys', identity.kid, identity.privateJwk)),
      JSON.stringify(identity.publicJwk),
      Date.now(),
    ]);
    await sql.query(ins, [
      clear.kid,
      'identity',
      'cell-clear',
      JSON.stringify(clear.privateJwk),
      JSON.stringify(clear.publicJwk),
      Date.now(),
    ]);
    await sql.query('INSERT INTO oauth_signing_keys (kid, private_jwk, public_jwk, created_at, retired_at) VALUES ($1, $2, $3, $4, NULL)', [
      tokenKey.kid,
      JSON.stringify(sealJwk(theirKey, 'oauth_signing_keys', tokenKey.kid, tokenKey.privateJwk)),
      JSON.stringify(tokenKey.publicJwk),
      Date.now() + 86_400_000,
    ]);
    // The cell reads them as it would after any change (a notification, its periodic sweep, a restart).
    cell.modules.iam.iam.invalidate();
    await cell.modules.oauth.api.refreshKeyring();
    const published = (await req('GET', '/.well-known/cell-keys.json', owner)).body.keys.map((k: { kid: string }) => k.kid);
    const groupKids = (await cell.modules.iam.iam.groupIdentityKeys()).map((k) => k.kid);
    for (const kid of [identity.kid, clear.kid]) {
      assert.ok(!published.includes(kid) && !groupKids.includes(kid), `planted identity key ${kid} is not published`);
    }
    assert.ok(!(await req('GET', '/oauth/jwks.json', owner)).body.keys.some((k: { kid: string }) => k.kid === tokenKey.kid));
    assert.notEqual(cell.modules.oauth.api.keyring().active.kid, tokenKey.kid, 'nor used to sign tokens');

    // A device pins the group's anchor (as POST /edge/devices returns it): a bundle signed by a planted key does not open.
    const device = await generateEd25519();
    const reg = await req('POST', `${A}/edge/devices`, owner, { name: 'd', public_jwk: device.publicJwk });
    assert.equal(reg.status, 201, reg.text);
    const planted = newSecret();
    for (const kp of [identity, clear]) {
      const forged = await forgedKeyBundle({ issuer: reg.body.trust.cell_id, audience: device.kid, key: kp, secret: planted });
      await assert.rejects(openKeyBundle(forged, reg.body.trust.keys), `a bundle signed by ${kp.kid} is refused by the device's loader`);
    }
    // A token signed by the planted OAuth key: refused.
    const forgedToken = await new SignJWT({
      sub: 'usr_x',
      scope: '*',
      iss: cell.modules.oauth.api.issuer(),
      aud: cell.modules.oauth.api.audience(),
    })
      .setProtectedHeader({ alg: 'EdDSA', kid: tokenKey.kid, typ: 'at+jwt' })
      .setIssuedAt()
      .setExpirationTime('5m')
      .setJti(randomBytes(8).toString('hex'))
      .sign(await importJWK(tokenKey.privateJwk as JWK, 'EdDSA'));
    assert.equal((await req('GET', `${A}/whoami`, forgedToken)).status, 401);
  });

  test('cannot start a process on the store with a key of their own (serve, bundle keys, admin reset-owner each start one): refused before writing', async () => {
    const count = async () => Number((await sql.query('SELECT count(*) AS n FROM cell_keys')).rows[0].n);
    const n = await count();
    await assert.rejects(
      startCell({ config: { dataDir: join(work, 'theirs'), storeUrl: db.url, secretsKeyFile: theirKeyFile }, listen: false, log: quiet }),
      /does not open the store's key check.*wrote nothing/,
    );
    assert.equal(await count(), n, 'no key row written');
    // Deleting the check does not let them in: the store's sealed keys and secrets must open under their key first.
    const check = (await sql.query('SELECT sealed, created_at FROM custody_key_check')).rows[0] as { sealed: Buffer; created_at: string };
    await sql.query('DELETE FROM custody_key_check');
    await assert.rejects(
      startCell({ config: { dataDir: join(work, 'theirs2'), storeUrl: db.url, secretsKeyFile: theirKeyFile }, listen: false, log: quiet }),
      /does not open \d+ of the \d+ things the store holds sealed/,
    );
    assert.equal((await sql.query('SELECT count(*) AS n FROM custody_key_check')).rows[0].n, '0', 'nor records a check of theirs');
    assert.equal(await count(), n);
    await sql.query('INSERT INTO custody_key_check (id, sealed, created_at) VALUES (1, $1, $2)', [check.sealed, check.created_at]);
  });

  test('can read what is stored in the clear, and write rows: database write access is administrative access', async () => {
    // Reads: principals, key hashes (not the secrets), journals.
    const principals = (await sql.query('SELECT name FROM principals')).rows.map((r) => r.name as string);
    assert.ok(principals.length > 0);
    const hashes = (await sql.query('SELECT hash FROM api_keys')).rows.map((r) => r.hash as string);
    assert.ok(!hashes.includes(owner) && hashes.includes(hashSecret(owner)), 'the owner key is stored as its hash only');
    assert.ok(Number((await sql.query('SELECT count(*) AS n FROM journal')).rows[0].n) > 0, 'journals are readable (and signed)');
    // Writes: a key hash of a secret they know, inserted as the owner's: the cell honours it.
    const mine = newSecret();
    await sql.query(
      `INSERT INTO api_keys (id, owner_id, name, hash, scopes, allowed_ips, allowed_regions, status, created_at, created_by, authority)
       SELECT 'key_inserted', owner_id, 'inserted', $1, scopes, allowed_ips, allowed_regions, 'active', created_at, created_by, authority
       FROM api_keys WHERE hash = $2`,
      [hashSecret(mine), hashSecret(owner)],
    );
    cell.modules.iam.iam.invalidate();
    assert.equal((await req('GET', `${A}/whoami`, mine)).status, 200, 'an inserted key hash works: the section says so');
  });

  test('cannot open the SQL workspaces’ secrets: role passwords and effect keys are sealed under the group’s key (issue 36, finding 10)', async () => {
    const row = (await sql.query("SELECT effect_key, role_password FROM job_sql_workspaces WHERE workspace_id = 'books'"))
      .rows[0] as Record<'effect_key' | 'role_password', string>;
    for (const column of ['effect_key', 'role_password'] as const) {
      assert.doesNotMatch(row[column], /^[0-9a-f]+$/, `${column} is not in the clear`);
      const stored = JSON.parse(row[column]) as { sealed: number; data: string };
      assert.equal(stored.sealed, 1, column);
      assert.throws(
        () => openSecret(theirKey, `agent-cell workspace secret v1:books:${column}`, Buffer.from(stored.data, 'base64')),
        `a key of their own opens no ${column}`,
      );
    }
    // The workspace's data is in a database of its own on the server, named after the cells' one.
    const own = await sql.query('SELECT 1 FROM pg_database WHERE datname = $1', [wsNames(db.name, 'books').database]);
    assert.equal(own.rowCount, 1);
  });
});
