import { test } from 'node:test';
import assert from 'node:assert/strict';
import { nativeSha256Hex as nodeSha256Hex } from '../../runtime/native-hash.ts';
import { hashSecret } from '../../core/apikey/hash.ts';

test("the edge's native secret hash is exactly core's hashSecret", () => {
  const inputs = ['', 'svck_live_' + 'A'.repeat(43), 'svck_live_ÿ€𝄞', 'x'.repeat(1000)];
  for (let i = 0; i < 200; i++) inputs.push('svck_live_' + Math.random().toString(36).repeat(4).slice(0, 43));
  for (const s of inputs) assert.equal(nodeSha256Hex(s), hashSecret(s), s);
  // FIPS 180-2 "abc" vector.
  assert.equal(nodeSha256Hex('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
});
