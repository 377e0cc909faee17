// Security round 3, finding 6: the private halves of the cell's identity keys
// (cell_keys: journals, bundles) and of the OAuth token signing keys
// (oauth_signing_keys) were stored in the clear, so a copy of the database
// minted tokens of any authority and forged journals. They are sealed under the
// group's secrets key (outside the store: cell/custody); tokens and signatures
// go on verifying. Round 4 (issue 36, finding 4): a row that is not sealed under
// the group's key (in the clear, as before sealing, or planted) is neither
// published nor used, and a process without the group's key writes nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jwtVerify, createLocalJWKSet } from 'jose';
import { startCell, type RunningCell } from '../../../cell/server.ts';
import { isSealedJwk, openJwk } from '../../../cell/custody/api.ts';
import { verifyEd25519 } from '../../../core/crypto/ed25519.ts';
import { TEST_ENGINE, inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { basic, form, registerClient } from '../../helpers/oauth.ts';

const quiet = { info() {}, warn() {}, error() {} };

async function privateRows(db: { all: InProcess['rows'] }): Promise<{ table: string; kid: string; text: string }[]> {
  const rows = [];
  for (const table of ['cell_keys', 'oauth_signing_keys']) {
    for (const r of await db.all(`SELECT kid, private_jwk FROM ${table}`))
      rows.push({ table, kid: String(r['kid']), text: String(r['private_jwk']) });
  }
  return rows;
}

async function token(t: InProcess): Promise<string> {
  const c = await registerClient(t, { name: 'sealed', scope: ['audit.read'] });
  const r = await form(t, '/oauth/token', { grant_type: 'client_credentials' }, basic(c.client_id, c.client_secret!));
  assert.equal(r.status, 200, r.text);
  return r.body.access_token as string;
}

test('the stored rows hold no usable private key: sealed, the private scalar nowhere in the text; a copy with another key opens nothing', async () => {
  const t = await inProcessCell();
  try {
    const tok = await token(t);
    const key = readFileSync(join(t.dir, 'secrets.key'));
    const rows = await privateRows({ all: t.rows });
    assert.ok(rows.some((r) => r.table === 'cell_keys') && rows.some((r) => r.table === 'oauth_signing_keys'), JSON.stringify(rows));
    for (const r of rows) {
      const stored = JSON.parse(r.text) as unknown;
      assert.ok(isSealedJwk(stored), `${r.table} ${r.kid} is sealed`);
      assert.doesNotMatch(r.text, /"d"\s*:/, 'no JWK private member');
      const jwk = openJwk(key as Buffer, r.table as 'cell_keys', r.kid, stored);
      assert.equal(typeof jwk.d, 'string');
      assert.ok(!r.text.includes(jwk.d!), 'the private scalar is not in the stored text');
      // A database copy alone: any other key opens nothing.
      assert.throws(() => openJwk(randomBytes(32), r.table as 'cell_keys', r.kid, stored), /does not open the private key/);
      // Moved to another kid or table, it does not open either.
      assert.throws(() => openJwk(key, r.table === 'cell_keys' ? 'oauth_signing_keys' : 'cell_keys', r.kid, stored));
    }
    // Tokens still verify: the token works and checks against the published JWKS.
    const jwks = (await t.request('GET', '/oauth/jwks.json')).body;
    await jwtVerify(tok, createLocalJWKSet(jwks), { currentDate: new Date(t.clock.now()) });
    const who = await t.request('GET', '/api/public/v1/admin/whoami', { token: tok });
    assert.equal(who.status, 200, who.text);
    // The identity key still signs.
    const signer = t.modules.iam.iam.signer();
    const msg = new TextEncoder().encode('journal record');
    const sig = await signer.sign(msg);
    const pub = (await t.modules.iam.iam.groupIdentityKeys()).find((k) => k.kid === signer.kid)!;
    assert.ok(await verifyEd25519(pub.jwk, msg, sig));
  } finally {
    await t.close();
  }
});

test('keys in the clear are neither published nor used: the cell makes sealed ones; a copy of the store without the key writes nothing', {
  skip: TEST_ENGINE !== 'embedded' && 'copies the embedded store directory',
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sealed-'));
  const copy = mkdtempSync(join(tmpdir(), 'sealed-copy-'));
  let cell: RunningCell | undefined;
  try {
    const start = (dataDir: string, secretsKeyFile: string | null = null) =>
      startCell({ config: { dataDir, cellId: 'cell-test', secretsKeyFile }, listen: false, log: quiet });
    cell = await start(dir);
    const before = cell.modules.iam.iam.signer().kid;
    const oauthBefore = cell.modules.oauth.api.keyring().active.kid;
    // Write the keys back in the clear, as a store from before sealing held them (or as someone with the
    // database would plant a key of their own).
    const key = readFileSync(join(dir, 'secrets.key'));
    const rows = await privateRows(cell.core.store);
    await cell.core.store.write(async (tx) => {
      for (const r of rows) {
        const clear = openJwk(key, r.table as 'cell_keys', r.kid, JSON.parse(r.text));
        await tx.run(`UPDATE ${r.table} SET private_jwk = ? WHERE kid = ?`, [JSON.stringify(clear), r.kid]);
      }
    });
    await cell.stop();
    cell = undefined;

    cell = await start(dir);
    const signer = cell.modules.iam.iam.signer();
    assert.notEqual(signer.kid, before, 'the key in the clear is not used: a new identity key signs');
    const published = (await cell.modules.iam.iam.groupIdentityKeys()).map((k) => k.kid);
    assert.deepEqual(published, [signer.kid], 'nor published');
    const ring = cell.modules.oauth.api.keyring();
    assert.notEqual(ring.active.kid, oauthBefore);
    assert.deepEqual(
      ring.published.map((k) => k.kid),
      [ring.active.kid],
      'the OAuth key in the clear is not in the JWKS: no token it signs verifies',
    );
    for (const r of await privateRows(cell.core.store))
      if (r.kid === signer.kid || r.kid === ring.active.kid) assert.ok(isSealedJwk(JSON.parse(r.text)), `${r.table} ${r.kid} sealed`);
    await cell.stop();
    cell = undefined;

    // A copy of the store in a data directory without the key: refused before it writes anything, and no key of its own made.
    cpSync(join(dir, 'store'), join(copy, 'store'), { recursive: true });
    const storeBytes = () => readFileSync(join(copy, 'store', 'wal.log'));
    const was = storeBytes();
    await assert.rejects(start(copy), /has no secrets key \(.*secrets\.key does not exist\).*wrote nothing.*--secrets-key-file/);
    assert.equal(existsSync(join(copy, 'secrets.key')), false, 'no key of its own');
    // And with another key: refused the same way, naming the flag.
    const other = join(copy, 'other.key');
    writeFileSync(other, randomBytes(32), { mode: 0o600 });
    await assert.rejects(start(copy, other), /does not open the store's key check.*wrote nothing.*--secrets-key-file/);
    assert.deepEqual(storeBytes(), was, 'the store as it was');
  } finally {
    await cell?.stop();
    rmSync(dir, { recursive: true, force: true });
    rmSync(copy, { recursive: true, force: true });
  }
});
