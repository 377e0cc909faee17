/**
 * Edge routes under /api/public/v1/admin/edge: register devices, issue signed
 * key and crew bundles for a device, import journals carried back.
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { PERMISSIONS } from '../../core/permissions.ts';
import { ServiceError, conflict, invalid, notFound } from '../../core/errors.ts';
import { openJournalExport } from '../../bundles/journal-export.ts';
import { recordHash } from '../../core/journal/hash.ts';
import { splitEnvelope } from '../../bundles/envelope.ts';
import type { ModelReference } from '../../bundles/crew-bundle.ts';
import type { Graph } from '../../core/engine/types.ts';
import { crewForEdge } from './crew-source.ts';
import type { AppEnv } from '../context.ts';
import { isoTime } from '../../core/iso-time.ts';
import { IsoTime, errorResponses, json, jsonBody, listSchema, pageOf, pageQuery, secured } from '../http/openapi.ts';
import type { EdgeContext } from './context.ts';
import { deviceKey, deviceView, registerDeviceTx } from './devices.ts';
import * as repo from './repository.ts';
import { runIdPath } from '../runs/api.ts';
import { MAX_BUNDLE_TTL_SECONDS, issueCrewBundle, issueKeyBundle, trustAnchor } from './export.ts';

const TAG = 'Edge';
const P = '/api/public/v1/admin/edge';

const Jwk = z
  .object({ kty: z.literal('OKP'), crv: z.literal('Ed25519'), x: z.string().max(64) })
  .passthrough()
  .openapi('Ed25519PublicJwk');

const RegisterDevice = z
  .object({
    name: z.string().min(1).max(100),
    public_jwk: Jwk.openapi({ description: 'The device public key printed by `edge init`' }),
  })
  .strict()
  .openapi('RegisterEdgeDevice');

const TrustAnchor = z
  .object({
    cell_id: z.string(),
    keys: z.array(z.object({ kid: z.string(), jwk: z.record(z.string(), z.unknown()) })),
  })
  .openapi('EdgeTrustAnchor');

const Device = z
  .object({
    device_id: z.string().openapi({ description: 'RFC 7638 thumbprint of the device key; bundles name it as audience' }),
    name: z.string(),
    public_jwk: z.record(z.string(), z.unknown()),
    created_at: IsoTime,
    created_by: z.string(),
  })
  .openapi('EdgeDevice');

const DeviceRegistered = Device.extend({
  trust: TrustAnchor.openapi({ description: 'Save as a file and pin it on the device with `edge trust --file`' }),
}).openapi('EdgeDeviceRegistered');

const DeviceId = z
  .string()
  .regex(/^[A-Za-z0-9_-]{43}$/)
  .openapi({ description: 'device_id from registration' });
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
    ttl_seconds: Ttl.optional().openapi({ description: 'Lifetime; default 7 days' }),
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
  })
  .strict()
  .openapi('IssueCrewBundle');

const JournalImported = z
  .object({
    run_id: z.string(),
    device_id: z.string(),
    crew_id: z.string(),
    graph_hash: z.string(),
    outcome: z.string(),
    record_count: z.number().int(),
    verified: z.literal(true),
    imported_at: IsoTime,
  })
  .openapi('EdgeJournalImported');

const ImportedJournal = z
  .object({
    run_id: z.string(),
    device_id: z.string(),
    crew_id: z.string(),
    graph_hash: z.string(),
    outcome: z.string(),
    record_count: z.number().int(),
    imported_at: IsoTime,
    records: z.array(z.record(z.string(), z.unknown())),
  })
  .openapi('EdgeImportedJournal');

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
  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/devices`,
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Register an edge device public key; returns the trust anchor the device pins',
      ...secured(PERMISSIONS.edgeWrite),
      request: { body: jsonBody(RegisterDevice) },
      responses: { 201: json(DeviceRegistered, 'The registered device and the cell trust anchor'), ...errorResponses(400, 401, 403, 409) },
    }),
    async (c) => {
      const auth = c.get('auth');
      await iam.assertNotDelegated(auth, { action: 'edge.device.register', target: auth.principal.id });
      const body = c.req.valid('json');
      const { jwk, deviceId } = deviceKey(body.public_jwk);
      const row = {
        device_id: deviceId,
        name: body.name,
        public_jwk: JSON.stringify(jwk),
        created_at: core.clock.now(),
        created_by: auth.principal.id,
      };
      await core.store.write(async (tx) => {
        await registerDeviceTx(tx, row);
        await iam.audit(tx, {
          at: row.created_at,
          actor: auth.principal.id,
          action: 'edge.device.register',
          target: deviceId,
          outcome: 'ok',
        });
      });
      const anchor = await trustAnchor(ctx);
      return c.json(
        {
          ...deviceView(row),
          trust: { cell_id: anchor.cell_id, keys: anchor.keys.map((k) => ({ kid: k.kid, jwk: { ...k.jwk } as Record<string, unknown> })) },
        },
        201,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/devices`,
      tags: [TAG],
      'x-status': 'Live',
      summary: 'List registered edge devices',
      ...secured(PERMISSIONS.edgeRead),
      request: { query: pageQuery(100, 1000) },
      responses: { 200: json(listSchema('devices', Device, 'EdgeDeviceList'), 'Devices, oldest first'), ...errorResponses(400, 401, 403) },
    }),
    async (c) => {
      const q = c.req.valid('query');
      return c.json({ devices: (await devices.list(q.limit, q.offset)).map(deviceView), ...pageOf(q, await devices.count()) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/key-bundles`,
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Issue a signed API-key records bundle for a device',
      description:
        "Every key of this cell as the device must judge it (hashes only, never secrets), the owners' role permissions at issue time, and tombstones; signed with the cell identity key, audience the device, with a version higher than any issued before.",
      ...secured(PERMISSIONS.edgeWrite),
      request: { body: jsonBody(KeyBundleRequest) },
      responses: { 201: signedResponse('The signed key bundle file'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const auth = c.get('auth');
      const body = c.req.valid('json');
      await iam.assertNotDelegated(auth, { action: 'edge.key_bundle.issue', target: body.device_id });
      const b = await issueKeyBundle(ctx, body.device_id, body.ttl_seconds);
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
        "The crew's compiled graph and hash, agents, blueprints, skills, contracts, tool grants and remaining budgets, plus the model manifest reference, signed with the cell identity key for one device.",
      ...secured(PERMISSIONS.edgeWrite),
      request: { body: jsonBody(CrewBundleRequest) },
      responses: { 201: signedResponse('The signed crew bundle file'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const auth = c.get('auth');
      const body = c.req.valid('json');
      await iam.assertNotDelegated(auth, { action: 'edge.crew_bundle.issue', target: body.device_id });
      await devices.require(body.device_id);
      const crew = await crewForEdge(ctx.teams, body.crew_id);
      // Exporting a crew hands its seats to a device: the right to run it (every seat within the caller).
      await ctx.teams.assertSeatsWithinCaller(auth, crew.graph as Graph, { action: 'edge.crew_bundle.issue', target: body.crew_id });
      const b = await issueCrewBundle(ctx, body.device_id, crew, modelReference(body.model_manifest), body.ttl_seconds);
      await iam.auditNow({
        at: b.issued_at,
        actor: auth.principal.id,
        action: 'edge.crew_bundle.issue',
        target: body.device_id,
        outcome: 'ok',
        details: { version: b.version, crew_id: body.crew_id },
      });
      return bundleResponse(b.text, b.version) as never;
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
      const payload = JSON.parse(splitEnvelope(row.export)!.payload) as { records: Record<string, unknown>[] };
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
        'The export must be signed by a registered device (404 otherwise), and its run id must be the one that device derives from the ' +
        "carried run nonce (403 `run_not_of_device`): a device cannot import under another device's run id. Format 1 exports carry " +
        'no nonce and are refused (403 `run_unbound`). The same export again is idempotent; another export for an imported run is 409 `journal_exists`.',
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
      const auth = c.get('auth');
      const text = await c.req.text();
      const parts = splitEnvelope(text);
      if (!parts || typeof parts.header['kid'] !== 'string')
        throw invalid('the body is not a signed journal export', { reason: 'malformed' });
      const device = await devices.get(parts.header['kid']);
      if (!device) throw notFound('device');
      let opened;
      try {
        opened = await openJournalExport(
          text,
          { kid: device.device_id, jwk: JSON.parse(device.public_jwk) as JsonWebKey },
          core.config.groupId,
        );
      } catch (e) {
        await iam.auditNow({
          actor: auth.principal.id,
          action: 'edge.journal.import',
          target: device.device_id,
          outcome: 'refused',
          details: { reason: (e as ServiceError).details?.['reason'] ?? 'invalid' },
        });
        throw e;
      }
      const p = opened.payload;
      if (p.format_version === 1) {
        // A format 1 export carries no run nonce: its run id is bound to no device, and importing it would
        // let any registered device take another device's run id first (issue 20, finding 17).
        await iam.auditNow({
          actor: auth.principal.id,
          action: 'edge.journal.import',
          target: device.device_id,
          outcome: 'refused',
          details: { reason: 'run_unbound', run_id: p.run.run_id },
        });
        throw new ServiceError(
          'forbidden',
          'a format 1 journal export does not bind its run id to the device that ran it; runs made by an edge of this release are importable',
          { details: { reason: 'run_unbound' } },
        );
      }
      const now = core.clock.now();
      await core.store.write(async (tx) => {
        const existing = await repo.journalByRun(tx, p.run.run_id);
        if (existing && existing.hash !== opened.hash)
          throw conflict('a different journal for this run was already imported', { reason: 'journal_exists' });
        if (!existing) {
          await repo.insertJournal(tx, {
            run_id: p.run.run_id,
            device_id: device.device_id,
            crew_id: p.run.crew_id,
            graph_hash: p.run.graph_hash,
            outcome: p.run.outcome,
            record_count: p.records.length,
            hash: opened.hash,
            export: text,
            imported_at: now,
            imported_by: auth.principal.id,
          });
          // The device's run joins the run log, as a run of the group does when it ends.
          await ctx.runLog.queueTx(
            tx,
            { run_id: p.run.run_id, journal_head: recordHash(p.records.at(-1)!), graph_hash: p.run.graph_hash },
            `edge:${device.device_id}`,
          );
        }
        await iam.audit(tx, {
          at: now,
          actor: auth.principal.id,
          action: 'edge.journal.import',
          target: device.device_id,
          outcome: 'ok',
          details: { run_id: p.run.run_id },
        });
      });
      return c.json(
        {
          run_id: p.run.run_id,
          device_id: device.device_id,
          crew_id: p.run.crew_id,
          graph_hash: p.run.graph_hash,
          outcome: p.run.outcome,
          record_count: p.records.length,
          verified: true as const,
          imported_at: isoTime(now),
        },
        201,
      );
    },
  );
}
