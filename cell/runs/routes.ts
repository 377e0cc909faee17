/**
 * The journal snapshot and the live event stream of any run (crew or job):
 *
 * - `GET /api/public/v1/admin/jobs/runs/{run_id}/journal`: the sealed records
 *   so far (optionally after `after_seq`), plus whether the run is finished.
 * - `GET /api/public/v1/admin/jobs/runs/{run_id}/events/sse`: Server-Sent
 *   Events. Each event is one journal record: `id:` its seq, `event:` its kind,
 *   `data:` the record as JSON. Resume with the `Last-Event-ID` header (or
 *   `?last_event_id=`): delivery restarts after that seq, without loss or
 *   duplicates. Live tokens of model steps arrive as `event: delta` frames
 *   without an `id:` (not journal records; sse.ts). A comment line
 *   (`: heartbeat`) is sent every heartbeat interval. The stream closes after the `run_finished` event; a request
 *   for a finished run with nothing left after Last-Event-ID answers 204 (which
 *   tells an EventSource to stop reconnecting).
 */
import { ServerResponse } from 'node:http';
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import { streamSSE } from 'hono/streaming';
import { PERMISSIONS } from '../../core/permissions.ts';
import { notFound } from '../../core/errors.ts';
import type { AppEnv } from '../context.ts';
import type { Change } from '../store/types.ts';
import { errorResponses, json, MAX_OFFSET, secured } from '../http/openapi.ts';
import { READS_ALL_RUNS, RunIdParam } from './api.ts';
import type { RunsContext } from './context.ts';
import { journalClosed, readJournal } from './journal.ts';
import { nodeSink, streamRun, webSink } from './sse.ts';
import { lastSeq } from './repository.ts';
import { getRun, isTerminal } from './runs.ts';

/** Heartbeat interval of SSE streams, ms (env CELL_SSE_HEARTBEAT_MS overrides; tests use it). */
export function sseHeartbeatMs(): number {
  const v = Number(globalThis.process?.env?.['CELL_SSE_HEARTBEAT_MS']);
  return Number.isFinite(v) && v >= 10 ? v : 15_000;
}

export const JournalRecordSchema = z
  .object({
    v: z
      .union([z.literal(1), z.literal(2)])
      .openapi({ description: 'Record format version (2 since multi-cell; 1 for records written before)' }),
    cell_id: z
      .string()
      .optional()
      .openapi({ description: 'v2: the cell that wrote the record under its lease on the run (signed; docs/multi-cell.md)' }),
    epoch: z
      .number()
      .int()
      .optional()
      .openapi({ description: "v2: the lease's fencing token; never decreases along a journal, grows at each takeover (signed)" }),
    run_id: z.string(),
    seq: z.number().int().openapi({ description: 'Position in the journal, contiguous from 1; also the SSE event id' }),
    step_id: z.string(),
    kind: z
      .string()
      .openapi({ description: 'run_started | step | decision | refusal | waiting | cancel_requested | run_finished (see docs/jobs.md)' }),
    graph_hash: z.string(),
    input_hash: z.string(),
    output_hash: z.string(),
    prev_hash: z.string(),
    at: z.number().int().openapi({
      description:
        'When the record was written, ms since the epoch: part of the signed bytes, so kept as signed (every other time is ISO 8601)',
    }),
    signer_kid: z.string(),
    sig: z.string(),
    data: z.record(z.string(), z.unknown()).optional(),
  })
  .openapi('JournalRecord');

const getJournal = createRoute({
  method: 'get',
  path: '/api/public/v1/admin/jobs/runs/{run_id}/journal',
  tags: ['Job runs'],
  'x-status': 'Live',
  ...secured(PERMISSIONS.jobsRead),
  summary: "The run's journal so far",
  description:
    'The signed, hash-chained journal records of a run (job or crew run; one run id space), in seq order. Pages with `limit` and `offset` (seq runs from 1 to `total` without gaps, so `offset=N` starts at seq N+1); `after_seq` (an extension) returns only later records, and combines with `offset` (skip `offset` records after it).' +
    READS_ALL_RUNS,
  request: {
    params: RunIdParam,
    query: z.object({
      after_seq: z.coerce
        .number()
        .int()
        .min(0)
        .max(Number.MAX_SAFE_INTEGER)
        .default(0)
        .openapi({ description: 'Only records with a larger seq' }),
      limit: z
        .preprocess((v) => (typeof v === 'string' && /^[0-9]{1,16}$/.test(v) ? Number(v) : v), z.number().int().min(1).max(10_000))
        .default(10_000)
        .openapi({ description: 'Most records returned: 1 to 10000, default 10000' }),
      offset: z
        .preprocess(
          (v) => (typeof v === 'string' && /^[0-9]{1,16}$/.test(v) ? Number(v) : v),
          z
            .number({ error: `must be a decimal integer from 0 to ${MAX_OFFSET}` })
            .int()
            .min(0)
            .max(MAX_OFFSET),
        )
        .default(0)
        .openapi({ description: 'Records to skip from the start (after `after_seq` when given), default 0' }),
    }),
  },
  responses: {
    200: json(
      z
        .object({
          run_id: z.string(),
          state: z.string(),
          finished: z.boolean().openapi({ description: 'True when the journal holds the run_finished record' }),
          records: z.array(JournalRecordSchema),
          limit: z.number().int().openapi({ description: 'The limit this page was read with' }),
          offset: z.number().int().openapi({ description: 'The offset this page was read with' }),
          total: z.number().int().openapi({ description: 'How many records the journal holds so far (seq runs from 1 to total)' }),
        })
        .openapi('RunJournal'),
      'The records so far',
    ),
    ...errorResponses(400, 401, 403, 404),
  },
});

