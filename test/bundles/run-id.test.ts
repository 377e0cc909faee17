// Run ids of offline runs are derived from the device id and a nonce (bundles/run-id.ts): the recorded
// value pins the derivation (ids already in journals must keep verifying); the cell-side attack is in
// test/edge/cell-routes.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { edgeRunId, newEdgeRun } from '../../bundles/run-id.ts';

const DEVICE = '_VUrItvHr1FtK2abzLtyqfbUxGycwQs4pAcyyVxj0iM';
const NONCE = '00112233445566778899aabbccddeeff';

test('the run id is run_ + 80 bits of SHA-256 over the domain, the device id and the nonce', async () => {
  // printf 'agent-cell/edge-run/1\n<device>\n<nonce>' | sha256sum -> eea2e0fc1d4f460212ab…
  assert.equal(await edgeRunId(DEVICE, NONCE), 'run_eea2e0fc1d4f460212ab');
  assert.notEqual(await edgeRunId(`${DEVICE.slice(0, -1)}N`, NONCE), 'run_eea2e0fc1d4f460212ab', 'another device, another id');
});

test('a fresh run: a 128-bit nonce and the id derived from it', async () => {
  const a = await newEdgeRun(DEVICE);
  const b = await newEdgeRun(DEVICE);
  assert.match(a.run_nonce, /^[0-9a-f]{32}$/);
  assert.match(a.run_id, /^run_[0-9a-f]{20}$/);
  assert.equal(await edgeRunId(DEVICE, a.run_nonce), a.run_id);
  assert.notEqual(a.run_id, b.run_id);
});

test('a nonce that is not 32 lower-case hex digits is a programming error', async () => {
  for (const n of ['', 'F'.repeat(32), '0'.repeat(31), '0'.repeat(33)]) {
    await assert.rejects(edgeRunId(DEVICE, n), TypeError, n);
  }
});
