/** API key operations: mint (for self or another entity), list, get, rotate, revoke. */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { effectiveAuthority, grants, intersectSelectors, isSelector } from '../../core/authority/scopes.ts';
import { authoritySchema } from '../../core/authority/schema.ts';
import { meetCeilings } from '../../core/authority/ceiling.ts';
import type { AuthorityEnvelope } from '../../core/authority/envelope.ts';
import { parseIpRule } from '../../core/apikey/network.ts';
import { invalid, notFound } from '../../core/errors.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import type { AppEnv, AuthContext, CellCore } from '../context.ts';
import { IsoTime, errorResponses, json, jsonBody, listSchema, pageOf, pageQuery, secured } from '../http/openapi.ts';
import { SerializedViews } from '../http/serialized-views.ts';
import type { CredentialFacts, Iam } from './iam.ts';
import { keyView, mintKeyTx, revokeKeyTx, rotateKeyTx, type KeyRow } from './keys.ts';
import { countKeys, listKeys } from './repository.ts';

const TAG = 'API keys';

const Scope = z.string().refine(isSelector, 'not a permission selector').openapi({ example: 'system.orchestration.admin.read' });
const IpRule = z
  .string()
  .max(64)
  .refine((s) => parseIpRule(s) !== null, 'not an IP address or CIDR')
  .openapi({ example: '10.0.0.0/8' });

const MintBody = z
  .object({
    name: z.string().min(1).max(100),
    owner_id: z.string().max(40).optional().openapi({ description: 'Mint for another principal the caller manages; default: the caller' }),
    scopes: z.array(Scope).max(64).optional().openapi({ description: "Empty or `*`: the owner's full authority; otherwise narrows" }),
    rate_limit_rpm: z
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .nullable()
      .optional()
      .openapi({ description: 'Per-key requests-per-minute ceiling; default none' }),
    allowed_ips: z.array(IpRule).max(64).optional().openapi({ description: 'Exact addresses or CIDR ranges, IPv4 or IPv6; default any' }),
    allowed_regions: z
      .array(z.string().min(1).max(64))
      .max(64)
      .optional()
      .openapi({ description: 'Regions the key may be served from; default any' }),
    expires_at: z.iso.datetime({ offset: true }).nullable().optional().openapi({ description: 'RFC 3339; default never' }),
    authority: authoritySchema.nullable().optional().openapi({
      description:
        "Envelope cap (clearance, data grants, egress, tools, compartments) for what this key may run or hand out; default: the owner's full ceiling. Never wider than the minting credential's.",
    }),
  })
  .strict()
  .openapi('MintApiKey');

const KeyView = z
  .object({
    key_id: z.string(),
    owner_id: z.string(),
    name: z.string(),
    status: z.enum(['active', 'revoked', 'soft_deleted', 'purged']),
    scopes: z.array(z.string()),
    rate_limit_rpm: z.number().int().nullable(),
    allowed_ips: z.array(z.string()),
    allowed_regions: z.array(z.string()),
    created_at: IsoTime,
    created_by: z.string(),
    expires_at: IsoTime.nullable(),
    rotated_at: IsoTime.nullable(),
    previous_secret_valid_until: IsoTime.nullable(),
    revoked_at: IsoTime.nullable(),
    authority: z
      .union([z.literal('unbounded'), z.record(z.string(), z.unknown())])
      .nullable()
      .openapi({ description: "The key's envelope cap; null: its owner's full ceiling" }),
  })
  .openapi('ApiKey');

const KeyWithSecret = KeyView.extend({
  secret: z.string().openapi({ description: 'Shown once, now. Only its SHA-256 is stored.', example: 'svck_live_…' }),
}).openapi('ApiKeyWithSecret');

/** An API key as the API shows it (`keyView` builds it). */
export type ApiKeyView = z.infer<typeof KeyView>;
/** An API key with its new secret, shown once. */
export type ApiKeyWithSecretView = z.infer<typeof KeyWithSecret>;

const MintedKey = KeyWithSecret.extend({
  effective_permissions: z.array(z.string()).openapi({
    description: "What the key grants now: its scopes within its owner's roles (all of the roles' permissions when it has no scopes)",
  }),
  warnings: z
    .array(z.object({ code: z.literal('scopes_outside_owner_roles'), message: z.string(), scopes: z.array(z.string()) }))
    .openapi({ description: "Empty, or `scopes_outside_owner_roles` naming scopes that grant nothing under the owner's roles" }),
}).openapi('MintedApiKey');

