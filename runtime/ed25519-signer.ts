/**
 * Ed25519 signing on Node's own crypto (OpenSSL, synchronous): the hot path of
 * every journal record a cell seals. Ed25519 signatures are deterministic
 * (RFC 8032), so these are the bytes core/crypto/ed25519.ts's WebCrypto path
 * gives, at about half its CPU (no job promise, no thread hop: ~45 µs against
 * ~90 µs a signature, measured on the 2-core machine the benches run on).
 */
import { createPrivateKey, createPublicKey, sign } from 'node:crypto';

/** The PKCS #8 prefix of an Ed25519 private key (RFC 8410 §7): the 32-byte seed follows it. */
const PKCS8_ED25519_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

/** A signing function for an Ed25519 private JWK (`kty OKP, crv Ed25519, x, d`); the key is imported once. */
export function ed25519Signer(privateJwk: JsonWebKey): (bytes: Uint8Array) => Uint8Array {
  let key: ReturnType<typeof createPrivateKey>;
  // The key is imported from d alone (PKCS #8), then x is compared with d's public key here: Node 24
  // refuses a mismatched JWK at import, Node 20 accepts it, and the answer must not depend on which.
  const seed = typeof privateJwk.d === 'string' ? Buffer.from(privateJwk.d, 'base64url') : undefined;
  if (privateJwk.kty !== 'OKP' || privateJwk.crv !== 'Ed25519' || typeof privateJwk.x !== 'string' || seed?.length !== 32)
    throw new TypeError('ed25519Signer: not an Ed25519 private JWK');
  try {
    key = createPrivateKey({ key: Buffer.concat([PKCS8_ED25519_PREFIX, seed]), format: 'der', type: 'pkcs8' });
  } catch {
    throw new TypeError('ed25519Signer: not an Ed25519 private JWK');
  }
  // As the WebCrypto path: a JWK whose x is not d's public key is refused (its signatures would not verify against x).
  if (key.asymmetricKeyType !== 'ed25519' || createPublicKey(key).export({ format: 'jwk' }).x !== privateJwk.x)
    throw new TypeError('ed25519Signer: private JWK refused (x does not match d?)');
  return (bytes) => new Uint8Array(sign(null, bytes, key));
}
