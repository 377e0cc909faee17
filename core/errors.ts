/**
 * Error codes and the error envelope of the service specification.
 *
 * Every refusal in core, cell and edge is a `ServiceError` carrying one code
 * from the closed set below. Code is what callers, tests and logs switch on;
 * `message` is for humans and may change. A stable machine sub-reason, when a
 * refusal needs one (e.g. `no_budget_ledger`, `graph_changed`), travels in
 * `details.reason`, one of the closed set in core/reasons.ts. Internal exception text never reaches the wire: anything
 * that is not a ServiceError becomes `internal_error` with a correlation id.
 */

import type { WireReason } from './reasons.ts';

/** The spec's Errors table: stable machine code -> HTTP status. */
export const ERROR_STATUS = {
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  /** Not in the spec's table (issue 25): a known path asked with a method it does not serve; `Allow` names the methods. */
  method_not_allowed: 405,
  conflict: 409,
  rate_limited: 429,
  internal_error: 500,
  service_unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;
export type ErrorStatus = (typeof ERROR_STATUS)[ErrorCode];

export interface ErrorEnvelope {
  error: ErrorCode;
  message: string;
  correlation_id?: string;
  details?: Record<string, unknown>;
  retryable?: boolean;
}

/** The `details` of a refusal: anything safe for the wire, and a declared `reason` (core/reasons.ts). */
export type ErrorDetails = { reason?: WireReason } & Record<string, unknown>;

export interface ServiceErrorOptions {
  details?: ErrorDetails;
  retryable?: boolean;
  /** Extra response headers (e.g. Retry-After, WWW-Authenticate). */
  headers?: Record<string, string>;
}

/** A refusal with a code from the closed set; safe to show on the wire. */
export class ServiceError extends Error {
  readonly code: ErrorCode;
  readonly status: ErrorStatus;
  readonly details: ErrorDetails | undefined;
  readonly retryable: boolean | undefined;
  readonly headers: Record<string, string> | undefined;

  constructor(code: ErrorCode, message: string, options: ServiceErrorOptions = {}) {
    super(message);
    this.name = 'ServiceError';
    this.code = code;
    this.status = ERROR_STATUS[code];
    this.details = options.details;
    this.retryable = options.retryable ?? (code === 'rate_limited' ? true : undefined);
    this.headers = options.headers;
  }

  /** The public envelope. Only fields that are meaningful are present. */
  toEnvelope(correlationId?: string): ErrorEnvelope {
    const env: ErrorEnvelope = { error: this.code, message: this.message };
    if (this.details !== undefined) env.details = this.details;
    if (this.retryable !== undefined) env.retryable = this.retryable;
    if (correlationId !== undefined && this.status >= 500) env.correlation_id = correlationId;
    return env;
  }
}

/** Tells a ServiceError apart by its code, not by `instanceof` (works across bundles). */
export function isServiceError(err: unknown): err is ServiceError {
  return (
    typeof err === 'object' &&
    err !== null &&
    (err as { name?: unknown }).name === 'ServiceError' &&
    typeof (err as { code?: unknown }).code === 'string' &&
    Object.hasOwn(ERROR_STATUS, (err as { code: string }).code)
  );
}

/** Envelope for anything thrown: ServiceErrors pass through, the rest is an internal_error. */
export function toEnvelope(err: unknown, correlationId: string): { status: ErrorStatus; body: ErrorEnvelope } {
  if (isServiceError(err)) {
    // Built from the fields, not err.toEnvelope(): an error from another bundle may lack the method.
    const status = ERROR_STATUS[err.code];
    const body: ErrorEnvelope = { error: err.code, message: String(err.message) };
    if (err.details !== undefined) body.details = err.details;
    if (err.retryable !== undefined) body.retryable = err.retryable;
    if (status >= 500) body.correlation_id = correlationId;
    return { status, body };
  }
  return {
    status: 500,
    body: { error: 'internal_error', message: 'unexpected server failure', correlation_id: correlationId },
  };
}

/** Shorthands for the common refusals. */
export const invalid = (message: string, details?: ErrorDetails) =>
  new ServiceError('invalid_request', message, details ? { details } : {});
export const notFound = (what: string) => new ServiceError('not_found', `${what} not found`);
export const forbidden = (message: string, details?: ErrorDetails) => new ServiceError('forbidden', message, details ? { details } : {});
export const conflict = (message: string, details?: ErrorDetails) => new ServiceError('conflict', message, details ? { details } : {});
export const unauthorized = (message = 'no valid credential', details?: ErrorDetails) =>
  new ServiceError('unauthorized', message, details ? { details } : {});

/** 409 in_use naming the users of a `kind` (by kind of user, up to five of each in the message); `hint` says what to do first. */
export function inUse(kind: string, id: string, usedBy: Record<string, readonly string[]>, hint: string): ServiceError {
  const named = Object.entries(usedBy)
    .filter(([, ids]) => ids.length > 0)
    .map(([k, ids]) => `${k} ${ids.slice(0, 5).join(', ')}${ids.length > 5 ? ', …' : ''}`);
  return new ServiceError('conflict', `the ${kind} is in use by ${named.join('; ')}: ${hint}`, {
    details: { reason: 'in_use', [`${kind}_id`]: id, used_by: usedBy },
  });
}
