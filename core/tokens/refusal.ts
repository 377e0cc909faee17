/**
 * A refused token as the wire sees it, the same on the cell and the edge:
 * `401 unauthorized` with `details.reason` = the TokenError code, and a
 * `WWW-Authenticate` challenge in the scheme the token came with
 * (`error="invalid_dpop_proof"` for proof failures, else `invalid_token`,
 * RFC 6750 §3 and RFC 9449 §7.1); a DPoP challenge names the accepted proof
 * algorithms (`algs`, a parameter of the DPoP scheme only, RFC 9449 §7.1).
 */
import { ServiceError } from '../errors.ts';
import { DPOP_ALGS } from './dpop.ts';
import type { TokenErrorCode } from './errors.ts';

export interface ChallengeOptions {
  /** `realm` of the challenge: "cell" or "edge". */
  realm: string;
  /** RFC 9728 §5.1: where the protected resource's metadata is. */
  resourceMetadata?: string;
}

export function tokenRefusal(
  refusal: { code: TokenErrorCode; message: string },
  scheme: 'bearer' | 'dpop',
  o: ChallengeOptions,
): ServiceError {
  const err = refusal.code.startsWith('dpop_') ? 'invalid_dpop_proof' : 'invalid_token';
  const meta = o.resourceMetadata ? `, resource_metadata="${o.resourceMetadata}"` : '';
  return new ServiceError('unauthorized', `access token refused: ${refusal.message}`, {
    details: { reason: refusal.code },
    headers: {
      'WWW-Authenticate':
        scheme === 'dpop'
          ? `DPoP realm="${o.realm}", error="${err}", algs="${DPOP_ALGS.join(' ')}"${meta}`
          : `Bearer realm="${o.realm}", error="${err}"${meta}`,
    },
  });
}
