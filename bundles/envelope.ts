/**
 * The signed envelope of every hand-carried artifact (key bundle, crew
 * bundle, model manifest, journal export).
 *
 * File layout (UTF-8 text, media type `application/vnd.agent-cell.signed`):
 *   line 1:  RFC 8785 canonical JSON header { format: 'agent-cell-signed/1', kid, signature }
 *   rest:    RFC 8785 canonical JSON of the artifact (the payload), no trailing newline
 * `signature` is Ed25519 (RFC 8032) over exactly the payload bytes, base64url.
 * A verifier checks the signature over the bytes it then parses, once, without
 * re-canonicalising or unescaping: a 100,000-key bundle is verified in one
 * pass. The payload names its own `kid`, which must equal the header's.
 * The artifact's identity (`hash`) is SHA-256 over `kid.signature`: Ed25519
 * signatures are deterministic, so equal identities mean equal signed bytes
 * and different bytes (same version) show up as a different identity.
 */
import { ServiceError } from '../core/errors.ts';
import type { Reason } from '../core/reasons.ts';
import { ACCEPTED_FORMAT_VERSIONS, ENVELOPE_FORMAT, BUNDLE_TYPES, type BundleType } from './format.ts';
import { b64url, canonicalJson, fromB64url, fromUtf8, sha256Hex, utf8, verifyEd25519, type Signer, type TrustedKey } from './codec.ts';

/** Fields every artifact payload carries. */
export interface PayloadHeader {
  format_version: number;
  type: BundleType;
  /** Issuing cell id (or publisher id for model manifests, device id for journals). */
  issuer: string;
  /** Id of the signing key. */
  kid: string;
  /** Device the artifact is issued to; null when it is for any device (model manifests). */
  audience: string | null;
  /** Monotonically increasing per issuer and type. */
  version: number;
  issued_at: number;
  expires_at: number | null;
}

export interface OpenedEnvelope<P extends PayloadHeader = PayloadHeader> {
  payload: P;
  /** The artifact's identity: SHA-256 (hex) of `kid.signature` (see the module header). */
  hash: string;
  /** Size of the signed payload in bytes. */
  bytes: number;
}

/** Refusal of an artifact; `reason` is the stable sub-code in details.reason. */
export function refused(
  reason: Reason,
  message: string,
  code: 'invalid_request' | 'forbidden' | 'conflict' = 'forbidden',
  extra: Record<string, unknown> = {},
): ServiceError {
  return new ServiceError(code, message, { details: { reason, ...extra } });
}

/** Signs a payload object into envelope text. The payload's kid must be the signer's. */
export async function sealEnvelope(payload: PayloadHeader & Record<string, unknown>, signer: Signer): Promise<string> {
  if (payload.kid !== signer.kid) throw new TypeError('payload kid must be the signer kid');
  const text = canonicalJson(payload);
  const sig = await signer.sign(utf8(text));
  return canonicalJson({ format: ENVELOPE_FORMAT, kid: signer.kid, signature: b64url(sig) }) + '\n' + text;
}

/** The two parts of envelope text (tools and tests); null when it has no header line. */
export function splitEnvelope(text: string): { header: Record<string, unknown>; payload: string } | null {
  const nl = text.indexOf('\n');
  if (nl < 0) return null;
  try {
    const header = JSON.parse(text.slice(0, nl)) as unknown;
    return isObject(header) ? { header, payload: text.slice(nl + 1) } : null;
  } catch {
    return null;
  }
}

/** The longest header line a verifier reads: a header is a format, a kid and a signature. */
export const MAX_HEADER = 4096;

/** What the header line of an artifact names: its signing key (trusted) and signature, and where the payload starts. */
export interface ArtifactHeader {
  kid: string;
  key: TrustedKey;
  signature: string;
  /** Offset of the payload: the byte after the header's newline. */
  payloadStart: number;
}

/**
 * Judges the header line of an artifact from its first bytes (MAX_HEADER are enough): the envelope
 * format and a trusted signing key. A reader of a large file calls it on the first bytes before it
 * reads the rest, so a file signed by a key nobody trusts costs one small read.
 */
