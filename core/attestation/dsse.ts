/**
 * DSSE, the Dead Simple Signing Envelope (github.com/secure-systems-lab/dsse,
 * protocol v1.0.0) that in-toto attestations travel in:
 *   { "payload": base64(body), "payloadType": type, "signatures": [{ "keyid", "sig": base64 }] }
 * Each signature is over PAE(type, body) =
 *   "DSSEv1" SP len(type) SP type SP len(body) SP body
 * (lengths in ASCII decimal bytes). Base64 is the standard, padded alphabet,
 * as securesystemslib and in-toto write it. The keyid is the kid of the cell's
 * (or device's) Ed25519 identity key, as /.well-known/cell-keys.json lists it.
 */
import { b64std, fromB64std } from '../base64.ts';
import { utf8 } from '../canonical.ts';
import { verifyEd25519 } from '../crypto/ed25519.ts';

/** The payload type of an in-toto Statement. */
export const IN_TOTO_PAYLOAD_TYPE = 'application/vnd.in-toto+json';

export interface DsseSignature {
  keyid: string;
  sig: string;
}

export interface DsseEnvelope {
  payload: string;
  payloadType: string;
  signatures: DsseSignature[];
}

/** What signs an envelope: a key id and an Ed25519 signing function. */
export interface EnvelopeSigner {
  kid: string;
  sign(bytes: Uint8Array): Promise<Uint8Array>;
}

/** The pre-authentication encoding of DSSE v1. */
export function pae(payloadType: string, body: Uint8Array): Uint8Array {
  const type = utf8(payloadType);
  const prefix = utf8(`DSSEv1 ${type.length} ${payloadType} ${body.length} `);
  const out = new Uint8Array(prefix.length + body.length);
  out.set(prefix, 0);
  out.set(body, prefix.length);
  return out;
}

/** Signs a payload into a DSSE envelope with one signature. */
export async function signDsse(body: Uint8Array, payloadType: string, signer: EnvelopeSigner): Promise<DsseEnvelope> {
  const sig = await signer.sign(pae(payloadType, body));
  return { payload: b64std(body), payloadType, signatures: [{ keyid: signer.kid, sig: b64std(sig) }] };
}

export type DsseVerdict = { ok: true; body: Uint8Array; payloadType: string; keyid: string } | { ok: false; reason: string };

/**
 * Verifies a DSSE envelope: at least one signature by a key `keys(keyid)` knows must verify over
 * the PAE of the payload (a signature of an unknown keyid is ignored; a known key's that does not
 * verify fails the envelope). Never throws on hostile input.
 */
export async function verifyDsse(env: unknown, keys: (kid: string) => JsonWebKey | undefined): Promise<DsseVerdict> {
  if (typeof env !== 'object' || env === null || Array.isArray(env)) return { ok: false, reason: 'dsse: not an envelope' };
  const e = env as Record<string, unknown>;
  if (typeof e['payload'] !== 'string' || typeof e['payloadType'] !== 'string' || !Array.isArray(e['signatures'])) {
    return { ok: false, reason: 'dsse: not an envelope' };
  }
  let body: Uint8Array;
  try {
    body = fromB64std(e['payload']);
  } catch {
    return { ok: false, reason: 'dsse: payload is not base64' };
  }
  const signed = pae(e['payloadType'], body);
  let good: string | null = null;
  for (const s of e['signatures'] as unknown[]) {
    if (typeof s !== 'object' || s === null) return { ok: false, reason: 'dsse: malformed signature' };
    const { keyid, sig } = s as Record<string, unknown>;
    if (typeof keyid !== 'string' || typeof sig !== 'string') return { ok: false, reason: 'dsse: malformed signature' };
    const jwk = keys(keyid);
    if (jwk === undefined) continue;
    let raw: Uint8Array;
    try {
      raw = fromB64std(sig);
    } catch {
      return { ok: false, reason: 'dsse: malformed signature' };
    }
    if (!(await verifyEd25519(jwk, signed, raw))) return { ok: false, reason: `dsse: the signature of ${keyid} does not verify` };
    good ??= keyid;
  }
  if (good === null) return { ok: false, reason: 'dsse: no signature by a trusted key' };
  return { ok: true, body, payloadType: e['payloadType'], keyid: good };
}
