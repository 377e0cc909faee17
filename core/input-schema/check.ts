/**
 * The JSON Schema subset a caller-facing input is described with: a published
 * job endpoint's `input_schema` and a formation's (the input of its crew's runs,
 * and the `inputSchema` of the crew's MCP tool). Checked when it is authored,
 * so what is stored is always a schema `inputProblems` (problems.ts) can judge.
 *
 * Keywords: type, properties, required, items, enum, minimum, maximum,
 * minLength, maxLength, minItems, maxItems, additionalProperties (boolean),
 * description, title; at most 16 levels deep. Anything else is refused by name.
 */
import { invalid } from '../errors.ts';

const SCHEMA_KEYS = new Set([
  'type',
  'properties',
  'required',
  'items',
  'enum',
  'minimum',
  'maximum',
  'minLength',
  'maxLength',
  'minItems',
  'maxItems',
  'additionalProperties',
  'description',
  'title',
]);

const TYPES = ['object', 'array', 'string', 'number', 'integer', 'boolean', 'null'];

/**
 * Refuses (400 invalid_request, reason `invalid_input_schema`, `details.path`)
 * a schema outside the subset.
 * @example checkInputSchema({ type: 'object', properties: { q: { type: 'string' } } })
 */
export function checkInputSchema(s: unknown, path = 'input_schema', depth = 0): void {
  if (depth > 16) throw invalid(`${path} is nested too deeply`, { reason: 'invalid_input_schema', path });
  if (typeof s !== 'object' || s === null || Array.isArray(s))
    throw invalid(`${path} must be an object`, { reason: 'invalid_input_schema', path });
  for (const k of Object.keys(s))
    if (!SCHEMA_KEYS.has(k)) throw invalid(`${path}.${k} is not supported`, { reason: 'invalid_input_schema', path: `${path}.${k}` });
  const o = s as Record<string, unknown>;
  if (o['type'] !== undefined && !TYPES.includes(o['type'] as string)) {
    throw invalid(`${path}.type is not a JSON Schema type`, { reason: 'invalid_input_schema', path: `${path}.type` });
  }
  if (o['properties'] !== undefined) {
    if (typeof o['properties'] !== 'object' || o['properties'] === null || Array.isArray(o['properties']))
      throw invalid(`${path}.properties must be an object`, { reason: 'invalid_input_schema', path });
    for (const [k, v] of Object.entries(o['properties'] as object)) checkInputSchema(v, `${path}.properties.${k}`, depth + 1);
  }
  if (o['items'] !== undefined) checkInputSchema(o['items'], `${path}.items`, depth + 1);
  if (o['required'] !== undefined && (!Array.isArray(o['required']) || !o['required'].every((x) => typeof x === 'string'))) {
    throw invalid(`${path}.required must be a list of names`, { reason: 'invalid_input_schema', path });
  }
  if (o['additionalProperties'] !== undefined && typeof o['additionalProperties'] !== 'boolean') {
    throw invalid(`${path}.additionalProperties must be true or false`, {
      reason: 'invalid_input_schema',
      path: `${path}.additionalProperties`,
    });
  }
  if (o['enum'] !== undefined && !Array.isArray(o['enum'])) {
    throw invalid(`${path}.enum must be a list`, { reason: 'invalid_input_schema', path: `${path}.enum` });
  }
  for (const k of ['minimum', 'maximum', 'minLength', 'maxLength', 'minItems', 'maxItems'] as const) {
    if (o[k] !== undefined && (typeof o[k] !== 'number' || !Number.isFinite(o[k]))) {
      throw invalid(`${path}.${k} must be a number`, { reason: 'invalid_input_schema', path: `${path}.${k}` });
    }
  }
  for (const k of ['description', 'title'] as const) {
    if (o[k] !== undefined && typeof o[k] !== 'string') {
      throw invalid(`${path}.${k} must be a string`, { reason: 'invalid_input_schema', path: `${path}.${k}` });
    }
  }
}
