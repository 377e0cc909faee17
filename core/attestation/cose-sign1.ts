/**
 * A SCITT signed statement (draft-ietf-scitt-architecture): a COSE_Sign1
 * (RFC 9052, tag 18) whose protected header carries the registered headers
 * the draft requires of an issuer:
 *   1  alg           -8 (EdDSA, Ed25519)
 *   3  content type  the payload's media type (the in-toto Statement's)
 *   4  kid           the issuer key's kid (UTF-8 bytes), as cell-keys.json lists it
 *   15 CWT claims    (RFC 9597) { 1 iss: the issuer, 2 sub: the statement's subject, 6 iat }
 * an empty unprotected header, the payload attached, and the Ed25519
 * signature over Sig_structure ["Signature1", protected, h'', payload].
 */
import { utf8 } from '../canonical.ts';
import { verifyEd25519 } from '../crypto/ed25519.ts';
import { CborTag, cborDecode, cborEncode, type CborValue } from './cbor.ts';
import type { EnvelopeSigner } from './dsse.ts';

export const COSE_SIGN1_TAG = 18;
export const COSE_ALG_EDDSA = -8;
const H_ALG = 1;
const H_CTY = 3;
const H_KID = 4;
const H_CWT = 15;
const CWT_ISS = 1;
const CWT_SUB = 2;
const CWT_IAT = 6;

/** What a signed statement says about itself (its protected header). */
export interface StatementHeader {
  contentType: string;
  /** The issuer (CWT `iss`). */
  iss: string;
  /** The statement's subject (CWT `sub`). */
  sub: string;
  /** Issued at, seconds since the epoch (CWT `iat`). */
  iat: number;
}

function sigStructure(protectedBytes: Uint8Array, payload: Uint8Array): Uint8Array {
  return cborEncode(['Signature1', protectedBytes, new Uint8Array(0), payload]);
}

/** Signs `payload` as a COSE_Sign1 signed statement (tagged, deterministic CBOR). */
export async function signStatement(payload: Uint8Array, h: StatementHeader, signer: EnvelopeSigner): Promise<Uint8Array> {
  const claims = new Map<CborValue, CborValue>([
    [CWT_ISS, h.iss],
    [CWT_SUB, h.sub],
    [CWT_IAT, h.iat],
  ]);
  const prot = cborEncode(
    new Map<CborValue, CborValue>([
      [H_ALG, COSE_ALG_EDDSA],
      [H_CTY, h.contentType],
      [H_KID, utf8(signer.kid)],
      [H_CWT, claims],
    ]),
  );
  const sig = await signer.sign(sigStructure(prot, payload));
  return cborEncode(new CborTag(COSE_SIGN1_TAG, [prot, new Map(), payload, sig]));
}

export type StatementVerdict = { ok: true; payload: Uint8Array; header: StatementHeader; kid: string } | { ok: false; reason: string };

/**
 * Verifies a COSE_Sign1 signed statement: tag 18, the four registered headers present and well
 * typed, alg EdDSA, a kid `keys` knows, and the signature. Never throws on hostile input.
 */
export async function verifyStatement(bytes: Uint8Array, keys: (kid: string) => JsonWebKey | undefined): Promise<StatementVerdict> {
  const top = cborDecode(bytes);
  if (!(top instanceof CborTag) || top.tag !== COSE_SIGN1_TAG) return { ok: false, reason: 'cose: not a tagged COSE_Sign1' };
  const a = top.value;
  if (!Array.isArray(a) || a.length !== 4) return { ok: false, reason: 'cose: not a COSE_Sign1' };
  const [prot, unprot, payload, sig] = a as [CborValue, CborValue, CborValue, CborValue];
  if (!(prot instanceof Uint8Array) || !(unprot instanceof Map) || !(payload instanceof Uint8Array) || !(sig instanceof Uint8Array)) {
    return { ok: false, reason: 'cose: not a COSE_Sign1 with an attached payload' };
  }
  const h = cborDecode(prot);
  if (!(h instanceof Map)) return { ok: false, reason: 'cose: protected header malformed' };
  if (h.get(H_ALG) !== COSE_ALG_EDDSA) return { ok: false, reason: 'cose: alg is not EdDSA' };
  const cty = h.get(H_CTY);
  const kidBytes = h.get(H_KID);
  const cwt = h.get(H_CWT);
  if (typeof cty !== 'string' || !(kidBytes instanceof Uint8Array) || !(cwt instanceof Map)) {
    return { ok: false, reason: 'cose: content type, kid and CWT claims are required' };
  }
  const iss = cwt.get(CWT_ISS);
  const sub = cwt.get(CWT_SUB);
  const iat = cwt.get(CWT_IAT);
  if (typeof iss !== 'string' || typeof sub !== 'string' || typeof iat !== 'number') {
    return { ok: false, reason: 'cose: CWT claims need iss, sub and iat' };
  }
  let kid: string;
  try {
    kid = new TextDecoder('utf-8', { fatal: true }).decode(kidBytes);
  } catch {
    return { ok: false, reason: 'cose: kid malformed' };
  }
  const jwk = keys(kid);
  if (jwk === undefined) return { ok: false, reason: `cose: unknown key ${kid}` };
  if (!(await verifyEd25519(jwk, sigStructure(prot, payload), sig))) return { ok: false, reason: 'cose: the signature does not verify' };
  return { ok: true, payload, header: { contentType: cty, iss, sub, iat }, kid };
}
