// `node dist/cell.mjs bundle keys|trust` on a stopped cell's data directory (needs `node scripts/build.mjs`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startCellProcess, CELL_BIN, groupSecretsKeyFile } from '../helpers/cell-process.ts';
import { testStore } from '../helpers/inproc.ts';
import { openKeyBundle } from '../../bundles/key-bundle.ts';
import { generateEd25519 } from '../../bundles/codec.ts';

test('bundle keys and bundle trust from a stopped cell', {
  skip: existsSync(CELL_BIN) ? false : 'dist/cell.mjs missing: run node scripts/build.mjs',
  timeout: 60_000,
}, async () => {
  // The cell's store, named here so the commands can be given it (a PostgreSQL database with CELL_TEST_STORE=postgres).
  const db = await testStore();
  // On PostgreSQL the cell's keys are sealed under the group's secrets key file: the commands are given it too.
  const store = db.url ? ['--store', db.url, '--secrets-key-file', groupSecretsKeyFile()] : [];
  const cell = await startCellProcess({ args: store });
  const out = mkdtempSync(join(tmpdir(), 'bundle-cli-'));
  try {
    const dev = await generateEd25519();
    const h = { authorization: `Bearer ${cell.adminKey}`, 'content-type': 'application/json' };
    const reg = await fetch(`${cell.url}/api/public/v1/admin/edge/devices`, {
      method: 'POST',
      headers: h,
      body: JSON.stringify({ name: 'd', public_jwk: dev.publicJwk }),
    });
    assert.equal(reg.status, 201);
    const key = (await (
      await fetch(`${cell.url}/api/public/v1/admin/api-keys`, {
        method: 'POST',
        headers: h,
        body: JSON.stringify({ name: 'k', scopes: ['edge.read'] }),
      })
    ).json()) as { secret: string };
    await cell.stop();

    const running = spawnSync(process.execPath, [CELL_BIN, 'bundle', 'keys', '--data', cell.dataDir, ...store, '--out', join(out, 'x')], {
      encoding: 'utf8',
    });
    assert.equal(running.status, 2, 'no --device: a usage error');
    assert.match(running.stderr, /^error: bundle keys needs --device ID\nusage: node dist\/cell\.mjs bundle keys /);
    const t = spawnSync(
      process.execPath,
      [CELL_BIN, 'bundle', 'trust', '--data', cell.dataDir, ...store, '--out', join(out, 'trust.json')],
      { encoding: 'utf8' },
    );
    assert.equal(t.status, 0, t.stderr);
    const k = spawnSync(
      process.execPath,
      [
        CELL_BIN,
        'bundle',
        'keys',
        '--data',
        cell.dataDir,
        ...store,
        // A kid is base64url and may begin with '-': the = form keeps it from being read as an option.
        `--device=${dev.kid}`,
        '--out',
        join(out, 'keys.bundle'),
        '--ttl-seconds',
        '3600',
      ],
      { encoding: 'utf8' },
    );
    assert.equal(k.status, 0, k.stderr);
    assert.match(k.stdout, /version 1/);
    const trust = JSON.parse(readFileSync(join(out, 'trust.json'), 'utf8'));
    const { opened, index } = await openKeyBundle(readFileSync(join(out, 'keys.bundle')), trust.keys);
    assert.equal(opened.payload.issuer, trust.cell_id);
    assert.equal(opened.payload.audience, dev.kid);
    const v = index.check(key.secret, { now: opened.payload.issued_at, ip: '127.0.0.1', region: 'local' });
    assert.ok(v.ok);
    const unknownDevice = spawnSync(
      process.execPath,
      [CELL_BIN, 'bundle', 'keys', '--data', cell.dataDir, ...store, '--device', 'B'.repeat(43), '--out', join(out, 'y')],
      { encoding: 'utf8' },
    );
    assert.equal(unknownDevice.status, 3, `a device the cell does not know is refused: ${unknownDevice.stderr}`);
    // A store URL of another scheme is refused before anything is opened.
    const badStore = spawnSync(
      process.execPath,
      [CELL_BIN, 'bundle', 'trust', '--data', cell.dataDir, '--store', 'mysql://db/x', '--out', join(out, 'z')],
      { encoding: 'utf8' },
    );
    assert.equal(badStore.status, 2);
    assert.match(badStore.stderr, /--store takes a postgres:\/\//);
    assert.equal(existsSync(join(out, 'z')), false);
  } finally {
    await cell.stop();
    cell.cleanup();
    await db.drop();
    rmSync(out, { recursive: true, force: true });
  }
});