const getSse = createRoute({
  method: 'get',
  path: '/api/public/v1/admin/jobs/runs/{run_id}/events/sse',
  tags: ['Job runs'],
  'x-status': 'Live',
  ...secured(PERMISSIONS.jobsRead),
  summary: 'Live events of a run (Server-Sent Events)',
  description:
    'Each event: `id` = journal seq, `event` = record kind, `data` = the journal record (JSON). Resume with `Last-Event-ID`. Live tokens: `event: delta` frames without `id`, `data` = `{step_id, seat, role_label, index, text, tool_call?}` (the answer so far of a model step is `answer.slice(0, index) + text`; a client joining mid-step first gets the answer so far as one delta at index 0); they are not journal records, so resumption skips them, and the step record carries the whole answer. Heartbeat comments. Closes after `run_finished`. The credential that opened the stream is judged again while it is open (on changes that may revoke it, on any cell, and at each heartbeat): refused, or without this permission any more, the stream ends with `event: closed`, `data` = the error envelope.' +
    READS_ALL_RUNS,
  request: {
    params: RunIdParam,
    query: z.object({
      last_event_id: z.coerce
        .number()
        .int()
        .min(0)
        .max(Number.MAX_SAFE_INTEGER)
        .optional()
        .openapi({ description: 'Same as the Last-Event-ID header (the header wins)' }),
    }),
    headers: z.object({ 'last-event-id': z.string().max(32).optional() }),
  },
  responses: {
    200: { description: 'text/event-stream of journal records', content: { 'text/event-stream': { schema: z.string() } } },
    204: { description: 'The run is finished and nothing is left after Last-Event-ID (an EventSource stops reconnecting)' },
    ...errorResponses(400, 401, 403, 404),
  },
});

function parseLastEventId(h: string | undefined, q: number | undefined): number {
  if (h !== undefined && h.trim() !== '') {
    const n = Number(h.trim());
    if (Number.isSafeInteger(n) && n >= 0) return n;
    return 0;
  }
  return q ?? 0;
}

/** True when the run is finished and nothing is left after `after`: its stream has nothing more to say. */
async function exhausted(ctx: RunsContext, runId: string, state: string, after: number): Promise<boolean> {
  if (!isTerminal(state) || !(await journalClosed(ctx, runId))) return false;
  return (await lastSeq(ctx.core.store, runId)) <= after;
}

/** Mounts the journal and SSE routes. */
export function mountRunEventRoutes(app: OpenAPIHono<AppEnv>, ctx: RunsContext): void {
  app.openapi(getJournal, async (c) => {
    const { run_id } = c.req.valid('param');
    const { after_seq, limit, offset } = c.req.valid('query');
    const run = await getRun(ctx, run_id);
    if (!run) throw notFound('run');
    // Seqs are 1..total without gaps: skipping `offset` records is starting after seq after_seq + offset.
    const records = await readJournal(ctx, run_id, Math.min(after_seq + offset, Number.MAX_SAFE_INTEGER), limit);
    const finished = await journalClosed(ctx, run_id);
    const total = await lastSeq(ctx.core.store, run_id);
    const page = records as z.infer<typeof JournalRecordSchema>[];
    return c.json({ run_id, state: run.state, finished, records: page, limit, offset, total }, 200);
  });

  app.openapi(getSse, async (c) => {
    const { run_id } = c.req.valid('param');
    const q = c.req.valid('query');
    const run = await getRun(ctx, run_id);
    if (!run) throw notFound('run');
    const after = parseLastEventId(c.req.header('last-event-id'), q.last_event_id);
    // Nothing left after Last-Event-ID on a finished run: 204 tells an EventSource to stop reconnecting.
    if (await exhausted(ctx, run_id, run.state, after)) return c.body(null, 204) as never;
    const check = c.get('credentialCheck');
    const opts = {
      heartbeatMs: sseHeartbeatMs(),
      // Already finished and nothing left to send after Last-Event-ID: close at once. Judged again once the
      // stream is subscribed only for a run that was finished here; a running run's end reaches the stream
      // as its `run_finished` record (the run is not read a second time: each client of a run pays it).
      isExhausted: async () => isTerminal(run.state) && exhausted(ctx, run_id, (await getRun(ctx, run_id))?.state ?? 'completed', after),
      // The credential that opened the stream, judged again while it is open (revoked: the stream ends).
      credential: {
        recheck: () => check.recheck(c),
        concerns: (ch: Change) => check.concerns(ch),
        permission: PERMISSIONS.jobsRead,
      },
    };
    const out = (c.env as { outgoing?: unknown } | undefined)?.outgoing;
    if (out instanceof ServerResponse) {
      // Served by node:http: frames are written on its response directly (sse.ts). The stream starts once
      // the middleware has put its headers on the response (request id, rate limits), after this returns.
      setImmediate(() => {
        streamRun(ctx, run_id, after, nodeSink(out), opts).catch((err: unknown) => {
          ctx.core.log.warn('run event stream failed', { run_id, error: err });
          out.destroy();
        });
      });
      return RESPONSE_ALREADY_SENT as never;
    }
    c.header('X-Accel-Buffering', 'no');
    return streamSSE(c, (stream) => streamRun(ctx, run_id, after, webSink(stream, c.req.raw.signal), opts)) as never;
  });
}
