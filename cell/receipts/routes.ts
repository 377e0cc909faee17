/**
 * Routes of the receipts module (docs/receipts.md):
 *
 * - `GET /api/public/v1/admin/agent-teams/crews/{crew_id}/runs/{run_id}/attestation` (agent_teams.read
 *   or system.orchestration.admin.read, as the crew run's other reads) and
 *   `GET /api/public/v1/admin/jobs/runs/{run_id}/attestation` (system.orchestration.admin.read):
 *   a finished run's attestation. `format=bundle` (default, or Accept
 *   `application/vnd.agent-cell.attestation+json`): the DSSE envelope and the run's log proof;
 *   `format=dsse` (Accept `application/vnd.dsse.envelope.v1+json`): the envelope alone;
 *   `format=scitt` (Accept `application/cose`): the SCITT signed statement, COSE_Sign1 bytes.
 *   `values=true` puts the step values in the statement, only for a caller holding
 *   system.orchestration.admin.read (the values route's permission): 403 `values_not_readable`.
 * - The run log, public like /.well-known/cell-keys.json (hashes only; no run id is served):
 *   `GET /.well-known/agent-cell/run-log/checkpoint` (the signed C2SP checkpoint, text/plain),
 *   `…/consistency?first=M&second=N`, `…/inclusion/{leaf_hash}?tree_size=N`.
 * - `GET /api/public/v1/admin/run-log/entries` (system.orchestration.admin.read): the leaves in
 *   order, with the run ids, for monitors (a run id twice means two journals were shown for it).
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { grants } from '../../core/authority/scopes.ts';
import { ServiceError, notFound } from '../../core/errors.ts';
import { isoTime } from '../../core/iso-time.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import { ATTESTATION_MEDIA_TYPE } from '../../core/attestation/bundle.ts';
import type { AppEnv } from '../context.ts';
import { errorResponses, IsoTime, json, listSchema, pageOf, pageQuery, secured, securedEither } from '../http/openapi.ts';
import { runIdPath, type Run } from '../runs/api.ts';
import { attestationOf, signedStatementOf } from './attest.ts';
import type { ReceiptsContext } from './context.ts';
import { consistency, currentHead, settledHead, checkpointOf, entries, inclusionByHash, logOrigin } from './log.ts';

/** Where the run log is published (no credential needed). */
export const RUN_LOG_PATH = '/.well-known/agent-cell/run-log';
const DSSE_MEDIA_TYPE = 'application/vnd.dsse.envelope.v1+json';
const COSE_MEDIA_TYPE = 'application/cose';

const Dsse = z
  .object({
    payload: z.string().openapi({ description: 'base64 of the in-toto Statement (JSON)' }),
    payloadType: z.literal('application/vnd.in-toto+json'),
    signatures: z.array(z.object({ keyid: z.string().openapi({ description: 'kid in /.well-known/cell-keys.json' }), sig: z.string() })),
  })
  .openapi('DsseEnvelope');

const LogProofSchema = z
  .object({
    origin: z.string().openapi({ description: 'The log: `agent-cell/<group id>`' }),
    leaf_index: z.number().int(),
    tree_size: z.number().int(),
    inclusion_proof: z.array(z.string()).openapi({ description: 'RFC 9162 inclusion proof, base64 hashes from the leaf up' }),
    checkpoint: z.string().openapi({ description: 'The signed checkpoint of tree_size (C2SP signed note)' }),
  })
  .openapi('RunLogProof');

const Attestation = z
  .object({
    media_type: z.literal(ATTESTATION_MEDIA_TYPE),
    version: z.literal(1),
    dsse_envelope: Dsse,
    log: LogProofSchema.nullable(),
  })
  .openapi('RunAttestation');

const AttestationQuery = z.object({
  format: z.enum(['bundle', 'dsse', 'scitt']).optional().openapi({
    description:
      'bundle (default): envelope and log proof; dsse: the envelope alone; scitt: the COSE_Sign1 signed statement. Or say it with Accept.',
  }),
  values: z.enum(['true', 'false']).optional().openapi({
    description: 'true: the step inputs and outputs in the statement (needs system.orchestration.admin.read, the values read permission)',
  }),
});

const attestationResponses = {
  200: {
    description: 'The attestation',
    content: {
      'application/json': { schema: Attestation },
      [DSSE_MEDIA_TYPE]: { schema: Dsse },
      [COSE_MEDIA_TYPE]: { schema: z.string().openapi({ format: 'binary' }) },
    },
  },
  ...errorResponses(400, 401, 403, 404, 409),
};

