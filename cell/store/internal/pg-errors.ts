/**
 * What a PostgreSQL or driver error means for the store: a lost connection
 * (503 `service_unavailable`, retryable), a serialization failure or deadlock
 * (the transaction is run again), or anything else (a programming or schema
 * mistake, passed through).
 */
import { ServiceError } from '../../../core/errors.ts';

/** SQLSTATEs after which the transaction is run again. */
const RETRY_STATES = new Set(['40001', '40P01']);

/**
 * SQLSTATEs that mean the server is gone or not accepting work yet:
 * class 08 (connection exception), 57P01..57P03 (shutdown, crash, starting
 * up), 53300 (too many connections), 58030 (I/O error) and 25P03 (idle
 * transaction timeout: the server closed the session).
 */
const LOST_STATES = /^(08...|57P0[123]|53300|58030|25P03)$/;

/** Node socket errors and the driver's own messages for a dead connection. */
const LOST_ERRNOS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ECONNABORTED',
]);
const LOST_MESSAGES =
  /Connection terminated|connection timeout|Client has encountered a connection error|Client was closed|not queryable|timeout exceeded when trying to connect|terminating connection/i;

export function sqlState(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  // EPIPE has the shape of a SQLSTATE: a socket's error code is not one.
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && !LOST_ERRNOS.has(code) ? code : undefined;
}

export function isRetryable(err: unknown): boolean {
  const s = sqlState(err);
  return s !== undefined && RETRY_STATES.has(s);
}

export function isConnectionLost(err: unknown): boolean {
  if (err === null || typeof err !== 'object') return false;
  const s = sqlState(err);
  if (s !== undefined) return LOST_STATES.test(s);
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && LOST_ERRNOS.has(code)) return true;
  const msg = (err as { message?: unknown }).message;
  return typeof msg === 'string' && LOST_MESSAGES.test(msg);
}

/** The refusal a caller sees while the server cannot be reached. */
export function connectionLost(): ServiceError {
  return new ServiceError('service_unavailable', 'The store is unreachable; try again shortly.', {
    details: { reason: 'connection_lost' },
    retryable: true,
    headers: { 'Retry-After': '1' },
  });
}
