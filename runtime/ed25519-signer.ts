/**
 * Ed25519 signing on Node's own crypto (OpenSSL, synchronous): the hot path of
 * every journal record a cell seals. Ed25519 signatures are deterministic
 * (RFC 8032), so these are the bytes core/crypto/ed25519.ts's WebCrypto path
 * gives, at about half its CPU (no job promise, no thread hop: ~45 µs against
 * ~90 µs a signature, measured on the 2-core machine the benches run on).
 */
import { createPrivateKey, createPublicKey, sign } from 'node:crypto';

/** A signing function for an Ed25519 private JWK (`kty OKP, crv Ed25519, x, d`); the key is imported once. */
export function ed25519Signer(privateJwk: JsonWebKey): (bytes: Uint8Array) => Uint8Array {
  let key: ReturnType<typeof createPrivateKey>;
  try {
    key = createPrivateKey({
      key: { kty: 'OKP', crv: 'Ed25519', x: String(privateJwk.x), d: String(privateJwk.d) },
      format: 'jwk',
    });
  } catch {
    throw new TypeError('ed25519Signer: not an Ed25519 private JWK');
  }
  // As the WebCrypto path: a JWK whose x is not d's public key is refused (its signatures would not verify against x).
  if (key.asymmetricKeyType !== 'ed25519' || createPublicKey(key).export({ format: 'jwk' }).x !== privateJwk.x)
    throw new TypeError('ed25519Signer: private JWK refused (x does not match d?)');
  return (bytes) => new Uint8Array(sign(null, bytes, key));
}
