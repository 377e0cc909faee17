/**
 * The create, list and get routes every collection of Agent Teams has
 * (skills, blueprints, agents, contracts, formations, crews), in one place:
 * each room's route file says only what differs (schemas, summaries, the
 * refusals a create documents, how one is made, read and shown).
 *
 * - `POST /agent-teams/<kind>` (agent_teams.write): 201 with what `make` answers;
 * - `GET /agent-teams/<kind>` (agent_teams.read): a page, `{ <kind>: [...], limit, offset, total }`;
 * - `GET /agent-teams/<kind>/{<id>}` (agent_teams.read): one, or 404 naming `what`.
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import type { ZodType } from 'zod';
import { notFound } from '../../core/errors.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import type { AppEnv, AuthContext } from '../context.ts';
import {
  type ErrorStatusCode,
  type Page,
  errorResponses,
  json,
  jsonBody,
  listSchema,
  pageOf,
  pageQuery,
  secured,
} from '../http/openapi.ts';
import type { TeamsContext } from './context.ts';
import { type Listed, countListed } from './repository.ts';

const P = '/api/public/v1/admin/agent-teams';

/** A path parameter naming one item (`skill_id`), at most 64 characters. */
export const idParam = (n: string) =>
  z.object({
    [n]: z
      .string()
      .max(64)
      .openapi({ param: { name: n, in: 'path' } }),
  });

/** What a view answers: the schema's shape, now or later. */
type Shown<S extends ZodType> = z.infer<S> | Promise<z.infer<S>>;

/**
 * One collection: `T` one as read from the store, `B` the create body's schema, `O` the schema of one as create and
 * get answer it, `I` the schema of a listed item (`O` unless `list.item` says otherwise).
 */
export interface Collection<T, B extends ZodType, O extends ZodType, I extends ZodType = O> {
  /** The path under /admin/agent-teams, the list's array key and the table it counts. */
  kind: Listed;
  /** The OpenAPI tag of the three operations. */
  tag: string;
  /** The path parameter naming one (`skill_id`). */
  idName: string;
  /** What a 404 names (`skill`). */
  what: string;
  /** One as answered by create and get, and its description (`The skill`). */
  out: O;
  outText: string;
  /** How one is shown by get and (unless `list.view`) in the list. */
  view(x: T): Shown<O>;
  create: {
    summary: string;
    body: B;
    /** The refusals it documents (429 and 500 are always added). */
    errors: ErrorStatusCode[];
    /** Makes one and answers it as shown. */
    make(auth: AuthContext, body: z.infer<B>): Promise<z.infer<O>>;
  };
  list: {
    summary: string;
    /** The schema of a listed item, when not `out`, and how one is shown there. */
    item?: I;
    view?(x: T): Shown<I>;
    /** The list schema's registered name (`SkillList`) and the answer's description (`Skills`). */
    name: string;
    text: string;
    read(q: Page): Promise<T[]>;
  };
  get: {
    summary: string;
    read(id: string): Promise<T | undefined>;
  };
}

/** A list answer, `{ <kind>: items, limit, offset, total }`, typed as `listSchema` types its schema (TypeScript widens a computed key to `string`). */
function listAnswer<K extends string, V>(kind: K, items: V[], page: ReturnType<typeof pageOf>) {
  return { [kind]: items, ...page } as { [P in K]: V[] } & ReturnType<typeof pageOf>;
}

/** Mounts the create, list and get routes of one collection, in that order. */
export function collectionRoutes<T, B extends ZodType, O extends ZodType, I extends ZodType = O>(
  app: OpenAPIHono<AppEnv>,
  ctx: TeamsContext,
  k: Collection<T, B, O, I>,
): void {
  const write = secured(PERMISSIONS.teamsWrite);
  const read = secured(PERMISSIONS.teamsRead);
  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/${k.kind}`,
      tags: [k.tag],
      'x-status': 'Live',
      summary: k.create.summary,
      ...write,
      request: { body: jsonBody(k.create.body as ZodType) },
      responses: { 201: json(k.out, k.outText), ...errorResponses(...k.create.errors) },
    }),
    async (c) => c.json(await k.create.make(c.get('auth'), c.req.valid('json') as z.infer<B>), 201),
  );
  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/${k.kind}`,
      tags: [k.tag],
      'x-status': 'Live',
      summary: k.list.summary,
      ...read,
      request: { query: pageQuery(100, 1000) },
      responses: { 200: json(listSchema(k.kind, k.list.item ?? k.out, k.list.name), k.list.text), ...errorResponses(400, 401, 403) },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const view = k.list.view ?? k.view;
      const items: (z.infer<I> | z.infer<O>)[] = [];
      for (const x of await k.list.read(q)) items.push(await view(x));
      return c.json(listAnswer(k.kind, items, pageOf(q, await countListed(ctx.core.store, k.kind))), 200);
    },
  );
  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/${k.kind}/{${k.idName}}`,
      tags: [k.tag],
      'x-status': 'Live',
      summary: k.get.summary,
      ...read,
      request: { params: idParam(k.idName) },
      responses: { 200: json(k.out, k.outText), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const x = await k.get.read((c.req.valid('param') as Record<string, string>)[k.idName]!);
      if (!x) throw notFound(k.what);
      return c.json(await k.view(x), 200);
    },
  );
}
