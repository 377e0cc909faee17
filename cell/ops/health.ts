/**
 * `GET /healthz` (the process answers) and `GET /readyz` (the cell can do its
 * work: the store takes writes, every module started, and on PostgreSQL the
 * connection is up), for load balancers and orchestrators. Both are public,
 * behind the gateway's rate gate like every request, and tagged `Operations`,
 * a tag the curated document does not serve (docs/operations.md describes
 * them instead). A failing check answers 503 in the spec's envelope, naming
 * the failing part in `details.checks`.
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { ServiceError } from '../../core/errors.ts';
import type { AppEnv } from '../context.ts';
import { errorResponses, json } from '../http/openapi.ts';
import type { Store } from '../store/types.ts';

export const HEALTH_PATH = '/healthz';
export const READY_PATH = '/readyz';

const PUBLIC = { security: [] as Array<Record<string, string[]>> };
const NO_STORE = { 'Cache-Control': 'no-store' };

const Checks = z.object({
  store: z.string().openapi({ description: '`ok`, or why the store cannot take writes (`disk_full`, `connection_lost`, …).' }),
  modules: z.string().openapi({ description: '`ok` once every module started; `starting` or `stopping` otherwise.' }),
  member: z.string().openapi({
    description:
      "`ok`, or why this cell is not a working member of its group: `clock_skew` (its clock strays beyond --max-clock-skew-ms from the database's), `heartbeat_failing` (its heartbeat cannot be written)",
  }),
});

const getHealth = createRoute({
  method: 'get',
  path: HEALTH_PATH,
  tags: ['Operations'],
  'x-status': 'Live',
  ...PUBLIC,
  summary: 'Liveness: the process answers',
  responses: { 200: json(z.object({ status: z.literal('ok') }), 'The process is alive'), ...errorResponses(429) },
});

const getReady = createRoute({
  method: 'get',
  path: READY_PATH,
  tags: ['Operations'],
  'x-status': 'Live',
  ...PUBLIC,
  summary: 'Readiness: the store takes writes and every module started',
  responses: {
    200: json(z.object({ status: z.literal('ready'), checks: Checks }), 'Ready to serve'),
    ...errorResponses(429, 503),
  },
});

export interface Readiness {
  store: Store;
  /** 'ok' once every module started. */
  modules(): 'ok' | 'starting' | 'stopping';
  /** 'ok', or why this cell is not a working member of its group (cell/cluster). */
  member?(): string;
  /** Told of each readiness answer (the `cell_ready` gauge). */
  observed?(ready: boolean): void;
}

export function mountHealth(app: OpenAPIHono<AppEnv>, r: Readiness): void {
  app.openapi(getHealth, (c) => c.json({ status: 'ok' as const }, 200, NO_STORE));
  app.openapi(getReady, async (c) => {
    const health = await r.store.health();
    const checks = { store: health.ok ? 'ok' : (health.reason ?? 'store_failed'), modules: r.modules(), member: r.member?.() ?? 'ok' };
    const failing = Object.entries(checks)
      .filter(([, v]) => v !== 'ok')
      .map(([k, v]) => `${k} (${v})`);
    r.observed?.(failing.length === 0);
    if (failing.length > 0) {
      throw new ServiceError('service_unavailable', `not ready: ${failing.join(', ')}`, {
        details: { reason: 'not_ready', checks },
        retryable: true,
        headers: { ...NO_STORE, 'Retry-After': '1' },
      });
    }
    return c.json({ status: 'ready' as const, checks }, 200, NO_STORE);
  });
}
