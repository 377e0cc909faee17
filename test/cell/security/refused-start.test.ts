// Security round 4 (issue 36), finding 4: a refused start wrote a new cell signing key into the shared
// store (`serve` with a missing or wrong secrets key, `bundle keys`, `admin reset-owner`), and that key was
// published in /.well-known/cell-keys.json and in the trust anchor devices pin: with only the database URL
// and a key file of their own, an attacker signed a key bundle (version 999999, a `*` key) that an edge
// loaded and honoured, and every real bundle became a rollback there.
//
// Now a process proves its secrets key against the group's key check before it writes anything
// (cell/custody), and only key rows sealed under the group's key are published or used. Here, with the real
// programs (dist/cell.mjs, dist/edge.mjs): each refused command leaves every table as it was; rows planted
// directly in the store (an identity key sealed under the attacker's key, one in the clear, an OAuth signing
// key) are neither published nor used; a bundle signed by a planted key is refused by a real edge that pinned
// the group's anchor, whose real bundles still load; a token signed by a planted key is refused.
// PostgreSQL (the attacker has the database URL) and the embedded store (the attacker has the data directory,
// the group's key file is kept elsewhere). Needs `node scripts/build.mjs`.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { SignJWT, importJWK, type JWK } from 'jose';
import pg from 'pg';
import { generateEd25519 } from '../../../bundles/codec.ts';
import { sealJwk } from '../../../cell/custody/api.ts';
import { MIGRATIONS } from '../../../cell/migrations.ts';
import { copyStoreOnline } from '../../../cell/store/copy-online.ts';
import { openStore } from '../../../cell/store/open.ts';
import { CELL_BIN, startCellProcess, type CellProcess } from '../../helpers/cell-process.ts';
import { call, ok } from '../../helpers/group.ts';
import { TEST_ENGINE } from '../../helpers/inproc.ts';
import { pgDatabase, pgUnavailable } from '../../helpers/postgres.ts';
import { forgedKeyBundle } from '../../helpers/forged-bundle.ts';

const EDGE_BIN = resolve(import.meta.dirname, '../../../dist/edge.mjs');
const A = '/api/public/v1/admin';
const ATTACKER_SECRET = `svck_live_${'Z'.repeat(43)}`;
const missing =
  !existsSync(CELL_BIN) || !existsSync(EDGE_BIN) ? 'dist/cell.mjs or dist/edge.mjs missing: run node scripts/build.mjs' : false;

function run(bin: string, args: string[], input?: string) {
  const r = spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', timeout: 60_000, ...(input !== undefined ? { input } : {}) });
  return { status: r.status, out: r.stdout, err: r.stderr };
}

/** The files of a data directory (its store aside) and their bytes. */
function files(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of readdirSync(dir).sort()) if (f !== 'store') out[f] = readFileSync(join(dir, f)).toString('hex');
  return out;
}

/** Every table of the store, rows as sorted JSON lines: what "wrote nothing" compares. */
type Tables = Map<string, string[]>;

async function pgTables(url: string): Promise<Tables> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const out: Tables = new Map();
    const names = await c.query("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name");
    for (const { table_name } of names.rows as { table_name: string }[])
      out.set(table_name, (await c.query(`SELECT * FROM "${table_name}"`)).rows.map((row) => JSON.stringify(row)).sort());
    return out;
  } finally {
    await c.end();
  }
}

async function embeddedTables(dataDir: string): Promise<Tables> {
  const copy = await copyStoreOnline(join(dataDir, 'store'));
  try {
    const out: Tables = new Map();
    const names = copy.db.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name");
    for (const [name] of names[0]?.values ?? []) {
      const rows = copy.db.exec(`SELECT * FROM "${String(name)}"`)[0]?.values ?? [];
      out.set(
        String(name),
        rows.map((v) => JSON.stringify(v, (_k, x: unknown) => (x instanceof Uint8Array ? Buffer.from(x).toString('hex') : x))).sort(),
      );
    }
    return out;
  } finally {
    copy.db.close();
  }
}

