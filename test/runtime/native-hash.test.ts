// node:crypto's SHA-256 (runtime/native-hash.ts) gives the same hashes as core's pure-JS default.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { installNativeSha256, nativeSha256Hex } from '../../runtime/native-hash.ts';
import { contentHash, sha256Hex } from '../../core/canonical.ts';

const pure = (d: Uint8Array | string) => bytesToHex(sha256(typeof d === 'string' ? new TextEncoder().encode(d) : d));

test('FIPS 180-4 known answers', () => {
  assert.equal(nativeSha256Hex(''), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  assert.equal(nativeSha256Hex('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  assert.equal(
    nativeSha256Hex('abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq'),
    '248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1',
  );
});

test('equal to the pure-JS SHA-256 on strings (UTF-8, lone surrogates included) and bytes', () => {
  const samples = ['ok', 'é中😀', '\uD800', 'a\uDC00b', 'x'.repeat(1000), JSON.stringify({ a: [1, 'two', null] })];
  for (const s of samples) assert.equal(nativeSha256Hex(s), pure(s), JSON.stringify(s));
  let seed = 7;
  for (let n = 0; n < 200; n++) {
    const b = new Uint8Array(n * 3);
    for (let i = 0; i < b.length; i++) {
      seed = (seed * 1103515245 + 12345) >>> 0;
      b[i] = seed >>> 24;
    }
    assert.equal(nativeSha256Hex(b), pure(b));
  }
});

test('installed behind core: sha256Hex and contentHash keep their values', () => {
  installNativeSha256();
  assert.equal(sha256Hex('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  assert.equal(contentHash({ b: 1, a: 'é' }), 'sha256:' + pure('{"a":"é","b":1}'));
});
