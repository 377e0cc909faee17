/**
 * The edge's access log: one `info` line per request, with the cell's fields
 * (docs/operations.md): request id (the `X-Request-Id` of the answer), route
 * template, method, status, duration, the acting principal, the credential
 * kind and the API key behind it; never a secret, a header value or a body.
 */
import type { MiddlewareHandler } from 'hono';
import type { AccessFields, Logger } from '../runtime/log.ts';
import { routeTemplate } from '../runtime/route-template.ts';
import type { EdgeAuth } from './decide.ts';
import type { EdgeEnv } from './gateway.ts';

export function accessLog(log: Logger): MiddlewareHandler<EdgeEnv> {
  return async function accessLog(c, next) {
    const start = performance.now();
    await next();
    if (log.enabled?.('info') === false) return;
    const auth = c.get('auth') as EdgeAuth | undefined;
    const root = auth?.credential.root;
    const fields: AccessFields = {
      request_id: c.get('requestId') ?? null,
      route: routeTemplate(c),
      method: c.req.method,
      status: c.res.status,
      duration_ms: Math.round((performance.now() - start) * 1000) / 1000,
      principal_id: auth?.owner_id ?? null,
      credential_kind: auth?.credential.type ?? null,
      key_id: root?.startsWith('api_key:') ? root.slice('api_key:'.length) : null,
    };
    if (log.request) log.request(fields);
    else log.info('request', fields);
  };
}
