/**
 * Every error leaves as the spec's envelope: ServiceErrors with their code,
 * framework errors (malformed JSON, bad body) as invalid_request, anything
 * else as internal_error with a correlation id (detail goes to the log only).
 */
import type { Context, ErrorHandler, NotFoundHandler } from 'hono';
import { HTTPException } from 'hono/http-exception';
import type { ZodError } from 'zod';
import { ServiceError, isServiceError, toEnvelope } from '../../core/errors.ts';
import type { AppEnv, Logger } from '../context.ts';

function correlationId(c: Context<AppEnv>): string {
  return c.get('requestId') ?? crypto.randomUUID();
}

/** The app's error handler: the envelope on the wire, the cause (5xx) in `log` under the correlation id. */
export const errorHandler = (log: Logger): ErrorHandler<AppEnv> => (err, c) => {
  let e: unknown = err;
  if (!isServiceError(err) && err instanceof HTTPException) {
    if (err.status === 413) e = new ServiceError('invalid_request', 'request body too large', { details: { reason: 'body_too_large' } });
    else if (err.status === 415) e = new ServiceError('invalid_request', 'unsupported media type: send application/json', { details: { reason: 'unsupported_media_type' } });
    else if (err.status === 401) e = new ServiceError('unauthorized', 'no valid credential');
    else if (err.status === 403) e = new ServiceError('forbidden', 'forbidden');
    else if (err.status === 404) e = new ServiceError('not_found', 'no such resource');
    else if (err.status >= 400 && err.status < 500) e = new ServiceError('invalid_request', 'malformed request', { details: { reason: 'malformed_request' } });
  }
  const id = correlationId(c);
  const { status, body } = toEnvelope(e, id);
  if (status >= 500) {
    const detail = err instanceof Error ? (err.stack ?? err.message) : String(err);
    log.error('request failed', { correlation_id: id, method: c.req.method, path: c.req.path, error: detail });
  }
  const headers: Record<string, string> = {};
  if (isServiceError(e) && e.headers) Object.assign(headers, e.headers);
  if (status === 401 && !headers['WWW-Authenticate']) headers['WWW-Authenticate'] = 'Bearer realm="cell", DPoP algs="EdDSA Ed25519 ES256 ES384 RS256"';
  return c.json(body, status, headers);
};

export const onNotFound: NotFoundHandler<AppEnv> = (c) =>
  c.json({ error: 'not_found', message: 'no such resource' }, 404);

/** Failed request validation -> 400 invalid_request, naming the fields (never the values). */
export function validationError(error: ZodError): ServiceError {
  const issues = error.issues.slice(0, 20).map((i) => ({ path: i.path.map(String).join('.'), code: i.code, message: i.message }));
  return new ServiceError('invalid_request', 'request failed validation', { details: { issues } });
}
