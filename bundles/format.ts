/**
 * Format identifiers and versions of the signed hand-carried artifacts.
 * Bump a version whenever the bytes a verifier checks change meaning; a
 * verifier refuses versions it does not know (fail closed).
 */

/** The signed envelope around every bundle and manifest. */
export const ENVELOPE_FORMAT = 'agent-cell-signed/1';

/** Payload format version of crew bundles and model manifests. */
export const PAYLOAD_FORMAT_VERSION = 1;

/**
 * Payload format version of journal exports written now. Version 2 adds
 * `run.run_nonce`: the run id is derived from the device id and that nonce
 * (bundles/run-id.ts), so a run id is bound to the device that ran it.
 * Version 3 adds `log`: the run's inclusion in the device's own run log, with
 * a checkpoint signed by the device key (bundles/journal-export.ts).
 */
export const JOURNAL_FORMAT_VERSION = 3;

/**
 * Payload format version of key bundles written now. Version 2 added the
 * `tokens` section (the cell's token issuer, its token signing keys, the
 * revoked token ids not yet expired) and lists every principal in `owners`,
 * so a device judges OAuth access tokens offline (docs/edge.md). Version 3
 * adds `tokens.clients`, the registered OAuth clients that exist at issue
 * time, so a token of a deleted client is refused as at the cell. Version 4
 * adds `tokens.max_act_depth`, the longest RFC 8693 delegation chain the
 * issuing cell honours (`--max-delegation-depth`), so the device refuses the
 * same chains; a format 3 or older bundle is judged with core's default (3).
 */
export const KEY_BUNDLE_FORMAT_VERSION = 4;

export const BUNDLE_TYPES = ['api-key-records', 'crew', 'model-manifest', 'journal'] as const;
export type BundleType = (typeof BUNDLE_TYPES)[number];

/**
 * Payload versions a verifier accepts, per type. A version 1 key bundle still
 * loads (keys only: the device then refuses every access token with
 * `no_token_keys`); a version 2 one judges tokens without knowing which
 * clients were deleted (as before version 3); a version 3 one judges
 * delegation chains against core's default depth.
 */
export const ACCEPTED_FORMAT_VERSIONS: Readonly<Record<BundleType, readonly number[]>> = {
  'api-key-records': [1, 2, 3, KEY_BUNDLE_FORMAT_VERSION],
  crew: [PAYLOAD_FORMAT_VERSION],
  'model-manifest': [PAYLOAD_FORMAT_VERSION],
  journal: [1, 2, JOURNAL_FORMAT_VERSION],
};

/** Tolerated clock skew between the issuing cell and the device, ms. */
export const DEFAULT_SKEW_MS = 5 * 60 * 1000;
