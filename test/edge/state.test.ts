// The device's state.json (issue 36, low finding): an empty but valid state written by hand re-opened
// bundle rollback. The state is now sealed with the device key: the real program (dist/edge.mjs) refuses
// to start with a state it did not seal, so it cannot be made to forget the bundle versions it has seen;
// a state written by an older release is adopted explicitly (`edge state adopt`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { emptyDeviceState } from '../../bundles/accept.ts';
import { generateEd25519, signerFromJwk } from '../../bundles/codec.ts';
import { buildKeyBundle } from '../../bundles/key-bundle.ts';
import { readDevice, readState, sealState } from '../../edge/files.ts';

const EDGE = 'dist/edge.mjs';
const skip = existsSync(EDGE) ? false : 'dist/edge.mjs missing: run node scripts/build.mjs';
const edge = (args: string[], input = '') => spawnSync(process.execPath, [EDGE, ...args], { encoding: 'utf8', input });

/** An initialised device (`edge init`) trusting a cell of our own, and that cell's key bundles v1 and v2 for it. */
async function device() {
  const dir = mkdtempSync(join(tmpdir(), 'edge-state-'));
  const init = edge(['init', '--data', dir]);
  assert.equal(init.status, 0, init.stderr);
  const deviceId = JSON.parse(init.stdout).device_id as string;
  const cell = await generateEd25519();
  writeFileSync(join(dir, 'anchor.json'), JSON.stringify({ cell_id: 'cell-a', keys: [{ kid: cell.kid, jwk: cell.publicJwk }] }));
  const trust = edge(['trust', '--data', dir, '--file', join(dir, 'anchor.json')]);
  assert.equal(trust.status, 0, trust.stderr);
  const now = Date.now();
  const bundle = async (version: number) => {
    const f = join(dir, `keys.v${version}`);
    const text = await buildKeyBundle({
      issuer: 'cell-a',
      signer: signerFromJwk(cell.kid, cell.privateJwk),
      audience: deviceId,
      version,
      issuedAt: now - 1000,
      expiresAt: now + 3_600_000,
      records: [],
      tombstones: [],
    });
    writeFileSync(f, text);
    return f;
  };
  return { dir, deviceId, v1: await bundle(1), v2: await bundle(2) };
}

/** `verify-key` with a bundle: what the device says of an unknown key, or why it did not start. */
function verify(dir: string, bundle: string) {
  const r = edge(['verify-key', '--data', dir, '--bundle', bundle], `svck_live_${'A'.repeat(43)}`);
  return { status: r.status, out: r.stdout.trim() ? (JSON.parse(r.stdout) as { reason?: string }) : null, err: r.stderr };
}

test('an empty or reset state.json does not make the device accept an older bundle again', { skip }, async () => {
  const d = await device();
  try {
    assert.equal(verify(d.dir, d.v2).out?.reason, 'unknown_key', 'v2 is accepted (the key is simply unknown)');
    assert.equal(verify(d.dir, d.v1).out?.reason, 'version_rollback');
    const sealed = readFileSync(join(d.dir, 'state.json'), 'utf8');

    // An empty, valid state written by hand (the format an older release wrote): refused, not believed.
    writeFileSync(join(d.dir, 'state.json'), JSON.stringify(emptyDeviceState(d.deviceId)));
    let r = verify(d.dir, d.v1);
    assert.notEqual(r.status, 0);
    assert.equal(r.out, null, 'the device did not judge anything');
    assert.match(r.err, /not sealed by this device/);
    // The same empty state in the sealed format, with a signature that is not the device's.
    const other = await generateEd25519();
    const forged = sealState(emptyDeviceState(d.deviceId), {
      format_version: 1,
      device_id: d.deviceId,
      public_jwk: other.publicJwk,
      private_jwk: other.privateJwk,
    });
    writeFileSync(join(d.dir, 'state.json'), forged);
    r = verify(d.dir, d.v1);
    assert.notEqual(r.status, 0);
    assert.match(r.err, /not sealed by this device's key/);
    // A sealed state edited afterwards (its versions lowered): refused too.
    const edited = JSON.parse(sealed) as { state: { seen: Record<string, { version: number }> } };
    for (const s of Object.values(edited.state.seen)) s.version = 1;
    writeFileSync(join(d.dir, 'state.json'), JSON.stringify(edited));
    assert.match(verify(d.dir, d.v1).err, /not sealed by this device's key/);

    // The device's own state: the rollback is refused as before.
    writeFileSync(join(d.dir, 'state.json'), sealed);
    assert.equal(verify(d.dir, d.v1).out?.reason, 'version_rollback');
  } finally {
    rmSync(d.dir, { recursive: true, force: true });
  }
});

test("a state written by an older release is adopted explicitly, as it is; another device's is refused", { skip }, async () => {
  const d = await device();
  try {
    assert.equal(verify(d.dir, d.v2).out?.reason, 'unknown_key');
    const dev = readDevice(d.dir);
    const seen = readState(d.dir, dev);
    // What an older release wrote: the same state, unsealed.
    writeFileSync(join(d.dir, 'state.json'), JSON.stringify(seen, null, 1));
    const refused = verify(d.dir, d.v2);
    assert.notEqual(refused.status, 0);
    assert.match(refused.err, /edge state adopt/);
    const adopt = edge(['state', 'adopt', '--data', d.dir]);
    assert.equal(adopt.status, 0, adopt.stderr);
    assert.match(adopt.stdout, /api-key-records:cell-a v2/);
    assert.deepEqual(readState(d.dir, dev).seen, seen.seen);
    assert.equal(verify(d.dir, d.v1).out?.reason, 'version_rollback', 'what it had seen still holds');
    assert.equal(edge(['state', 'adopt', '--data', d.dir]).status, 3, 'a sealed state is not adopted again (refused: exit status 3)');
    // The kv entries an older release wrote are sealed by the same command, beside a sealed state.
    writeFileSync(
      join(d.dir, 'kv.json'),
      JSON.stringify({ format_version: 1, workspaces: { ws: { k: { value: 1, classification: 0, compartments: [], at: 0, by: 'a' } } } }),
    );
    const kv = edge(['state', 'adopt', '--data', d.dir]);
    assert.equal(kv.status, 0, kv.stderr);
    assert.match(kv.stdout, /sealed the kv entries of .*: 1 entry/);
    assert.equal(JSON.parse(readFileSync(join(d.dir, 'kv.json'), 'utf8')).format_version, 2);
    assert.equal(edge(['state', 'adopt', '--data', d.dir]).status, 3, 'nothing left to adopt');

    // Another device's state (sealed by that device) is not this device's.
    const other = await device();
    try {
      writeFileSync(join(d.dir, 'state.json'), readFileSync(join(other.dir, 'state.json')));
      assert.match(verify(d.dir, d.v2).err, /unreadable|not sealed/);
    } finally {
      rmSync(other.dir, { recursive: true, force: true });
    }
  } finally {
    rmSync(d.dir, { recursive: true, force: true });
  }
});
