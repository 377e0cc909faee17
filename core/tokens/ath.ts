/**
 * The DPoP `ath` claim (RFC 9449 §4.2): BASE64URL(SHA-256(ASCII(access token))).
 */
import { sha256B64url } from './internal/b64.ts';

export function accessTokenHash(accessToken: string): Promise<string> {
  return sha256B64url(accessToken);
}
