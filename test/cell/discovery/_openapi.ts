/**
 * Helpers for checking real responses against the served OpenAPI document:
 * walk its operations, and validate a body against the documented JSON
 * Schema (draft 2020-12, the dialect of OpenAPI 3.1) with Ajv. Ajv 8 is
 * installed and pinned through @readme/openapi-parser's lock entry.
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

// Ajv ships CommonJS; load its 2020-12 build through require for a stable shape under tsx.
const Ajv2020 = createRequire(import.meta.url)('ajv/dist/2020.js').default as new (
  o: object,
) => {
  compile(schema: object): ((data: unknown) => boolean) & { errors?: unknown[] | null };
};

export type Json = Record<string, any>;

export interface Operation {
  method: string;
  path: string;
  op: Json;
}

export const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'];

/** Every operation of a document. */
export function operations(doc: Json): Operation[] {
  const out: Operation[] = [];
  for (const [path, item] of Object.entries(doc['paths'] ?? {})) {
    for (const [method, op] of Object.entries(item as Json)) {
      if (METHODS.includes(method)) out.push({ method, path, op: op as Json });
    }
  }
  return out;
}

/** True when the operation declares `security: []` (no credential). */
export function isPublic(op: Json): boolean {
  return Array.isArray(op['security']) && op['security'].length === 0;
}

/** True when the operation requires a bearer credential (a non-empty security requirement). */
export function isProtected(op: Json): boolean {
  return Array.isArray(op['security']) && op['security'].length > 0;
}

export function pathParams(o: Operation): string[] {
  return [...o.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
}

function rewriteRefs(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(rewriteRefs);
  if (node && typeof node === 'object') {
    const out: Json = {};
    for (const [k, v] of Object.entries(node)) {
      out[k] =
        k === '$ref' && typeof v === 'string' && v.startsWith('#/components/schemas/')
          ? `#/$defs/${v.slice('#/components/schemas/'.length)}`
          : rewriteRefs(v);
    }
    return out;
  }
  return node;
}

/** Compiles validators against one document's component schemas. */
export function schemaChecker(doc: Json) {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  const defs = rewriteRefs(doc['components']?.['schemas'] ?? {});
  const cache = new Map<object, ReturnType<typeof ajv.compile>>();
  return {
    /** Asserts `body` validates against `schema` (a schema from the document). */
    check(schema: object, body: unknown, what: string): void {
      let v = cache.get(schema);
      if (!v) {
        v = ajv.compile({ ...(rewriteRefs(schema) as Json), $defs: defs });
        cache.set(schema, v);
      }
      assert.ok(
        v(body),
        `${what}: body does not match the documented schema: ${JSON.stringify(v.errors?.slice(0, 5))} body=${JSON.stringify(body).slice(0, 400)}`,
      );
    },
  };
}

/**
 * Asserts that `status` is documented for the operation, and that the body
 * validates against the documented schema of that status and content type.
 */
export function checkResponse(
  checker: ReturnType<typeof schemaChecker>,
  o: Operation,
  res: { status: number; contentType: string | null; text: string },
  what: string,
): void {
  const label = `${o.method.toUpperCase()} ${o.path} (${what}) -> ${res.status}`;
  const responses = o.op['responses'] as Json;
  const documented = responses[String(res.status)] ?? responses[`${String(res.status)[0]}XX`] ?? responses['default'];
  assert.ok(documented, `${label}: status not documented (documented: ${Object.keys(responses).join(', ')})`);
  const content = documented['content'] as Json | undefined;
  if (!content) {
    assert.equal(res.text, '', `${label}: documented without content but a body came back`);
    return;
  }
  const type = (res.contentType ?? '').split(';')[0]!.trim().toLowerCase();
  const media = content[type];
  assert.ok(media, `${label}: content type ${type} not documented (documented: ${Object.keys(content).join(', ')})`);
  if (!media['schema']) return;
  const body = type.endsWith('json') ? JSON.parse(res.text) : res.text;
  checker.check(media['schema'], body, label);
}
