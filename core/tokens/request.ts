/**
 * Reading the credential parts of an HTTP request the same way on every
 * host: the Authorization header (`Bearer <token>`, or `DPoP <token>` for a
 * DPoP-bound access token, RFC 9449 §7.1) and the single DPoP header.
 */

const AUTHORIZATION = /^(Bearer|DPoP) +([A-Za-z0-9\-._~+/]+=*)$/i;

/** The scheme and token of an Authorization header; null when it is neither scheme or malformed. */
export function parseAuthorization(header: string): { scheme: 'bearer' | 'dpop'; token: string } | null {
  const m = AUTHORIZATION.exec(header.trim());
  if (!m) return null;
  return { scheme: m[1]!.toLowerCase() === 'dpop' ? 'dpop' : 'bearer', token: m[2]! };
}

/** The request's one DPoP header, or null; several (joined by a comma) give '' so the proof check refuses them. */
export function dpopHeaderOf(headers: Headers): string | null {
  const raw = headers.get('dpop');
  if (raw === null) return null;
  if (raw.includes(',')) return '';
  return raw.trim();
}
