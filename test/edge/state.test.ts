// The device's state.json (issue 36, low finding): an empty but valid state written by hand re-opened
// bundle rollback. The state is now sealed with the device key: the real program (dist/edge.mjs) refuses
// to start with a state it did not seal, so it cannot be made to forget the bundle versions it has seen;
// a state written by an older release is adopted explicitly (`edge state adopt`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { emptyDeviceState } from '../../bundles/accept.ts';
import { generateEd25519, signerFromJwk } from '../../bundles/codec.ts';
import { buildKeyBundle } from '../../bundles/key-bundle.ts';
import { readDevice, readState, sealState, updateState, writeState } from '../../edge/files.ts';
import { testDevice } from './_edge-fixtures.ts';
import { stopEdge } from './_edge-process.ts';
import { edgeListening } from './_listening.ts';

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

test('a bundle verify-key accepts while edge serve runs stays seen when serve writes its own copy of the state', { skip }, async () => {
  const d = await device();
  const serve = spawn(process.execPath, [EDGE, 'serve', '--data', d.dir, '--bundle', d.v1, '--port', '0'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  try {
    await edgeListening(serve, 60_000);
    // Another command accepts v2 meanwhile; serve's copy of the state has seen v1 only.
    assert.equal(verify(d.dir, d.v2).out?.reason, 'unknown_key', 'v2 is accepted');
  } finally {
    // Its stop writes its state: joined with the file's, not over it.
    await stopEdge(serve, 'SIGTERM');
  }
  try {
    assert.deepEqual(
      Object.values(readState(d.dir, readDevice(d.dir)).seen).map((s) => s.version),
      [2],
    );
    assert.equal(verify(d.dir, d.v1).out?.reason, 'version_rollback', 'v1 stays refused after serve wrote');
  } finally {
    rmSync(d.dir, { recursive: true, force: true });
  }
});

/** A data directory with a device key and its initial state, for the state lock's tests (no program needed). */
async function stateDir() {
  const dir = mkdtempSync(join(tmpdir(), 'edge-lock-'));
  const dev = await testDevice();
  writeFileSync(join(dir, 'device.json'), JSON.stringify(dev));
  writeState(dir, emptyDeviceState(dev.device_id), dev, { replace: true });
  return { dir, dev };
}

const addOne = (agent: string) => (s: ReturnType<typeof emptyDeviceState> | null) => ({
  ...s!,
  spent: { ...s!.spent, [agent]: (s!.spent?.[agent] ?? 0) + 1 },
});

test("two processes adding to an agent's spending at once lose none of it (the state lock)", async () => {
  const { dir, dev } = await stateDir();
  try {
    const adder = () =>
      new Promise<number | null>((res) =>
        spawn(process.execPath, ['--import', 'tsx', join(import.meta.dirname, '_state-adder.ts'), dir, 'agt_a', '40'], {
          stdio: 'inherit',
        }).once('exit', res),
      );
    assert.deepEqual(await Promise.all([adder(), adder()]), [0, 0]);
    assert.equal(readState(dir, dev).spent?.['agt_a'], 80);
    assert.equal(existsSync(join(dir, 'state.lock')), false, 'the lock is gone once the writers are');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a lock held by a live process makes a write wait and then fail; one left by a dead process is taken over', async () => {
  const { dir, dev } = await stateDir();
  const holder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)'], { stdio: 'ignore' });
  try {
    writeFileSync(join(dir, 'state.lock'), String(holder.pid));
    assert.throws(() => updateState(dir, dev, addOne('agt_a'), { lockWaitMs: 100 }), /held by another process .*pid \d+/);
    assert.equal(readState(dir, dev).spent, undefined, 'nothing was written');
    await stopEdge(holder, 'SIGKILL');
    updateState(dir, dev, addOne('agt_a'));
    assert.equal(readState(dir, dev).spent?.['agt_a'], 1, "the dead holder's lock was taken over");
    assert.equal(existsSync(join(dir, 'state.lock')), false);
    // A lock left empty (its holder killed as it created it) counts as held until it is two seconds old.
    writeFileSync(join(dir, 'state.lock'), '');
    assert.throws(() => updateState(dir, dev, addOne('agt_a'), { lockWaitMs: 100 }), /held by another process/);
    const past = new Date(Date.now() - 3000);
    utimesSync(join(dir, 'state.lock'), past, past);
    updateState(dir, dev, addOne('agt_a'));
    assert.equal(readState(dir, dev).spent?.['agt_a'], 2);
  } finally {
    holder.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a writer holding an older copy of the state joins it with the file instead of lowering it', async () => {
  const { dir, dev } = await stateDir();
  try {
    const old = readState(dir, dev);
    updateState(dir, dev, (s) => ({
      ...s!,
      clock_high_water: 500,
      spent: { agt_a: 7 },
      seen: { 'crew:cell-a': { version: 3, hash: 'h3', issued_at: 1, accepted_at: 2 } },
    }));
    const written = writeState(
      dir,
      {
        ...old,
        clock_high_water: 100,
        spent: { agt_a: 2, agt_b: 1 },
        seen: {
          'crew:cell-a': { version: 2, hash: 'h2', issued_at: 1, accepted_at: 1 },
          'api-key-records:cell-a': { version: 1, hash: 'k1', issued_at: 1, accepted_at: 1 },
        },
      },
      dev,
    );
    assert.deepEqual(readState(dir, dev), written);
    assert.equal(written.clock_high_water, 500);
    assert.deepEqual(written.spent, { agt_a: 7, agt_b: 1 });
    assert.deepEqual(Object.fromEntries(Object.entries(written.seen).map(([k, v]) => [k, v.version])), {
      'crew:cell-a': 3,
      'api-key-records:cell-a': 1,
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('edge init makes the data directory it is given, the state its first file', { skip }, () => {
  const root = mkdtempSync(join(tmpdir(), 'edge-init-'));
  try {
    const dir = join(root, 'a', 'device');
    const init = edge(['init', '--data', dir]);
    assert.equal(init.status, 0, init.stderr);
    const dev = readDevice(dir);
    assert.equal(readState(dir, dev).device_id, dev.device_id);
    assert.equal(existsSync(join(dir, 'state.lock')), false);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
