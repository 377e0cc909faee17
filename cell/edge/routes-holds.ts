/**
 * The budgets a device holds (docs/edge.md "Budgets a device holds"), under
 * /api/public/v1/admin/edge/devices/{device_id}: list them, and release them once every crew bundle
 * issued to the device has expired. Releasing gives budget back to the cell, and hands a device nothing;
 * it is acting on the device all the same (its registrant, or one that manages the registrant: the
 * crew-bundle issue's checks), and audited.
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { notFound } from '../../core/errors.ts';
import { isoTime } from '../../core/iso-time.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import type { AppEnv } from '../context.ts';
import { IsoTime, errorResponses, json, listSchema, pageOf, pageQuery, secured, slicePage } from '../http/openapi.ts';
import { outstanding, type LedgerHold } from '../teams/api.ts';
import type { EdgeContext } from './context.ts';
import { deviceFacts } from './devices.ts';
import { DeviceId } from './routes-devices.ts';

const TAG = 'Edge';
const P = '/api/public/v1/admin/edge/devices/{device_id}';
const DeviceParam = z.object({ device_id: DeviceId.openapi({ param: { name: 'device_id', in: 'path' } }) });

const Hold = z
  .object({
    agent_id: z.string(),
    allotted: z.number().int().openapi({ description: 'Tokens handed to the device in crew bundles, in all' }),
    charged: z.number().int().openapi({ description: "Tokens the device's imported journals spent" }),
    released: z.number().int().openapi({ description: 'Tokens given back to the ledger by a release' }),
    outstanding: z
      .number()
      .int()
      .openapi({ description: "allotted − charged − released (never below 0): what the ledger's `held` counts" }),
    until: IsoTime.openapi({ description: 'When the last crew bundle that handed any of it expires: no release before' }),
  })
  .openapi('EdgeBudgetHold');

const Holds = z.object({ device_id: z.string(), holds: z.array(Hold) }).openapi('EdgeBudgetHolds');

const holdView = (h: LedgerHold) => ({
  agent_id: h.agent_id,
  allotted: h.allotted,
  charged: h.charged,
  released: h.released,
  outstanding: outstanding(h),
  until: isoTime(h.until_at),
});

export function holdRoutes(app: OpenAPIHono<AppEnv>, ctx: EdgeContext): void {
  const { core, iam, devices, teams } = ctx;

  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/budget-holds`,
      tags: [TAG],
      'x-status': 'Live',
      summary: "What a device holds of the agents' budget ledgers",
      description: 'One row per agent a crew bundle handed the device budget of, by agent id.',
      ...secured(PERMISSIONS.edgeRead),
      request: { params: DeviceParam, query: pageQuery(100, 1000) },
      responses: {
        200: json(listSchema('holds', Hold, 'EdgeBudgetHoldList'), "The device's holds, by agent id"),
        ...errorResponses(400, 401, 403, 404),
      },
    }),
    async (c) => {
      const deviceId = c.req.valid('param').device_id;
      const q = c.req.valid('query');
      if (!(await devices.get(deviceId))) throw notFound('device');
      // A device holds one row per agent it was handed budget of: read whole, served a page at a time.
      const { items, total } = slicePage((await teams.deviceHolds(deviceId)).map(holdView), q);
      return c.json({ holds: items, ...pageOf(q, total) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/budget-release`,
      tags: [TAG],
      'x-status': 'Live',
      summary: "Give what a device holds of the agents' budgets back to their ledgers",
      description:
        'Allowed once every crew bundle issued to the device has expired (409 `bundle_live` with `details.until` before: the device may spend what it holds until then, and nothing reaches it). ' +
        "Each outstanding hold goes back to its ledger (`held` falls, `released` rises). A journal of the device imported after a release is charged to the ledger all the same, beyond its limit if need be: carry the device's journals back before releasing. " +
        "The device's registrant, or a caller that manages it, may (403 `wider_than_caller`), not with a delegated token; audited `edge.budget.release`.",
      ...secured(PERMISSIONS.edgeWrite),
      request: { params: DeviceParam },
      responses: { 200: json(Holds, "The device's holds after the release"), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const auth = c.get('auth');
      const deviceId = c.req.valid('param').device_id;
      await iam.assertNotDelegated(auth, { action: 'edge.budget.release', target: deviceId });
      const d = await devices.get(deviceId);
      if (!d) throw notFound('device');
      await iam.assertMayActOnCredential(auth, deviceFacts(d), 'edge.budget.release');
      const holds = await core.store.write(async (tx) => {
        const r = await teams.releaseDeviceHolds(tx, deviceId);
        // What this release gave back, by agent (the rows say what every release did in all).
        await iam.audit(tx, {
          at: core.clock.now(),
          actor: auth.principal.id,
          action: 'edge.budget.release',
          target: deviceId,
          outcome: 'ok',
          details: { released: r.released },
        });
        return r.holds;
      });
      return c.json({ device_id: deviceId, holds: holds.map(holdView) }, 200);
    },
  );
}
