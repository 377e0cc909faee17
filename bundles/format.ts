/**
 * Format identifiers and versions of the signed hand-carried artifacts.
 * Bump a version whenever the bytes a verifier checks change meaning; a
 * verifier refuses versions it does not know (fail closed).
 */

/** The signed envelope around every bundle and manifest. */
export const ENVELOPE_FORMAT = 'agent-cell-signed/1';

/** Payload format version shared by the artifact types below. */
export const PAYLOAD_FORMAT_VERSION = 1;

export const BUNDLE_TYPES = ['api-key-records', 'crew', 'model-manifest', 'journal'] as const;
export type BundleType = (typeof BUNDLE_TYPES)[number];

/** Tolerated clock skew between the issuing cell and the device, ms. */
export const DEFAULT_SKEW_MS = 5 * 60 * 1000;