const DESCRIPTION =
  "An in-toto Statement v1 (predicate type `urn:agent-cell:predicate:run:v1`) in a DSSE envelope signed by this cell's identity key (keyid: its kid in /.well-known/cell-keys.json), with the run's place in the run log (inclusion proof and signed checkpoint); or the same statement as a SCITT signed statement (COSE_Sign1). 409 `run_not_finished` for a run still in flight. docs/receipts.md says how to verify it with in-toto, securesystemslib and any COSE library.";

function wanted(format: string | undefined, accept: string | undefined): 'bundle' | 'dsse' | 'scitt' {
  if (format === 'bundle' || format === 'dsse' || format === 'scitt') return format;
  const a = (accept ?? '').toLowerCase();
  if (a.includes(COSE_MEDIA_TYPE)) return 'scitt';
  if (a.includes(DSSE_MEDIA_TYPE)) return 'dsse';
  return 'bundle';
}

export function receiptsRoutes(app: OpenAPIHono<AppEnv>, ctx: ReceiptsContext): void {
  const answer = async (c: Parameters<Parameters<typeof app.openapi>[1]>[0], run: Run): Promise<Response> => {
    const q = c.req.query();
    const withValues = q['values'] === 'true';
    if (withValues && !grants(c.get('auth').effective, PERMISSIONS.jobsRead)) {
      throw new ServiceError('forbidden', 'step values need system.orchestration.admin.read; ask without values=true', {
        details: { reason: 'values_not_readable', missing: PERMISSIONS.jobsRead },
      });
    }
    const format = wanted(q['format'], c.req.header('accept'));
    if (format === 'scitt') {
      const bytes = await signedStatementOf(ctx, run, withValues);
      return new Response(bytes as Uint8Array<ArrayBuffer>, { status: 200, headers: { 'content-type': COSE_MEDIA_TYPE } });
    }
    const bundle = await attestationOf(ctx, run, withValues);
    if (format === 'dsse')
      return new Response(JSON.stringify(bundle.dsse_envelope), { status: 200, headers: { 'content-type': DSSE_MEDIA_TYPE } });
    return c.json(bundle, 200);
  };

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/public/v1/admin/agent-teams/crews/{crew_id}/runs/{run_id}/attestation',
      tags: ['Crews'],
      'x-status': 'Live',
      summary: "A finished crew run's attestation (in-toto in DSSE, or a SCITT signed statement)",
      description: DESCRIPTION,
      ...securedEither(PERMISSIONS.teamsRead, PERMISSIONS.jobsRead),
      request: {
        params: z.object({
          crew_id: z
            .string()
            .max(64)
            .openapi({ param: { name: 'crew_id', in: 'path' } }),
          run_id: runIdPath(),
        }),
        query: AttestationQuery,
      },
      responses: attestationResponses,
    }),
    async (c) => {
      const { crew_id, run_id } = c.req.valid('param');
      const run = await ctx.runs.getRun(run_id);
      if (run?.kind !== 'crew' || run.crew_id !== crew_id) throw notFound('run');
      return (await answer(c, run)) as never;
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/public/v1/admin/jobs/runs/{run_id}/attestation',
      tags: ['Job runs'],
      'x-status': 'Live',
      summary: "A finished run's attestation (job or crew run; in-toto in DSSE, or a SCITT signed statement)",
      description: DESCRIPTION,
      ...secured(PERMISSIONS.jobsRead),
      request: { params: z.object({ run_id: runIdPath() }), query: AttestationQuery },
      responses: attestationResponses,
    }),
    async (c) => {
      const run = await ctx.runs.getRun(c.req.valid('param').run_id);
      if (!run) throw notFound('run');
      return (await answer(c, run)) as never;
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: `${RUN_LOG_PATH}/checkpoint`,
      tags: ['Run log'],
      'x-status': 'Live',
      summary: "The run log's latest checkpoint: origin, tree size and root hash, signed (C2SP signed note)",
      description:
        "Text: `agent-cell/<group id>`, the tree size, the base64 root hash, a blank line and the signature line (`— <origin> <base64(key hash ‖ Ed25519 signature)>`) by this cell's identity key. Keep it: a newer checkpoint must extend it (`…/consistency`).",
      security: [],
      responses: {
        200: { description: 'The signed checkpoint', content: { 'text/plain': { schema: z.string() } } },
        ...errorResponses(),
      },
    }),
    async (c) => {
      const h = await settledHead(ctx);
      return c.body(await checkpointOf(ctx, h), 200, {
        'content-type': 'text/plain; charset=utf-8',
        'cache-control': 'no-store',
        'x-run-log-origin': logOrigin(ctx),
      }) as never;
    },
  );

  const size = (what: string) => z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER).openapi({ description: what });
  const tooBig = (n: number) =>
    new ServiceError('invalid_request', `the run log has no tree of ${n} leaves`, { details: { reason: 'log_size_unknown' } });

  app.openapi(
    createRoute({
      method: 'get',
      path: `${RUN_LOG_PATH}/consistency`,
      tags: ['Run log'],
      'x-status': 'Live',
      summary: 'RFC 9162 consistency proof between two tree sizes of the run log',
      security: [],
      request: {
        query: z.object({
          first: size('The older tree size (default 0)').optional(),
          second: size('The newer tree size, at most the current size (default: the current size)').optional(),
        }),
      },
      responses: {
        200: json(
          z.object({ first: z.number().int(), second: z.number().int(), proof: z.array(z.string()) }).openapi('RunLogConsistency'),
          'The proof, base64 hashes',
        ),
        ...errorResponses(400),
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const h = await currentHead(ctx);
      const first = q.first ?? 0;
      const second = q.second ?? h.size;
      if (second > h.size) throw tooBig(second);
      if (first > second)
        throw new ServiceError('invalid_request', 'first must not exceed second', { details: { reason: 'log_size_unknown' } });
      return c.json(await consistency(ctx, first, second), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: `${RUN_LOG_PATH}/inclusion/{leaf_hash}`,
      tags: ['Run log'],
      'x-status': 'Live',
      summary: 'RFC 9162 inclusion proof of a leaf (by its hash) in a tree size of the run log',
      security: [],
      request: {
        params: z.object({
          leaf_hash: z
            .string()
            .regex(/^[0-9a-f]{64}$/)
            .openapi({
              param: { name: 'leaf_hash', in: 'path' },
              description: "The leaf hash, hex (SHA-256(0x00 ‖ the run's leaf data), docs/receipts.md)",
            }),
        }),
        query: z.object({ tree_size: size('The tree size, at most the current size (default: the current size)').optional() }),
      },
      responses: {
        200: json(
          z
            .object({ leaf_index: z.number().int(), tree_size: z.number().int(), inclusion_proof: z.array(z.string()) })
            .openapi('RunLogInclusion'),
          'The proof',
        ),
        ...errorResponses(400, 404),
      },
    }),
    async (c) => {
      const { leaf_hash } = c.req.valid('param');
      const h = await currentHead(ctx);
      const tree_size = c.req.valid('query').tree_size ?? h.size;
      if (tree_size > h.size) throw tooBig(tree_size);
      const p = await inclusionByHash(ctx, leaf_hash, tree_size);
      if (!p) throw notFound('leaf');
      return c.json(p, 200);
    },
  );

  const Entry = z
    .object({
      leaf_index: z.number().int(),
      run_id: z.string(),
      journal_head: z.string(),
      graph_hash: z.string(),
      source: z
        .string()
        .openapi({ description: '`cell:<cell id>` (a run of the group) or `edge:<device id>` (an imported device journal)' }),
      leaf_hash: z.string(),
      logged_at: IsoTime,
    })
    .openapi('RunLogEntry');

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/public/v1/admin/run-log/entries',
      tags: ['Run log'],
      'x-status': 'Live',
      summary: "The run log's leaves in order, with the runs they name (for monitors)",
      ...secured(PERMISSIONS.jobsRead),
      request: { query: pageQuery(100, 1000) },
      responses: { 200: json(listSchema('entries', Entry, 'RunLogEntries'), 'Leaves from `offset`'), ...errorResponses(400, 401, 403) },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const h = await currentHead(ctx);
      const rows = await entries(ctx, q.offset, q.limit);
      return c.json(
        {
          entries: rows.map((r) => ({
            leaf_index: r.idx,
            run_id: r.run_id,
            journal_head: r.journal_head,
            graph_hash: r.graph_hash,
            source: r.source,
            leaf_hash: r.leaf_hash,
            logged_at: isoTime(r.at),
          })),
          ...pageOf(q, h.size),
        },
        200,
      );
    },
  );
}
