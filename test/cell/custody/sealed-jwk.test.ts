// Which stored key pairs are the group's (cell/custody/sealed-jwk.ts trustedPrivateJwk): a row whose private half
// opens under the group's key and is the half of the row's public key. Every other row (sealed under another key,
// in the clear, its public half swapped for another, moved to another kid or table) is not, and is neither
// published nor used (issue 36, finding 4).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { generateEd25519 } from '../../../core/crypto/ed25519.ts';
import { sealJwk, trustedPrivateJwk } from '../../../cell/custody/sealed-jwk.ts';

test("a stored key pair is the group's only when its private half opens under the group's key and matches its public half", async () => {
  const group = randomBytes(32);
  const theirs = randomBytes(32);
  const k = await generateEd25519();
  const other = await generateEd25519();
  const row = (private_jwk: unknown, public_jwk: JsonWebKey = k.publicJwk, kid = k.kid) => ({ kid, private_jwk, public_jwk });

  const ours = trustedPrivateJwk(group, 'cell_keys', row(sealJwk(group, 'cell_keys', k.kid, k.privateJwk)));
  assert.equal(ours?.d, k.privateJwk.d, 'sealed under the group key: the private half');

  assert.equal(trustedPrivateJwk(group, 'cell_keys', row(sealJwk(theirs, 'cell_keys', k.kid, k.privateJwk))), null, 'another key');
  assert.equal(trustedPrivateJwk(group, 'cell_keys', row(k.privateJwk)), null, 'in the clear');
  assert.equal(
    trustedPrivateJwk(group, 'cell_keys', row(sealJwk(group, 'cell_keys', k.kid, k.privateJwk), other.publicJwk)),
    null,
    'its public half swapped for another key',
  );
  assert.equal(
    trustedPrivateJwk(group, 'oauth_signing_keys', row(sealJwk(group, 'cell_keys', k.kid, k.privateJwk))),
    null,
    'moved to another table',
  );
  assert.equal(
    trustedPrivateJwk(group, 'cell_keys', row(sealJwk(group, 'cell_keys', k.kid, k.privateJwk), k.publicJwk, other.kid)),
    null,
    'moved to another kid',
  );
  assert.equal(trustedPrivateJwk(group, 'cell_keys', row({ sealed: 1, kid: k.kid, data: 'not base64 of anything' })), null, 'garbage');
  assert.equal(trustedPrivateJwk(group, 'cell_keys', row(null)), null);
});
