/**
 * What standard tools (redocly's recommended rules, generators) ask of every
 * operation, filled in once for the whole served document rather than on
 * each of the routes (issue 25): an `operationId` derived from the method
 * and the path where a route declares none (`get /api/public/v1/admin/principals/{id}`
 * → `getAdminPrincipalsById`; stable as long as the path is), and the
 * `security` the gateway actually applies where a route declares none:
 * `[]` (no credential) outside the protected prefix and on its public paths,
 * a bearer credential or an OAuth token (any scope: the route judges it) inside it.
 */
import { OPERATION_METHODS, type JsonObject } from '../curate.ts';

const PROTECTED_PREFIX = '/api/public/v1/';

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** `get` + `/api/public/v1/admin/principals/{id}/archive` → `getAdminPrincipalsByIdArchive`. */
export function operationIdFor(method: string, path: string): string {
  const words = path
    .replace(/^\/api\/public\/v1\//, '/')
    .split('/')
    .filter(Boolean)
    .flatMap((seg) => {
      const param = /^\{(.+)\}$/.exec(seg);
      return param ? ['by', ...param[1]!.split(/[^A-Za-z0-9]+/)] : seg.split(/[^A-Za-z0-9]+/);
    })
    .filter(Boolean);
  return method + words.map((w) => w[0]!.toUpperCase() + w.slice(1)).join('');
}

/** Fills `operationId` and `security` in place; `publicPaths` need no credential under the protected prefix. */
export function completeOperations(doc: JsonObject, publicPaths: readonly string[]): void {
  const paths = isObject(doc['paths']) ? doc['paths'] : {};
  const taken = new Set<string>();
  for (const item of Object.values(paths))
    if (isObject(item))
      for (const m of OPERATION_METHODS) {
        const op = item[m];
        if (isObject(op) && typeof op['operationId'] === 'string') taken.add(op['operationId']);
      }
  for (const [path, item] of Object.entries(paths)) {
    if (!isObject(item)) continue;
    for (const m of OPERATION_METHODS) {
      const op = item[m];
      if (!isObject(op)) continue;
      if (typeof op['operationId'] !== 'string') {
        let id = operationIdFor(m, path);
        for (let n = 2; taken.has(id); n++) id = `${operationIdFor(m, path)}${n}`;
        taken.add(id);
        op['operationId'] = id;
      }
      if (!Array.isArray(op['security'])) {
        const open = !path.startsWith(PROTECTED_PREFIX) || publicPaths.some((p) => path === p || path.startsWith(`${p}/`));
        op['security'] = open ? [] : [{ bearerAuth: [] }, { oauth2: [] }];
      }
    }
  }
}
