/**
 * Edge routes under /api/public/v1/admin/edge: devices (routes-devices.ts), signed key and crew bundles
 * issued for an active device by whoever may act on it (its registrant, or one that manages the
 * registrant: devices.ts `deviceFacts`), journals carried back (journal-import.ts).
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { PERMISSIONS } from '../../core/permissions.ts';
import { grants } from '../../core/authority/scopes.ts';
import { forbidden, invalid, notFound } from '../../core/errors.ts';
import { splitEnvelope } from '../../bundles/envelope.ts';
import type { ModelReference } from '../../bundles/crew-bundle.ts';
import { crewForEdge } from './crew-source.ts';
import type { AppEnv } from '../context.ts';
import { isoTime } from '../../core/iso-time.ts';
import { IsoTime, errorResponses, json, jsonBody, listSchema, pageOf, pageQuery, secured } from '../http/openapi.ts';
import type { EdgeContext } from './context.ts';
import { deviceFacts } from './devices.ts';
import { DeviceId, deviceRoutes } from './routes-devices.ts';
import { holdRoutes } from './routes-holds.ts';
import { importJournal } from './journal-import.ts';
import * as repo from './repository.ts';
import { mayReadRunWhole, runIdPath } from '../runs/api.ts';
import { MAX_BUNDLE_TTL_SECONDS, issueCrewBundle, issueKeyBundle, issuerOf } from './export.ts';

const TAG = 'Edge';
const P = '/api/public/v1/admin/edge';

const Ttl = z.number().int().min(1).max(MAX_BUNDLE_TTL_SECONDS);

/** Media type of signed artifacts: a canonical JSON header line, then the canonical JSON payload (bundles/envelope.ts). */
export const SIGNED_MEDIA_TYPE = 'application/vnd.agent-cell.signed';
const Signed = z.string().openapi({
  description:
    'A signed artifact: line 1 the header {format, kid, signature}, then the RFC 8785 canonical JSON payload the signature covers. Write it to a file verbatim.',
});
const signedResponse = (description: string) => ({ description, content: { [SIGNED_MEDIA_TYPE]: { schema: Signed } } });

const KeyBundleRequest = z
  .object({
    device_id: DeviceId,
    ttl_seconds: Ttl.optional().openapi({
      description:
        "Lifetime; default 7 days, at most the cell's `--max-key-bundle-ttl` (default 30 days; 400 `ttl_too_long` beyond it). A device honours the keys of a bundle until it expires",
    }),
  })
  .strict()
  .openapi('IssueKeyBundle');

const CrewBundleRequest = z
  .object({
    device_id: DeviceId,
    crew_id: z.string().min(1).max(64),
    model_manifest: z.string().max(65536).optional().openapi({
      description: 'The signed model manifest file (text) the crew runs on at the edge; referenced by model hash and publisher key',
    }),
    ttl_seconds: Ttl.optional().openapi({ description: 'Lifetime; default 30 days' }),
    budgets: z
      .record(z.string().min(1).max(64), z.number().int().min(0).max(1e15))
      .optional()
      .openapi({
        description:
          "Tokens of each agent's budget ledger to hand the device now (held on the ledger for it); an agent not named gets all its ledger has left. " +
          'An agent not in the crew or without a ledger: 400 `share_agent_unbudgeted`; more than its ledger has left: 409 `share_exceeds_budget` (nothing held)',
      }),
  })
  .strict()
  .openapi('IssueCrewBundle');

/** What every view of an imported journal says of it (the import's answer, the list, the journal itself). */
const journalFacts = {
  run_id: z.string(),
  device_id: z.string(),
  crew_id: z.string(),
  graph_hash: z.string(),
  outcome: z.string(),
  record_count: z.number().int(),
};

const JournalImported = z
  .object({
    ...journalFacts,
    verified: z.literal(true),
    imported_at: IsoTime,
  })
  .openapi('EdgeJournalImported');

const ImportedJournal = z
  .object({
    ...journalFacts,
    imported_at: IsoTime,
    records: z.array(z.record(z.string(), z.unknown())),
    values: z.record(z.string(), z.unknown()).optional().openapi({
      description:
        "The export's step inputs and outputs, by content hash (each checked at import); only for a caller that may read a run's values (`system.orchestration.admin.read`, as the cell's run values route), absent otherwise",
    }),
    graph: z
      .record(z.string(), z.unknown())
      .nullable()
      .openapi({ description: 'The graph a crew bundle of this cell carried under the graph hash (its seats and steps), or null' }),
  })
  .openapi('EdgeImportedJournal');

const JournalSummary = z
  .object({
    ...journalFacts,
    imported_at: IsoTime,
  })
  .openapi('EdgeJournalSummary');