const KeyId = z.object({
  key_id: z
    .string()
    .regex(/^key_[0-9a-f]{20}$/)
    .openapi({ param: { name: 'key_id', in: 'path' } }),
});

const RotateBody = z
  .object({
    grace_seconds: z
      .number()
      .int()
      .min(0)
      .optional()
      .openapi({ description: "How long the previous secret keeps verifying; default and ceiling: the cell's rotation grace window" }),
  })
  .strict()
  .openapi('RotateApiKey');

/**
 * The key, or the same 404 whether it does not exist or belongs to a principal
 * the caller may not see: a key id is never an existence oracle.
 */
async function visibleKey(iam: Iam, auth: AuthContext, id: string, fresh = false): Promise<KeyRow> {
  const row = await (fresh ? iam.keyRowFresh(id) : iam.keyRow(id));
  if (row) {
    try {
      await iam.visiblePrincipal(auth, row.owner_id);
      return row;
    } catch {
      // fall through to the one answer
    }
  }
  throw notFound('API key');
}

export function keyRoutes(app: OpenAPIHono<AppEnv>, core: CellCore, iam: Iam): void {
  // A key by id comes from iam's cache: its view's text is built once per cached row.
  const keyViews = new SerializedViews((row: KeyRow) => keyView(row));
  const { store, clock } = core;
  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/public/v1/admin/api-keys',
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Mint an API key (secret shown once)',
      ...secured(PERMISSIONS.keysWrite),
      request: { body: jsonBody(MintBody) },
      description:
        "Answers `effective_permissions`: what the key grants now, its scopes within its owner's roles. A scope that grants nothing under the owner's roles is not refused (a role may be granted later) but named in `warnings` (`scopes_outside_owner_roles`).",
      responses: { 201: json(MintedKey, 'The new key and its secret'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const auth = c.get('auth');
      await iam.assertNotDelegated(auth, { action: 'api_key.mint', target: auth.principal.id });
      const input = c.req.valid('json');
      const body = {
        ...input,
        scopes: input.scopes ?? [],
        rate_limit_rpm: input.rate_limit_rpm ?? null,
        allowed_ips: input.allowed_ips ?? [],
        allowed_regions: input.allowed_regions ?? [],
        expires_at: input.expires_at ?? null,
      };
      const owner = await iam.visiblePrincipal(auth, body.owner_id ?? auth.principal.id);
      if (owner.status !== 'active') throw invalid('the owner is not active', { reason: 'owner_inactive' });
      // Minting for another principal is acting on it: the caller must hold all of its authority.
      if (owner.id !== auth.principal.id) await iam.assertManages(auth, owner, 'api_key.mint');
      const cap = (body.authority ?? null) as AuthorityEnvelope | null;
      const ownerPermissions = await iam.permissionsOf(owner);
      const effective = effectiveAuthority(ownerPermissions, body.scopes);
      await iam.assertWithinCaller(
        auth,
        {
          permissions: effective,
          envelope: cap === null ? owner.authority : meetCeilings(owner.authority, cap),
        },
        { action: 'api_key.mint', target: owner.id },
      );
      const expiresAt = body.expires_at === null ? null : Date.parse(body.expires_at);
      if (expiresAt !== null && expiresAt <= clock.now()) throw invalid('expires_at is in the past');
      const { row, secret } = await store.write(async (tx) => {
        const minted = await mintKeyTx(clock, tx, {
          ownerId: owner.id,
          name: body.name,
          scopes: body.scopes,
          rateLimitRpm: body.rate_limit_rpm,
          allowedIps: body.allowed_ips,
          allowedRegions: body.allowed_regions,
          expiresAt,
          createdBy: auth.principal.id,
          authority: cap,
        });
        await iam.audit(tx, {
          actor: auth.principal.id,
          action: 'api_key.mint',
          target: minted.row.id,
          outcome: 'ok',
          details: { owner_id: owner.id, scopes: body.scopes },
        });
        return minted;
      });
      // Issue 25: a key whose scopes lie outside its owner's roles used to look fine and grant nothing.
      const outside = body.scopes.filter((sc) => sc !== '*' && intersectSelectors(ownerPermissions, [sc]).length === 0);
      const warnings =
        outside.length > 0
          ? [
              {
                code: 'scopes_outside_owner_roles' as const,
                message: `these scopes grant nothing under the owner's roles: ${outside.join(', ')}`,
                scopes: outside,
              },
            ]
          : [];
      return c.json({ ...keyView(row, secret), effective_permissions: effective, warnings }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/public/v1/admin/api-keys',
      tags: [TAG],
      'x-status': 'Live',
      summary: "List API keys (never secrets). Without iam.principals.read, only the caller's own.",
      ...secured(PERMISSIONS.keysRead),
      request: { query: pageQuery(100, 1000).extend({ owner_id: z.string().max(40).optional() }) },
      responses: {
        200: json(listSchema('keys', KeyView, 'ApiKeyList'), 'Keys, oldest first'),
        ...errorResponses(400, 401, 403, 404),
      },
    }),
    async (c) => {
      const auth = c.get('auth');
      const q = c.req.valid('query');
      const ownerId = q.owner_id ?? (visibleAll(auth) ? undefined : auth.principal.id);
      if (ownerId) await iam.visiblePrincipal(auth, ownerId);
      const keys = (await listKeys(store, q.limit, q.offset, ownerId)).map((r) => keyView(r));
      return c.json({ keys, ...pageOf(q, await countKeys(store, ownerId)) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/public/v1/admin/api-keys/{key_id}',
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Get an API key (never its secret)',
      ...secured(PERMISSIONS.keysRead),
      request: { params: KeyId },
      responses: { 200: json(KeyView, 'The key'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const row = await visibleKey(iam, c.get('auth'), c.req.valid('param').key_id);
      return keyViews.answer(c, row, undefined, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/public/v1/admin/api-keys/{key_id}/rotate',
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Rotate: a new secret (shown once); the previous one verifies for a bounded grace window',
      ...secured(PERMISSIONS.keysWrite),
      request: { params: KeyId, body: { required: false, content: { 'application/json': { schema: RotateBody } } } },
      responses: { 200: json(KeyWithSecret, 'The key and its new secret'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const auth = c.get('auth');
      const row = await visibleKey(iam, auth, c.req.valid('param').key_id, true);
      await iam.assertNotDelegated(auth, { action: 'api_key.rotate', target: row.id });
      // A new secret carries the whole key's authority: only a caller that could have minted the key
      // (manages its owner, holds all of it) may receive one.
      await iam.assertMayActOnCredential(auth, await keyFacts(iam, row), 'api_key.rotate');
      const body = c.req.valid('json') ?? {};
      const max = core.config.keyRotationGraceSeconds;
      const grace = Math.min(body.grace_seconds ?? max, max);
      const { row: next, secret } = await store.write(async (tx) => {
        const r = await rotateKeyTx(clock, tx, row, grace);
        await iam.audit(tx, {
          actor: auth.principal.id,
          action: 'api_key.rotate',
          target: row.id,
          outcome: 'ok',
          details: { grace_seconds: grace },
        });
        return r;
      });
      return c.json(keyView(next, secret), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/public/v1/admin/api-keys/{key_id}/revoke',
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Revoke: every presentation refused, current and previous secret alike (idempotent)',
      ...secured(PERMISSIONS.keysWrite),
      request: { params: KeyId },
      responses: { 200: json(KeyView, 'The revoked key'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const auth = c.get('auth');
      const row = await visibleKey(iam, auth, c.req.valid('param').key_id, true);
      await iam.assertMayActOnCredential(auth, await keyFacts(iam, row), 'api_key.revoke');
      const next = await store.write(async (tx) => {
        const r = await revokeKeyTx(clock, tx, row);
        await iam.audit(tx, { actor: auth.principal.id, action: 'api_key.revoke', target: row.id, outcome: 'ok' });
        return r;
      });
      return c.json(keyView(next), 200);
    },
  );
}

/** A key as the right to act on a credential sees it. */
async function keyFacts(iam: Iam, row: KeyRow): Promise<CredentialFacts> {
  return { kind: 'api_key', id: row.id, ownerId: row.owner_id, authority: await iam.keyAuthority(row) };
}

function visibleAll(auth: AuthContext): boolean {
  return grants(auth.effective, PERMISSIONS.principalsRead);
}
