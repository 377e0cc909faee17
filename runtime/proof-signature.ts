/**
 * node:crypto's check of DPoP proof signatures (core/tokens/dpop.ts
 * `ProofSignatureCheck`), for both programs' proof key caches: a key is
 * imported once as a KeyObject and each signature checked synchronously,
 * where Web Crypto's check is a job and a promise (about 8 µs more a proof
 * on this project's machine, bench/RESULTS.md "Issue 40: the edge's DPoP").
 * The same OpenSSL checks the same signatures: EdDSA over Ed25519, ECDSA as
 * JWS sends it (r and s, IEEE P1363), RSASSA-PKCS1-v1_5. A signature text of
 * a length base64url cannot have (4n + 1) is refused, as jose refuses it.
 */
import { createPublicKey, verify, type JsonWebKey, type KeyObject } from 'node:crypto';
import type { ProofSignatureCheck } from '../core/tokens/dpop.ts';

const PARAMS: Record<string, { digest: string | null; p1363?: true }> = {
  EdDSA: { digest: null },
  Ed25519: { digest: null },
  ES256: { digest: 'sha256', p1363: true },
  ES384: { digest: 'sha384', p1363: true },
  RS256: { digest: 'sha256' },
};

export const nodeProofSignatures: ProofSignatureCheck = (alg, jwk) => {
  const p = PARAMS[alg];
  if (!p) return null;
  let key: KeyObject;
  try {
    key = createPublicKey({ key: jwk as JsonWebKey, format: 'jwk' });
  } catch {
    return null; // Web Crypto, which took this key, checks its signatures
  }
  const k = p.p1363 ? { key, dsaEncoding: 'ieee-p1363' as const } : key;
  return (input, signature) =>
    signature.length % 4 !== 1 && verify(p.digest, Buffer.from(input, 'latin1'), k, Buffer.from(signature, 'base64url'));
};