function bundleResponse(text: string, version: number) {
  return new Response(text, { status: 201, headers: { 'content-type': SIGNED_MEDIA_TYPE, 'x-bundle-version': String(version) } });
}

/** The crew bundle names the model by the manifest's file hash and publisher key; the device verifies the manifest itself. */
function modelReference(manifest: string | undefined): ModelReference | null {
  if (manifest === undefined) return null;
  const parts = splitEnvelope(manifest);
  let p: { type?: unknown; kid?: unknown; model?: { name?: unknown; sha256?: unknown } } = {};
  try {
    if (parts) p = JSON.parse(parts.payload) as typeof p;
  } catch {
    p = {};
  }
  if (
    !parts ||
    p.type !== 'model-manifest' ||
    typeof p.kid !== 'string' ||
    p.kid !== parts.header['kid'] ||
    typeof p.model?.sha256 !== 'string' ||
    typeof p.model.name !== 'string'
  ) {
    throw invalid('model_manifest is not a signed model manifest', { reason: 'malformed' });
  }
  return { name: p.model.name, sha256: p.model.sha256, publisher_kid: p.kid };
}

export function edgeRoutes(app: OpenAPIHono<AppEnv>, ctx: EdgeContext): void {
  const { core, iam, devices } = ctx;
  deviceRoutes(app, ctx);
  holdRoutes(app, ctx);

  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/key-bundles`,
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Issue a signed API-key records bundle for a device',
      description:
        "The keys of this cell as the device must judge them (hashes only, never secrets), the owners' role permissions at issue time, and tombstones; signed with the cell identity key, audience the device, with a version higher than any issued before. " +
        'A device honours what its bundle carries, so a bundle carries only the credentials the caller could act on: keys whose owner is the caller or a principal it manages and whose authority is within the caller, and, as token subjects, the caller and the principals it manages. ' +
        'The device must be active (409 `device_disabled`, `device_deleted`), and the caller its registrant or one that manages the registrant (403 `wider_than_caller`).',
      ...secured(PERMISSIONS.edgeWrite),
      request: { body: jsonBody(KeyBundleRequest) },
      responses: { 201: signedResponse('The signed key bundle file'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const auth = c.get('auth');
      const body = c.req.valid('json');
      await iam.assertNotDelegated(auth, { action: 'edge.key_bundle.issue', target: body.device_id });
      await iam.assertMayActOnCredential(auth, deviceFacts(await devices.requireActive(body.device_id)), 'edge.key_bundle.issue');
      const b = await issueKeyBundle(ctx, body.device_id, { ttlSeconds: body.ttl_seconds, issuer: issuerOf(auth) });
      await iam.auditNow({
        at: b.issued_at,
        actor: auth.principal.id,
        action: 'edge.key_bundle.issue',
        target: body.device_id,
        outcome: 'ok',
        details: { version: b.version },
      });
      return bundleResponse(b.text, b.version) as never;
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/crew-bundles`,
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Issue a signed crew bundle for a device',
      description:
        "The crew's compiled graph and hash, agents, blueprints, skills, contracts, tool grants and budgets, the catalog entries and pins of its MCP tools (`mcp_tools`), plus the model manifest reference, signed with the cell identity key for one device. " +
        "Issuing holds each agent's share on its budget ledger for the device (`budgets`, by default all the ledger has left), so the cell cannot spend it too: the ledger's `held`. " +
        "The bundle's `budgets[agent]` is the device's cumulative ceiling (all it was handed, less what was released: `POST /admin/edge/devices/{device_id}/budget-release`); the device's journals are charged to the ledger on import. " +
        'A share larger than what a ledger has left is 409 `share_exceeds_budget` (`details.agent_id`, `requested`, `left`), and nothing is held. ' +
        'A crew whose MCP tools are not all pinned in its graph gets none (409 `crew_tools_unpinned`, `details.tools` naming each tool and seat). ' +
        'Exporting a crew needs the right to run it, as starting a run does: `agent_teams.write` too (403 with `required_permission`), and every seat within the caller (403 `wider_than_caller`). ' +
        'The device must be active (409 `device_disabled`, `device_deleted`), and the caller its registrant or one that manages the registrant (403 `wider_than_caller`).',
      ...secured(PERMISSIONS.edgeWrite),
      request: { body: jsonBody(CrewBundleRequest) },
      responses: { 201: signedResponse('The signed crew bundle file'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const auth = c.get('auth');
      const body = c.req.valid('json');
      await iam.assertNotDelegated(auth, { action: 'edge.crew_bundle.issue', target: body.device_id });
      await iam.assertMayActOnCredential(auth, deviceFacts(await devices.requireActive(body.device_id)), 'edge.crew_bundle.issue');
      // The bundle hands the device the crew's prompts, tools and egress: the right to run the crew, as a run's start checks it.
      if (!grants(auth.effective, PERMISSIONS.teamsWrite)) {
        throw forbidden(`the credential lacks the permission ${PERMISSIONS.teamsWrite}`, { required_permission: PERMISSIONS.teamsWrite });
      }
      const crew = await crewForEdge(ctx, body.crew_id, (graph) =>
        ctx.teams.assertSeatsWithinCaller(auth, graph, { action: 'edge.crew_bundle.issue', target: body.crew_id }),
      );
      const b = await issueCrewBundle(ctx, body.device_id, crew, modelReference(body.model_manifest), {
        ttlSeconds: body.ttl_seconds,
        shares: body.budgets,
      });
      await iam.auditNow({
        at: b.issued_at,
        actor: auth.principal.id,
        action: 'edge.crew_bundle.issue',
        target: body.device_id,
        outcome: 'ok',
        details: { version: b.version, crew_id: body.crew_id, held: b.held },
      });
      return bundleResponse(b.text, b.version) as never;
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/journals`,
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Imported device journals (of one device with `device_id`), newest import first',
      ...secured(PERMISSIONS.edgeRead),
      request: { query: pageQuery(100, 1000).extend({ device_id: DeviceId.optional() }) },
      responses: {
        200: json(listSchema('journals', JournalSummary, 'EdgeJournalList'), 'Summaries, newest import first'),
        ...errorResponses(400, 401, 403),
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const rows = await repo.journalsOfDevice(core.store, q.device_id ?? null, q.limit, q.offset);
      return c.json(
        {
          journals: rows.map((r) => ({ ...r, imported_at: isoTime(r.imported_at) })),
          ...pageOf(q, await repo.countJournalsOfDevice(core.store, q.device_id ?? null)),
        },
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/journals/{run_id}`,
      tags: [TAG],
      'x-status': 'Live',
      summary: 'An imported device journal: the run summary and its verified records',
      ...secured(PERMISSIONS.edgeRead),
      request: {
        params: z.object({
          run_id: runIdPath(),
        }),
      },
      responses: { 200: json(ImportedJournal, 'The journal as imported (verified at import)'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const row = await repo.journalByRun(core.store, c.req.valid('param').run_id);
      if (!row) throw notFound('journal');
      const payload = JSON.parse(splitEnvelope(row.export)!.payload) as {
        records: Record<string, unknown>[];
        values: Record<string, unknown>;
      };
      const graph = await repo.crewGraphByHash(core.store, row.graph_hash);
      return c.json(
        {
          run_id: row.run_id,
          device_id: row.device_id,
          crew_id: row.crew_id,
          graph_hash: row.graph_hash,
          outcome: row.outcome,
          record_count: row.record_count,
          imported_at: isoTime(row.imported_at),
          records: payload.records,
          // The step values are a run's content (prompts, answers, tool arguments): the run values route's permission.
          ...(mayReadRunWhole(c.get('auth')) ? { values: payload.values } : {}),
          graph: graph === undefined ? null : (JSON.parse(graph) as Record<string, unknown>),
        },
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/journals`,
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Import a run journal exported by a device; verifies every signature and the chain',
      description:
        'The export must be signed by a registered device (404 otherwise) that is active (409 `device_disabled`, `device_deleted`), and its run id must be the one that device derives from the ' +
        "carried run nonce (403 `run_not_of_device`): a device cannot import under another device's run id. Format 1 exports carry " +
        'no nonce and are refused (403 `run_unbound`). Only a run that ended is imported, and its outcome must be the one its records end ' +
        'with (403 `outcome_mismatch`); a `completed` journal must replay to completion on the graph a crew bundle of this cell carried ' +
        '(403 `outcome_mismatch`; 400 `unknown_graph` when no bundle carried it). A fork names a parent imported here (409 `parent_unknown`) ' +
        'and its lineage must verify against it (403 `journal_invalid`). Every MCP tool call must name a tool the crew bundle carried, under ' +
        'its pin (403 `journal_tool_unpinned`, naming the record). The same export again is idempotent; a longer journal of the run ' +
        'that extends the imported one replaces it; any other export for an imported run is 409 `journal_exists`.',
      ...secured(PERMISSIONS.edgeWrite),
      request: {
        body: {
          required: true,
          content: { [SIGNED_MEDIA_TYPE]: { schema: Signed } },
          description: 'The file written by `edge journal export`',
        },
      },
      responses: { 201: json(JournalImported, 'The journal verified and was stored'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const j = await importJournal(ctx, c.get('auth'), await c.req.text());
      return c.json({ ...j, verified: true as const, imported_at: isoTime(j.imported_at) }, 201);
    },
  );
}
