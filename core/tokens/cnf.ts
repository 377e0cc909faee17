/**
 * Confirmation (`cnf`) checks of bound tokens: DPoP key binding (RFC 9449,
 * `jkt`) and certificate binding (RFC 8705, `x5t#S256`). When both are
 * present both must hold; an unbound token needs neither.
 */
import { b64urlBytes, timingSafeEqualStr } from './internal/b64.ts';
import { TokenError } from './errors.ts';

export interface PresentedBindings {
  /** Thumbprint of a verified DPoP proof's key, or null when no valid proof came. */
  dpopJkt: string | null;
  /** x5t#S256 of the presented TLS client leaf certificate, or null when none. */
  certThumbprint: string | null;
}

export function checkConfirmation(cnf: { jkt?: string; 'x5t#S256'?: string } | undefined, presented: PresentedBindings): void {
  if (!cnf) return;
  if (cnf.jkt !== undefined) {
    if (presented.dpopJkt === null) throw new TokenError('dpop_required', 'a DPoP-bound token needs a DPoP proof');
    if (!timingSafeEqualStr(cnf.jkt, presented.dpopJkt))
      throw new TokenError('dpop_key_mismatch', 'the proof key is not the key the token is bound to');
  }
  const x5t = cnf['x5t#S256'];
  if (x5t !== undefined) {
    if (presented.certThumbprint === null) throw new TokenError('cert_required', 'a certificate-bound token needs the client certificate');
    if (!timingSafeEqualStr(x5t, presented.certThumbprint))
      throw new TokenError('cert_mismatch', 'the client certificate is not the one the token is bound to');
  }
}

/** x5t#S256 of a DER certificate: BASE64URL(SHA-256(DER)). */
export async function certThumbprint(der: Uint8Array): Promise<string> {
  const d = await crypto.subtle.digest('SHA-256', der as Uint8Array<ArrayBuffer>);
  return b64urlBytes(new Uint8Array(d));
}
