/**
 * Curates a generated OpenAPI 3.1 document, deny by default: an operation is
 * served only if it has at least one tag, every tag is allowlisted, and it
 * carries a valid `x-status` (`Live`, or `Partial` with a description that
 * names the wired slice). Everything else is dropped, paths left empty are
 * removed, and components no longer referenced are pruned. Pure: the input
 * is not modified.
 */

/** The HTTP methods an OpenAPI path item can hold operations for. */
export const OPERATION_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

export type JsonObject = Record<string, unknown>;

export interface DroppedOperation {
  method: string;
  path: string;
  reason: 'untagged' | 'tag_not_allowlisted' | 'missing_x_status' | 'invalid_x_status' | 'partial_without_description';
  detail?: string;
}

export interface CurationResult {
  document: JsonObject;
  /** What was left out and why (logged once at start; never served). */
  dropped: DroppedOperation[];
}

export const X_STATUS_VALUES = ['Live', 'Partial'] as const;

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Why `op` must not be served, or null when it may be. */
export function refusalReason(op: JsonObject, isServedTag: (tag: string) => boolean): Omit<DroppedOperation, 'method' | 'path'> | null {
  const tags = Array.isArray(op['tags']) ? op['tags'] : [];
  if (tags.length === 0) return { reason: 'untagged' };
  const bad = tags.find((t) => typeof t !== 'string' || !isServedTag(t));
  if (bad !== undefined) return { reason: 'tag_not_allowlisted', detail: String(bad) };
  const status = op['x-status'];
  if (status === undefined) return { reason: 'missing_x_status' };
  if (status !== 'Live' && status !== 'Partial') return { reason: 'invalid_x_status', detail: String(status) };
  if (status === 'Partial') {
    const d = op['description'];
    if (typeof d !== 'string' || d.trim().length === 0) return { reason: 'partial_without_description' };
  }
  return null;
}

/** Applies the curation rule to `input` (see the module header). */
export function curateDocument(input: JsonObject, isServedTag: (tag: string) => boolean): CurationResult {
  const doc = structuredClone(input);
  const dropped: DroppedOperation[] = [];
  const paths = isObject(doc['paths']) ? doc['paths'] : {};
  const keptPaths: JsonObject = {};
  const usedTags = new Set<string>();
  const usedSchemes = new Set<string>();

  for (const [path, item] of Object.entries(paths)) {
    if (!isObject(item)) continue;
    const keptItem: JsonObject = {};
    let operations = 0;
    for (const [key, value] of Object.entries(item)) {
      if (!(OPERATION_METHODS as readonly string[]).includes(key)) {
        keptItem[key] = value;
        continue;
      }
      if (!isObject(value)) continue;
      const why = refusalReason(value, isServedTag);
      if (why) {
        dropped.push({ method: key.toUpperCase(), path, ...why });
        continue;
      }
      keptItem[key] = value;
      operations++;
      for (const t of value['tags'] as string[]) usedTags.add(t);
      for (const req of Array.isArray(value['security']) ? value['security'] : []) {
        if (isObject(req)) for (const name of Object.keys(req)) usedSchemes.add(name);
      }
    }
    if (operations > 0) keptPaths[path] = keptItem;
  }
  doc['paths'] = keptPaths;
  for (const req of Array.isArray(doc['security']) ? doc['security'] : []) {
    if (isObject(req)) for (const name of Object.keys(req)) usedSchemes.add(name);
  }
  delete doc['webhooks'];

  if (Array.isArray(doc['tags'])) {
    doc['tags'] = doc['tags'].filter((t) => isObject(t) && typeof t['name'] === 'string' && usedTags.has(t['name']));
  }
  pruneComponents(doc, usedSchemes);
  return { document: doc, dropped };
}

/** Keeps only components reachable by $ref from everything outside `components`. */
function pruneComponents(doc: JsonObject, usedSchemes: ReadonlySet<string>): void {
  const components = doc['components'];
  if (!isObject(components)) return;
  const reachable = new Set<string>();
  const queue: unknown[] = [];
  for (const [k, v] of Object.entries(doc)) if (k !== 'components') queue.push(v);
  const seen = new Set<unknown>();
  while (queue.length > 0) {
    const node = queue.pop();
    if (typeof node !== 'object' || node === null || seen.has(node)) continue;
    seen.add(node);
    if (Array.isArray(node)) {
      queue.push(...node);
      continue;
    }
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string' && v.startsWith('#/components/') && !reachable.has(v)) {
        reachable.add(v);
        const [, , section, name] = v.split('/');
        const target = section && name ? (components[section] as JsonObject | undefined)?.[decodePointer(name)] : undefined;
        if (target !== undefined) queue.push(target);
      } else {
        queue.push(v);
      }
    }
  }
  for (const [section, entries] of Object.entries(components)) {
    if (!isObject(entries)) continue;
    const kept: JsonObject = {};
    for (const [name, value] of Object.entries(entries)) {
      const ref = `#/components/${section}/${encodePointer(name)}`;
      if (section === 'securitySchemes' ? usedSchemes.has(name) : reachable.has(ref)) kept[name] = value;
    }
    if (Object.keys(kept).length > 0) components[section] = kept;
    else delete components[section];
  }
}

function decodePointer(s: string): string {
  return s.replace(/~1/g, '/').replace(/~0/g, '~');
}

function encodePointer(s: string): string {
  return s.replace(/~/g, '~0').replace(/\//g, '~1');
}
