/**
 * Device routes under /api/public/v1/admin/edge/devices: register a device key (the answer is the trust
 * anchor it pins), list devices, disable, enable and (softly) delete one. Changing a device's state is
 * acting on its registrant's credential (devices.ts `deviceFacts`, the containment rule): the registrant,
 * or a caller that manages the registrant, may; each change is audited.
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { conflict, notFound } from '../../core/errors.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import type { AppEnv, AuthContext } from '../context.ts';
import { IsoTime, errorResponses, json, jsonBody, listSchema, pageOf, pageQuery, secured } from '../http/openapi.ts';
import type { EdgeContext } from './context.ts';
import { deviceFacts, deviceKey, deviceView, registerDeviceTx, type DeviceRow } from './devices.ts';
import { trustAnchor } from './export.ts';
import { DEVICE_STATUSES, setDeviceStatus, type DeviceStatus } from './repository.ts';

const TAG = 'Edge';
const P = '/api/public/v1/admin/edge/devices';

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
    status: z.enum(DEVICE_STATUSES).openapi({
      description: '`active`; `disabled`: no bundle, no token for its audience, no journal import until enabled; `deleted`',
    }),
    status_changed_at: IsoTime.nullable(),
    status_changed_by: z.string().nullable(),
  })
  .openapi('EdgeDevice');

const DeviceRegistered = Device.extend({
  trust: TrustAnchor.openapi({ description: 'Save as a file and pin it on the device with `edge trust --file`' }),
}).openapi('EdgeDeviceRegistered');

export const DeviceId = z
  .string()
  .regex(/^[A-Za-z0-9_-]{43}$/)
  .openapi({ description: 'device_id from registration' });
const DeviceParam = z.object({ device_id: DeviceId.openapi({ param: { name: 'device_id', in: 'path' } }) });

/** A change of a device's state: from which states, to which, and what it is called on the audit trail. */
interface Change {
  to: DeviceStatus;
  action: string;
  summary: string;
  description: string;
}

const CHANGES: Record<'disable' | 'enable', Change> = {
  disable: {
    to: 'disabled',
    action: 'edge.device.disable',
    summary: 'Disable an edge device (idempotent)',
    description:
      'No key or crew bundle is issued for a disabled device, no token is issued for its audience (`edge:<device_id>`), and no journal it signed is imported (409 `device_disabled`), until it is enabled. What the device already holds lives until it expires: a disabled device is also one to stop carrying bundles to.',
  },
  enable: {
    to: 'active',
    action: 'edge.device.enable',
    summary: 'Enable a disabled edge device again (idempotent)',
    description: 'A deleted device cannot be enabled (409 `device_deleted`).',
  },
};

export function deviceRoutes(app: OpenAPIHono<AppEnv>, ctx: EdgeContext): void {
  const { core, iam, devices } = ctx;

  /** The device in any state (deleted too), or 404. */
  const known = async (deviceId: string): Promise<DeviceRow> => {
    const d = await devices.get(deviceId);
    if (!d) throw notFound('device');
    return d;
  };

  /** Sets the device's status (audited), after the caller was found to be one that may act on it. */
  const change = async (auth: AuthContext, d: DeviceRow, to: DeviceStatus, action: string): Promise<DeviceRow> => {
    await iam.assertMayActOnCredential(auth, deviceFacts(d), action);
    if (d.status === to) return d;
    const at = core.clock.now();
    await core.store.write(async (tx) => {
      await setDeviceStatus(tx, d.device_id, to, at, auth.principal.id);
      await iam.audit(tx, { at, actor: auth.principal.id, action, target: d.device_id, outcome: 'ok', details: { from: d.status } });
    });
    return { ...d, status: to, status_at: at, status_by: auth.principal.id };
  };

  app.openapi(
    createRoute({
      method: 'post',
      path: P,
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Register an edge device public key; returns the trust anchor the device pins',
      ...secured(PERMISSIONS.edgeWrite),
      request: { body: jsonBody(RegisterDevice) },
      responses: { 201: json(DeviceRegistered, 'The registered device and the cell trust anchor'), ...errorResponses(400, 401, 403, 409) },
    }),
    async (c) => {
      const auth = c.get('auth');
      // A device is standing authority's destination: a delegated token registers none (rule 1).
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
          ...deviceView({ ...row, status: 'active', status_at: null, status_by: null }),
          trust: { cell_id: anchor.cell_id, keys: anchor.keys.map((k) => ({ kid: k.kid, jwk: { ...k.jwk } as Record<string, unknown> })) },
        },
        201,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: P,
      tags: [TAG],
      'x-status': 'Live',
      summary: 'List registered edge devices',
      description: 'Oldest first. Deleted devices only with `include_deleted=true`.',
      ...secured(PERMISSIONS.edgeRead),
      request: { query: pageQuery(100, 1000).extend({ include_deleted: z.enum(['true', 'false']).default('false') }) },
      responses: { 200: json(listSchema('devices', Device, 'EdgeDeviceList'), 'Devices, oldest first'), ...errorResponses(400, 401, 403) },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const all = q.include_deleted === 'true';
      return c.json({ devices: (await devices.list(q.limit, q.offset, all)).map(deviceView), ...pageOf(q, await devices.count(all)) }, 200);
    },
  );

  for (const [verb, ch] of Object.entries(CHANGES)) {
    app.openapi(
      createRoute({
        method: 'post',
        path: `${P}/{device_id}/${verb}`,
        tags: [TAG],
        'x-status': 'Live',
        summary: ch.summary,
        description: `${ch.description} The device's registrant, or a caller that manages it, may (403 \`wider_than_caller\` otherwise, audited).`,
        ...secured(PERMISSIONS.edgeWrite),
        request: { params: DeviceParam },
        responses: { 200: json(Device, 'The device'), ...errorResponses(400, 401, 403, 404, 409) },
      }),
      async (c) => {
        const auth = c.get('auth');
        // Enabling gives a device bundles and tokens again: a delegated token does not (as it enables no definition).
        if (ch.to === 'active') await iam.assertNotDelegated(auth, { action: ch.action, target: c.req.valid('param').device_id });
        const d = await known(c.req.valid('param').device_id);
        // A deleted device stays deleted.
        if (d.status === 'deleted') throw conflict('the device was deleted', { reason: 'device_deleted', device_id: d.device_id });
        return c.json(deviceView(await change(auth, d, ch.to, ch.action)), 200);
      },
    );
  }

  app.openapi(
    createRoute({
      method: 'delete',
      path: `${P}/{device_id}`,
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Delete an edge device (soft, idempotent)',
      description:
        "A deleted device is disabled for good: it is listed only with `include_deleted=true`, its journals stay and keep naming it, and its key cannot be registered again (a device starts over with `edge init`, a new key). The device's registrant, or a caller that manages it, may (403 `wider_than_caller` otherwise, audited).",
      ...secured(PERMISSIONS.edgeWrite),
      request: { params: DeviceParam },
      responses: { 200: json(Device, 'The deleted device'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const auth = c.get('auth');
      const d = await known(c.req.valid('param').device_id);
      return c.json(deviceView(await change(auth, d, 'deleted', 'edge.device.delete')), 200);
    },
  );
}
