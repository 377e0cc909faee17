// Shared fixtures for the bundle tests: key pairs and a frozen clock.
import { generateEd25519, signerFromJwk, type Signer, type TrustedKey } from '../../bundles/codec.ts';

export const T0 = Date.UTC(2026, 0, 1);

export async function keyPair(): Promise<{ signer: Signer; trusted: TrustedKey; privateJwk: JsonWebKey }> {
  const k = await generateEd25519();
  return { signer: signerFromJwk(k.kid, k.privateJwk), trusted: { kid: k.kid, jwk: k.publicJwk }, privateJwk: k.privateJwk };
}
