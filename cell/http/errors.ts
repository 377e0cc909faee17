/**
 * Every error leaves as the spec's envelope: ServiceErrors with their code,
 * framework errors (malformed JSON, bad body) as invalid_request, anything
 * else as internal_error with a correlation id (detail goes to the log only).
 */
import type { Context, ErrorHandler, NotFoundHandler } from 'hono';
import { HTTPException } from 'hono/http-exception';
import type { ZodError } from 'zod';
import { ServiceError, isServiceError } from '../../core/errors.ts';
import { authChallenge, envelopeErrors, malformedRequest, notFoundAnswer } from '../../runtime/gateway.ts';
import type { AppEnv, Logger } from '../context.ts';

/** Framework errors (HTTP exceptions: oversize or unparseable bodies, ...) as the service's codes. */
export function frameworkError(err: unknown): unknown {
  if (isServiceError(err) || !(err instanceof HTTPException)) return err;
  if (err.status === 413) return new ServiceError('invalid_request', 'request body too large', { details: { reason: 'body_too_large' } });
  if (err.status === 415)
    return new ServiceError('invalid_request', 'unsupported media type: send application/json', {
      details: { reason: 'unsupported_media_type' },
    });
  if (err.status === 401) return new ServiceError('unauthorized', 'no valid credential');
  if (err.status === 403) return new ServiceError('forbidden', 'forbidden');
  if (err.status === 404) return new ServiceError('not_found', 'no such resource');
  if (err.status >= 400 && err.status < 500) return malformedRequest();
  return err;
}

/**
 * The app's error handler (runtime/gateway.ts): the envelope on the wire, the cause (5xx) in `log`
 * under the correlation id. `challenge` makes a 401's WWW-Authenticate for the request (the OAuth
 * module's: naming the protected resource metadata of the path asked); default the bare one.
 */
export const errorHandler = (log: Logger, challenge: (c: Context<AppEnv>) => string = () => authChallenge('cell')): ErrorHandler<AppEnv> =>
  envelopeErrors<AppEnv>({
    toServiceError: frameworkError,
    challenge,
    logCause: (id, err, c) => log.error('request failed', { correlation_id: id, method: c.req.method, path: c.req.path, error: err }),
  });

export const onNotFound: NotFoundHandler<AppEnv> = notFoundAnswer;

/** Failed request validation -> 400 invalid_request, naming the fields (never the values). */
export function validationError(error: ZodError): ServiceError {
  const issues = error.issues.slice(0, 20).map((i) => ({ path: i.path.map(String).join('.'), code: i.code, message: i.message }));
  return new ServiceError('invalid_request', 'request failed validation', { details: { issues } });
}
