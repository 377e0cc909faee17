/**
 * `GET /api/public/v1/admin/jobs/runs/{run_id}/values/{hash}`: a step's input
 * or output, by the content hash its journal record names. Journal records
 * carry hashes only; the values sit beside the journal by hash (journal.ts
 * putRunBlob). A value is served only when a record of this run names it as its
 * `input_hash` or `output_hash`, so a caller who may read this run learns
 * nothing of another run's values. The answer carries the hash, and the client
 * can check `contentHash(value) === hash` (the operator console does) to know
 * the value is the one the signed record commits to.
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { contentHash } from '../../core/canonical.ts';
import { notFound } from '../../core/errors.ts';
import type { AppEnv } from '../context.ts';
import type { RunsContext } from './context.ts';
import { errorResponses, json, secured } from '../http/openapi.ts';
import { getBlob, readJournal } from './journal.ts';
import { getRun } from './runs.ts';
import { READS_RUN_VALUES, RunIdParam } from './api.ts';

const NULL_HASH = contentHash(null);

const getValue = createRoute({
  method: 'get',
  path: '/api/public/v1/admin/jobs/runs/{run_id}/values/{hash}',
  tags: ['Job runs'],
  'x-status': 'Live',
  ...secured(READS_RUN_VALUES),
  summary: "A step input or output named by the run's journal",
  description:
    "The JSON value stored under `hash` (`sha256:` + 64 hex digits, the RFC 8785 content hash), served only when one of this run's journal records names it as `input_hash` or `output_hash`; otherwise 404. Check `contentHash(value) === hash` to tie it to the signed record.",
  request: {
    params: RunIdParam.extend({
      hash: z
        .string()
        .regex(/^sha256:[0-9a-f]{64}$/)
        .openapi({ param: { name: 'hash', in: 'path' }, example: `sha256:${'0'.repeat(64)}` }),
    }),
  },
  responses: {
    200: json(z.object({ run_id: z.string(), hash: z.string(), value: z.unknown() }).openapi('RunValue'), 'The value'),
    ...errorResponses(400, 401, 403, 404),
  },
});

/** Mounts the values route. */
export function mountRunValueRoutes(app: OpenAPIHono<AppEnv>, ctx: RunsContext): void {
  app.openapi(getValue, async (c) => {
    const { run_id, hash } = c.req.valid('param');
    if (!(await getRun(ctx, run_id))) throw notFound('run');
    const named = (await readJournal(ctx, run_id)).some((r) => r.input_hash === hash || r.output_hash === hash);
    if (!named) throw notFound('value');
    const value = hash === NULL_HASH ? null : await getBlob(ctx, hash);
    if (value === undefined) throw notFound('value');
    return c.json({ run_id, hash, value }, 200);
  });
}
