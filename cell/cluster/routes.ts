/**
 * `GET /api/public/v1/admin/cells`: the members of the group of cells that
 * share this store, with their state (live / suspect / dead, from the age of
 * their heartbeat), placement attributes and identity key ids. Any cell
 * answers for the whole group. Reading it needs
 * `system.orchestration.admin.read` (the cells are where runs execute).
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { PERMISSIONS } from '../../core/permissions.ts';
import type { AppEnv } from '../context.ts';
import { isoTime, isoTimeOrNull } from '../../core/iso-time.ts';
import { IsoTime, errorResponses, json, listSchema, pageOf, pageQuery, secured, slicePage } from '../http/openapi.ts';
import { MEMBER_STATES, type Cluster } from './cluster.ts';

export const CELLS_PATH = '/api/public/v1/admin/cells';

const CellMember = z
  .object({
    cell_id: z.string(),
    state: z.enum(MEMBER_STATES as [string, ...string[]]).openapi({
      description: 'live: heartbeat within two intervals; suspect: late but within its lease; dead: past its lease, or stopped',
    }),
    self: z.boolean().openapi({ description: 'True for the cell that answered' }),
    region: z.string(),
    clearance: z.number().int(),
    topology: z.record(z.string(), z.string()),
    posture: z.string(),
    url: z.string().nullable().openapi({ description: 'The base URL the cell announced' }),
    heartbeat_ms: z.number().int(),
    lease_ms: z.number().int(),
    started_at: IsoTime,
    heartbeat_at: IsoTime,
    heartbeat_age_ms: z
      .number()
      .int()
      .openapi({ description: "Age of the last heartbeat on the database's clock (the group's one clock)" }),
    clock_offset_ms: z.number().int().nullable().openapi({
      description:
        "The member's clock minus the database's, ms, as it measured at its last heartbeat (null: not measured; 0 on the embedded store). Beyond the member's --max-clock-skew-ms it stands down: no takeovers, no fires, not ready",
    }),
    stopped_at: IsoTime.nullable(),
    key_ids: z.array(z.string()).openapi({ description: 'Its identity keys (kids in /.well-known/cell-keys.json), current and retired' }),
  })
  .openapi('CellMember');

const listCells = createRoute({
  method: 'get',
  path: CELLS_PATH,
  tags: ['Cells'],
  'x-status': 'Live',
  ...secured(PERMISSIONS.jobsRead),
  summary: 'The cells of the group and their state',
  description:
    'Every cell that started on this store, with its state from the age of its heartbeat, its placement attributes (region, clearance, topology), posture and identity key ids. Any cell of the group answers the same list.',
  request: { query: pageQuery(100, 1000) },
  responses: {
    200: json(listSchema('items', CellMember, 'CellMembers'), 'The members: the answering cell first, then by cell id'),
    ...errorResponses(400, 401, 403),
  },
});

/** The identity keys of every cell of the store (the iam module's `groupIdentityKeys`). */
export type IdentityKeys = () => Promise<ReadonlyArray<{ cell_id: string; kid: string }>>;

export function mountCellRoutes(app: OpenAPIHono<AppEnv>, cluster: Cluster, identityKeys: IdentityKeys): void {
  app.openapi(listCells, async (c) => {
    const q = c.req.valid('query');
    const { items: members, total } = slicePage(await cluster.members(), q);
    const keys = await identityKeys();
    return c.json(
      {
        items: members.map((m) => ({
          cell_id: m.cell_id,
          state: m.state,
          self: m.cell_id === cluster.cellId,
          region: m.region,
          clearance: m.clearance,
          topology: m.topology,
          posture: m.posture,
          url: m.url,
          heartbeat_ms: m.heartbeat_ms,
          lease_ms: m.lease_ms,
          started_at: isoTime(m.started_at),
          heartbeat_at: isoTime(m.heartbeat_at),
          heartbeat_age_ms: m.heartbeat_age_ms,
          clock_offset_ms: m.cell_id === cluster.cellId ? cluster.clock().offsetMs : m.clock_offset_ms,
          stopped_at: isoTimeOrNull(m.stopped_at),
          key_ids: keys.filter((k) => k.cell_id === m.cell_id).map((k) => k.kid),
        })),
        ...pageOf(q, total),
      },
      200,
    );
  });
}