interface Engine {
  /** The store's arguments for a command (PostgreSQL: the database URL; embedded: none, the data directory holds it). */
  storeArgs: string[];
  tables(): Promise<Tables>;
  /** Runs statements as someone with the store would (PostgreSQL: the URL; embedded: the data directory). */
  write(statements: [string, unknown[]][]): Promise<void>;
}

/** The scenario on one engine: `engine(dataDir)` names the store of the group's cell, whose data directory is `dataDir`. */
async function scenario(
  makeEngine: (dataDir: string) => Promise<Engine & { drop(): Promise<void> }>,
  attackerDir: (dataDir: string) => string,
) {
  const work = mkdtempSync(join(tmpdir(), 'refused-start-'));
  const groupKey = join(work, 'group.key');
  writeFileSync(groupKey, randomBytes(32), { mode: 0o600 });
  const attackerKey = join(work, 'attacker.key');
  writeFileSync(attackerKey, randomBytes(32), { mode: 0o600 });
  const dataDir = mkdtempSync(join(tmpdir(), 'refused-start-cell-'));
  const engine = await makeEngine(dataDir);
  const cellArgs = [...engine.storeArgs, '--secrets-key-file', groupKey];
  let cell: CellProcess | undefined = await startCellProcess({ dataDir, args: cellArgs });
  try {
    const owner = cell.adminKey;
    const ownKids = ((await ok(cell.url, 'GET', '/.well-known/cell-keys.json')).keys as { kid: string }[]).map((k) => k.kid);
    await cell.stop();
    cell = undefined;

    // 1. Every command the attacker can run with the store and a key of their own, or none: refused, and nothing written.
    const before = await engine.tables();
    const atk = attackerDir(dataDir);
    const filesBefore = files(atk);
    const bundleOut = join(work, 'stolen.bundle');
    const refused: [string, string[]][] = [
      [
        'serve with a key of their own',
        ['serve', '--port', '0', '--data', atk, '--cell-id', 'cell-evil', ...engine.storeArgs, '--secrets-key-file', attackerKey],
      ],
      ['serve with no key', ['serve', '--port', '0', '--data', atk, '--cell-id', 'cell-evil', ...engine.storeArgs]],
      [
        'bundle keys',
        [
          'bundle',
          'keys',
          '--data',
          atk,
          ...engine.storeArgs,
          '--secrets-key-file',
          attackerKey,
          '--device',
          'D'.repeat(43),
          '--out',
          bundleOut,
        ],
      ],
      ['bundle trust', ['bundle', 'trust', '--data', atk, ...engine.storeArgs, '--secrets-key-file', attackerKey, '--out', bundleOut]],
      ['admin reset-owner', ['admin', 'reset-owner', '--data', atk, ...engine.storeArgs, '--secrets-key-file', attackerKey]],
    ];
    const said: [string, string][] = [];
    for (const [what, args] of refused) {
      const r = run(CELL_BIN, args);
      assert.equal(r.status, 1, `${what}: refused, a key file it cannot use (exit 1, docs/operations.md) (${r.out}${r.err})`);
      assert.equal(existsSync(bundleOut), false, `${what}: no file written`);
      said.push([what, r.err]);
    }
    const after = await engine.tables();
    assert.deepEqual([...after.keys()], [...before.keys()]);
    for (const [t, rows] of before) assert.deepEqual(after.get(t), rows, `table ${t} as it was`);
    assert.equal(existsSync(join(atk, 'secrets.key')), false, 'no key of its own was made');
    assert.deepEqual(files(atk), filesBefore, 'the data directory as it was: no cell id, member key, owner key or secrets key written');
    for (const [what, err] of said) {
      assert.match(err, /wrote nothing and stops.*--secrets-key-file/, what);
      assert.doesNotMatch(err, /\n\s+at /, `${what}: no stack trace`);
    }

    // 2. Rows planted in the store directly: an identity key sealed under the attacker's key, one in the clear,
    // an OAuth signing key sealed under the attacker's key and newer than the group's.
    const sealedKp = await generateEd25519();
    const clearKp = await generateEd25519();
    const tokenKp = await generateEd25519();
    const theirs = readFileSync(attackerKey);
    const now = Date.now();
    await engine.write([
      [
        'INSERT INTO cell_keys (kid, purpose, cell_id, private_jwk, public_jwk, created_at, retired_at) VALUES (?, ?, ?, ?, ?, ?, NULL)',
        [
          sealedKp.kid,
          'identity',
          'cell-evil',
          JSON.stringify(sealJwk(theirs, 'cell_keys', sealedKp.kid, sealedKp.privateJwk)),
          JSON.stringify(sealedKp.publicJwk),
          now,
        ],
      ],
      [
        'INSERT INTO cell_keys (kid, purpose, cell_id, private_jwk, public_jwk, created_at, retired_at) VALUES (?, ?, ?, ?, ?, ?, NULL)',
        [clearKp.kid, 'identity', 'cell-clear', JSON.stringify(clearKp.privateJwk), JSON.stringify(clearKp.publicJwk), now],
      ],
      [
        'INSERT INTO oauth_signing_keys (kid, private_jwk, public_jwk, created_at, retired_at) VALUES (?, ?, ?, ?, NULL)',
        [
          tokenKp.kid,
          JSON.stringify(sealJwk(theirs, 'oauth_signing_keys', tokenKp.kid, tokenKp.privateJwk)),
          JSON.stringify(tokenKp.publicJwk),
          now + 86_400_000,
        ],
      ],
    ]);

    // 3. The group's cell starts and publishes, pins and signs with its own keys only.
    cell = await startCellProcess({ dataDir, args: cellArgs });
    const published = ((await ok(cell.url, 'GET', '/.well-known/cell-keys.json')).keys as { kid: string }[]).map((k) => k.kid);
    assert.deepEqual(published, ownKids, 'no planted identity key is published');
    const jwks = ((await ok(cell.url, 'GET', '/oauth/jwks.json')).keys as { kid: string }[]).map((k) => k.kid);
    assert.ok(!jwks.includes(tokenKp.kid), 'the planted OAuth key is not in the JWKS');

    // A token signed by the planted OAuth key is refused; the same claims signed by the group verify.
    const client = await ok(cell.url, 'POST', `${A}/oauth/clients`, { token: owner, body: { name: 'c', scope: ['audit.read'] } });
    const basic = `Basic ${Buffer.from(`${encodeURIComponent(client.client_id)}:${encodeURIComponent(client.client_secret)}`).toString('base64')}`;
    const issued = await call(cell.url, 'POST', '/oauth/token', {
      form: { grant_type: 'client_credentials' },
      headers: { authorization: basic },
    });
    assert.equal(issued.status, 200, issued.text);
    const real = issued.body.access_token as string;
    assert.equal((await call(cell.url, 'GET', `${A}/whoami`, { token: real })).status, 200);
    const [head, body] = real
      .split('.')
      .slice(0, 2)
      .map((p) => JSON.parse(Buffer.from(p, 'base64url').toString()));
    const forgedToken = await new SignJWT(body)
      .setProtectedHeader({ ...head, kid: tokenKp.kid })
      .sign(await importJWK(tokenKp.privateJwk as JWK, 'EdDSA'));
    assert.equal((await call(cell.url, 'GET', `${A}/whoami`, { token: forgedToken })).status, 401, 'a token of the planted key');

    // 4. A real edge pins the group's anchor and loads the group's bundle; a bundle signed by a planted key is refused.
    const edgeDir = join(work, 'edge');
    const init = run(EDGE_BIN, ['init', '--data', edgeDir]);
    assert.equal(init.status, 0, init.err);
    const device = JSON.parse(init.out) as { device_id: string; public_jwk: JsonWebKey };
    const reg = await ok(cell.url, 'POST', `${A}/edge/devices`, { token: owner, body: { name: 'field', public_jwk: device.public_jwk } });
    assert.deepEqual(
      (reg.trust.keys as { kid: string }[]).map((k) => k.kid).sort(),
      [...ownKids].sort(),
      "the anchor holds the group's keys only",
    );
    writeFileSync(join(work, 'trust.json'), JSON.stringify(reg));
    assert.equal(run(EDGE_BIN, ['trust', '--data', edgeDir, '--file', join(work, 'trust.json')]).status, 0);
    const real1 = await fetch(`${cell.url}${A}/edge/key-bundles`, {
      method: 'POST',
      headers: { authorization: `Bearer ${owner}`, 'content-type': 'application/json' },
      body: JSON.stringify({ device_id: device.device_id }),
    });
    assert.equal(real1.status, 201);
    writeFileSync(join(work, 'real.bundle'), await real1.text());
    const loads = (bundle: string, secret: string) => run(EDGE_BIN, ['verify-key', '--data', edgeDir, '--bundle', bundle], secret);
    assert.equal(loads(join(work, 'real.bundle'), owner).status, 0, "the group's bundle loads and the owner's key verifies");

    for (const [what, kp] of [
      ['sealed under their key', sealedKp],
      ['in the clear', clearKp],
    ] as const) {
      const forged = await forgedKeyBundle({ issuer: reg.trust.cell_id, audience: device.device_id, key: kp, secret: ATTACKER_SECRET });
      const file = join(work, `forged-${kp.kid.slice(0, 6)}.bundle`);
      writeFileSync(file, forged);
      const r = loads(file, ATTACKER_SECRET);
      assert.notEqual(r.status, 0, `a bundle signed by a planted key (${what}) is refused: ${r.out}`);
      assert.doesNotMatch(r.out, /"allowed":true/);
    }
    assert.equal(loads(join(work, 'real.bundle'), owner).status, 0, "the group's bundle still loads: no rollback");
  } finally {
    await cell?.stop();
    cell?.cleanup();
    await engine.drop();
    rmSync(work, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  }
}

test('PostgreSQL: with the database URL and a key of their own, an attacker writes nothing, plants no trusted key, forges no bundle', {
  skip: missing || (TEST_ENGINE !== 'postgres' ? 'the PostgreSQL run covers it (CELL_TEST_STORE=postgres)' : (pgUnavailable() ?? false)),
  timeout: 240_000,
}, async () => {
  const attackerHome = mkdtempSync(join(tmpdir(), 'attacker-'));
  try {
    await scenario(
      async () => {
        const db = await pgDatabase();
        return {
          storeArgs: ['--store', db.url],
          tables: () => pgTables(db.url),
          async write(statements) {
            const c = new pg.Client({ connectionString: db.url });
            await c.connect();
            try {
              for (const [sql, params] of statements) {
                let i = 0;
                await c.query(
                  sql.replace(/\?/g, () => `$${++i}`),
                  params,
                );
              }
            } finally {
              await c.end();
            }
          },
          drop: () => db.drop(),
        };
      },
      // The attacker's own data directory: they have the database URL, not the cell's machine.
      () => attackerHome,
    );
  } finally {
    rmSync(attackerHome, { recursive: true, force: true });
  }
});

test('embedded store: with the data directory but not the group key file, an attacker writes nothing, plants no trusted key, forges no bundle', {
  skip: missing || (TEST_ENGINE !== 'embedded' ? 'the embedded run covers it' : false),
  timeout: 240_000,
}, async () => {
  await scenario(
    async (dataDir) => ({
      storeArgs: [],
      tables: () => embeddedTables(dataDir),
      async write(statements) {
        const store = await openStore({ engine: 'embedded', dir: join(dataDir, 'store') }, { migrations: MIGRATIONS });
        try {
          await store.write(async (tx) => {
            for (const [sql, params] of statements) await tx.run(sql, params as never[]);
          });
        } finally {
          await store.close();
        }
      },
      drop: async () => {},
    }),
    // The attacker has the cell's data directory itself (its store), but the group's key file is kept elsewhere.
    (dataDir) => dataDir,
  );
});