export function openHeader(first: Uint8Array, trusted: readonly TrustedKey[]): ArtifactHeader {
  const nl = first.subarray(0, MAX_HEADER).indexOf(0x0a);
  if (nl < 0) throw refused('malformed', 'the file is not a signed artifact (no header line)', 'invalid_request');
  let env: unknown;
  try {
    env = JSON.parse(fromUtf8(first.subarray(0, nl)));
  } catch {
    throw refused('malformed', 'the file is not a signed artifact (header is not JSON)', 'invalid_request');
  }
  if (!isObject(env) || typeof env['format'] !== 'string' || typeof env['kid'] !== 'string' || typeof env['signature'] !== 'string') {
    throw refused('malformed', 'the file is not a signed artifact', 'invalid_request');
  }
  if (env['format'] !== ENVELOPE_FORMAT) {
    throw refused('unsupported_format', `unsupported envelope format ${JSON.stringify(env['format']).slice(0, 60)}`, 'invalid_request');
  }
  const kid = env['kid'];
  const key = trusted.find((k) => k.kid === kid);
  if (!key) throw refused('untrusted_issuer', 'the artifact is signed by a key this verifier does not trust', 'forbidden', { kid });
  return { kid, key, signature: env['signature'], payloadStart: nl + 1 };
}

/**
 * Parses and verifies envelope text (or the file's bytes) against trusted
 * keys: format, a trusted kid, the signature, then the header fields of the
 * payload. Everything else about the payload is the caller's to check.
 */
export async function openEnvelope(
  input: string | Uint8Array,
  trusted: readonly TrustedKey[],
  expectType: BundleType,
): Promise<OpenedEnvelope> {
  const bytes = typeof input === 'string' ? utf8(input) : input;
  const { kid, key, signature, payloadStart } = openHeader(bytes, trusted);
  const sig = fromB64url(signature);
  const payloadBytes = bytes.subarray(payloadStart);
  // The signature before the payload is parsed: an unsigned body is never read as JSON.
  if (sig?.length !== 64 || !(await verifyEd25519(key.jwk, sig, payloadBytes))) {
    throw refused('bad_signature', 'the artifact signature does not verify', 'forbidden');
  }
  let payload: unknown;
  try {
    payload = JSON.parse(fromUtf8(payloadBytes));
  } catch {
    throw refused('malformed', 'the signed payload is not JSON', 'invalid_request');
  }
  checkHeader(payload, kid, expectType);
  return { payload, hash: await sha256Hex(`${kid}.${signature}`), bytes: payloadBytes.length };
}

function checkHeader(p: unknown, kid: string, expectType: BundleType): asserts p is PayloadHeader {
  if (!isObject(p)) throw refused('malformed', 'the signed payload is not an object', 'invalid_request');
  if (typeof p['format_version'] !== 'number' || !ACCEPTED_FORMAT_VERSIONS[expectType].includes(p['format_version'])) {
    throw refused('unsupported_format', `unsupported payload format_version ${String(p['format_version'])}`, 'invalid_request');
  }
  if (typeof p['type'] !== 'string' || !(BUNDLE_TYPES as readonly string[]).includes(p['type'])) {
    throw refused('malformed', 'unknown artifact type', 'invalid_request');
  }
  if (p['type'] !== expectType) {
    throw refused('wrong_type', `expected a ${expectType} artifact, got ${String(p['type'])}`, 'invalid_request');
  }
  if (p['kid'] !== kid) throw refused('malformed', 'payload kid differs from the envelope kid', 'invalid_request');
  if (typeof p['issuer'] !== 'string' || p['issuer'] === '') throw refused('malformed', 'payload issuer missing', 'invalid_request');
  if (!(p['audience'] === null || typeof p['audience'] === 'string'))
    throw refused('malformed', 'payload audience malformed', 'invalid_request');
  if (!Number.isSafeInteger(p['version']) || (p['version'] as number) < 1)
    throw refused('malformed', 'payload version must be a positive integer', 'invalid_request');
  if (!Number.isSafeInteger(p['issued_at'])) throw refused('malformed', 'payload issued_at malformed', 'invalid_request');
  if (!(p['expires_at'] === null || Number.isSafeInteger(p['expires_at'])))
    throw refused('malformed', 'payload expires_at malformed', 'invalid_request');
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
