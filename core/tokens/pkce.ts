/**
 * PKCE (RFC 7636) with S256 only: `plain` is refused by the cell.
 *
 * @example
 * // RFC 7636 Appendix B
 * await pkceS256Challenge('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk')
 * // -> 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM'
 */
import { sha256B64url, timingSafeEqualStr } from './internal/b64.ts';

const VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;

/** The S256 code challenge of a verifier: BASE64URL(SHA256(ASCII(verifier))). */
export function pkceS256Challenge(verifier: string): Promise<string> {
  return sha256B64url(verifier);
}

/** True when `verifier` is well-formed and its S256 challenge equals `challenge`. */
export async function verifyPkceS256(verifier: string, challenge: string): Promise<boolean> {
  if (!VERIFIER.test(verifier)) return false;
  return timingSafeEqualStr(await pkceS256Challenge(verifier), challenge);
}
