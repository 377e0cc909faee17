/**
 * Coded token errors. Every refusal of an access token, a DPoP proof or a
 * confirmation binding carries one code from this closed set; the cell maps
 * them to `unauthorized` with `details.reason = code`, the edge the same way.
 */
export const TOKEN_ERROR_CODES = [
  'malformed_token',
  'bad_signature',
  'bad_alg',
  'bad_typ',
  'bad_issuer',
  'bad_audience',
  'expired',
  'not_yet_valid',
  'missing_claim',
  'revoked',
  'dpop_required',
  'dpop_invalid',
  'dpop_bad_alg',
  'dpop_bad_key',
  'dpop_htm_mismatch',
  'dpop_htu_mismatch',
  'dpop_stale',
  'dpop_replay',
  'dpop_ath_mismatch',
  'dpop_key_mismatch',
  'cert_required',
  'cert_mismatch',
  'pkce_mismatch',
  'delegation_too_deep',
] as const;

export type TokenErrorCode = (typeof TOKEN_ERROR_CODES)[number];

/** A refusal of untrusted token input; `code` is what callers switch on. */
export class TokenError extends Error {
  readonly code: TokenErrorCode;
  constructor(code: TokenErrorCode, message: string) {
    super(message);
    this.name = 'TokenError';
    this.code = code;
  }
}

/** Tells a TokenError apart by its name and code, not by `instanceof`. */
export function isTokenError(err: unknown): err is TokenError {
  return (
    typeof err === 'object' &&
    err !== null &&
    (err as { name?: unknown }).name === 'TokenError' &&
    (TOKEN_ERROR_CODES as readonly string[]).includes((err as { code?: unknown }).code as string)
  );
}
