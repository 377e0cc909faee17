/**
 * Signed notes as C2SP specifies them (c2sp.org/signed-note): a UTF-8 text
 * that ends with a newline, a blank line, then one line per signature,
 *   "— <key name> <base64(key hash || signature)>\n"
 * (U+2014 EM DASH, a space). For an Ed25519 key (signature type 0x01) the key
 * hash is the first four bytes of SHA-256(key name || 0x0A || 0x01 || the
 * 32-byte public key) and the signature is Ed25519 over the text alone. A
 * verifier knows keys by name and hash; a line of a key it does not know is
 * ignored, a known key's line that does not verify fails the note.
 *
 * The log's checkpoints (checkpoint.ts) are such notes, signed with the
 * identity key of the cell (or the edge device) that serves them.
 */
import { sha256 } from '@noble/hashes/sha2.js';
import { fromB64std, b64std } from '../base64.ts';
import { fromB64url, utf8 } from '../canonical.ts';
import { verifyEd25519 } from '../crypto/ed25519.ts';

/** Signature type of Ed25519 keys in signed notes. */
export const NOTE_ED25519 = 0x01;
const DASH = '\u2014 ';
const MAX_SIGNATURES = 100;

/** A key that signs notes: its name (a checkpoint's origin), its public JWK and the signing function. */
export interface NoteSigner {
  name: string;
  publicJwk: JsonWebKey;
  sign(bytes: Uint8Array): Promise<Uint8Array>;
}

/** A key a verifier trusts: its name and public Ed25519 JWK (and, for the caller, an id such as a kid). */
export interface NoteVerifier {
  name: string;
  publicJwk: JsonWebKey;
  kid?: string;
}

/** A verified note: its text and the verifiers whose signatures verified. */
export interface VerifiedNote {
  text: string;
  signers: NoteVerifier[];
}

function checkName(name: string): void {
  if (typeof name !== 'string' || name === '' || /[\s+]/u.test(name)) {
    throw new TypeError('a note key name is non-empty, without spaces and without +');
  }
}

/** The raw 32-byte Ed25519 public key of a JWK. */
export function rawEd25519(jwk: JsonWebKey): Uint8Array {
  if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') throw new TypeError('not an Ed25519 public JWK');
  const x = fromB64url(jwk.x);
  if (x.length !== 32) throw new TypeError('not an Ed25519 public JWK');
  return x;
}

/** The 4-byte key hash of an Ed25519 note key: SHA-256(name || 0x0A || 0x01 || key)[:4]. */
export function noteKeyHash(name: string, publicJwk: JsonWebKey): Uint8Array {
  checkName(name);
  const n = utf8(name);
  const key = rawEd25519(publicJwk);
  const b = new Uint8Array(n.length + 2 + key.length);
  b.set(n, 0);
  b[n.length] = 0x0a;
  b[n.length + 1] = NOTE_ED25519;
  b.set(key, n.length + 2);
  return sha256(b).subarray(0, 4);
}

/** The verifier key string of C2SP signed-note: `<name>+<hex key hash>+<base64(0x01 || key)>`. */
export function noteVerifierKey(name: string, publicJwk: JsonWebKey): string {
  const hash = noteKeyHash(name, publicJwk);
  const typed = new Uint8Array(33);
  typed[0] = NOTE_ED25519;
  typed.set(rawEd25519(publicJwk), 1);
  return `${name}+${[...hash].map((b) => b.toString(16).padStart(2, '0')).join('')}+${b64std(typed)}`;
}

function checkText(text: string): void {
  if (text === '' || !text.endsWith('\n')) throw new TypeError('a note text is non-empty and ends with a newline');
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the signed-note text admits no control character but newline
  if (/[\u0000-\u0009\u000b-\u001f\u007f]/.test(text)) throw new TypeError('a note text has no control characters but newlines');
}

/** Signs a note text with each signer; returns the note (text, blank line, signature lines). */
export async function signNote(text: string, signers: readonly NoteSigner[]): Promise<string> {
  checkText(text);
  if (signers.length === 0) throw new TypeError('signNote: no signer');
  let out = text + '\n';
  for (const s of signers) {
    const hash = noteKeyHash(s.name, s.publicJwk);
    const sig = await s.sign(utf8(text));
    const both = new Uint8Array(4 + sig.length);
    both.set(hash, 0);
    both.set(sig, 4);
    out += `${DASH}${s.name} ${b64std(both)}\n`;
  }
  return out;
}

/** Why a note was refused. */
export type NoteVerdict = { ok: true; note: VerifiedNote } | { ok: false; reason: string };

/**
 * Verifies a signed note against trusted keys: at least one known key's signature must verify,
 * and every line of a known key must. Never throws on hostile input.
 */
export async function verifyNote(note: string, trusted: readonly NoteVerifier[]): Promise<NoteVerdict> {
  if (typeof note !== 'string' || note.length > 1_000_000) return { ok: false, reason: 'not a note' };
  const split = note.lastIndexOf('\n\n');
  if (split < 0 || !note.endsWith('\n')) return { ok: false, reason: 'not a note: no signature block' };
  const text = note.slice(0, split + 1);
  try {
    checkText(text);
  } catch (e) {
    return { ok: false, reason: (e as Error).message };
  }
  const lines = note.slice(split + 2, -1).split('\n');
  if (lines.length === 0 || lines.length > MAX_SIGNATURES) return { ok: false, reason: 'a note carries 1 to 100 signatures' };
  const known = trusted.map((t) => {
    try {
      return { t, hash: noteKeyHash(t.name, t.publicJwk) };
    } catch {
      return null;
    }
  });
  const signers: NoteVerifier[] = [];
  for (const line of lines) {
    const m = /^\u2014 (\S+) ([A-Za-z0-9+/=]+)$/u.exec(line);
    if (!m) return { ok: false, reason: 'malformed signature line' };
    let raw: Uint8Array;
    try {
      raw = fromB64std(m[2]!);
    } catch {
      return { ok: false, reason: 'malformed signature line' };
    }
    if (raw.length < 5) return { ok: false, reason: 'malformed signature line' };
    const hash = raw.subarray(0, 4);
    const k = known.find((x) => x !== null && x.t.name === m[1] && x.hash.every((b, i) => b === hash[i]));
    if (!k) continue;
    if (raw.length !== 68 || !(await verifyEd25519(k.t.publicJwk, utf8(text), raw.subarray(4)))) {
      return { ok: false, reason: `the signature of ${m[1]} does not verify` };
    }
    signers.push(k.t);
  }
  if (signers.length === 0) return { ok: false, reason: 'no signature by a trusted key' };
  return { ok: true, note: { text, signers } };
}
