/**
 * Judging a value against a schema of the subset check.ts accepts: the
 * problems found (at most 20, each naming the path and what is wrong, never
 * the value), none when the value conforms.
 */

const typeOf = (x: unknown) => (x === null ? 'null' : Array.isArray(x) ? 'array' : typeof x);

/**
 * Problems of `v` against `schema` (empty when valid).
 * @example inputProblems({ type: 'object', required: ['q'] }, {}) // ['input.q: required']
 */
export function inputProblems(schema: Record<string, unknown>, v: unknown, path = 'input', out: string[] = []): string[] {
  if (out.length >= 20) return out;
  const t = schema['type'];
  if (t !== undefined) {
    const ok = t === 'integer' ? Number.isInteger(v) : t === 'number' ? typeof v === 'number' && Number.isFinite(v) : typeOf(v) === t;
    if (!ok) {
      out.push(`${path}: expected ${String(t)}`);
      return out;
    }
  }
  if (Array.isArray(schema['enum']) && !schema['enum'].some((e) => JSON.stringify(e) === JSON.stringify(v)))
    out.push(`${path}: not one of the allowed values`);
  if (typeof v === 'number') {
    if (typeof schema['minimum'] === 'number' && v < schema['minimum']) out.push(`${path}: below minimum`);
    if (typeof schema['maximum'] === 'number' && v > schema['maximum']) out.push(`${path}: above maximum`);
  }
  if (typeof v === 'string') {
    if (typeof schema['minLength'] === 'number' && v.length < schema['minLength']) out.push(`${path}: shorter than minLength`);
    if (typeof schema['maxLength'] === 'number' && v.length > schema['maxLength']) out.push(`${path}: longer than maxLength`);
  }
  if (Array.isArray(v)) {
    if (typeof schema['minItems'] === 'number' && v.length < schema['minItems']) out.push(`${path}: fewer than minItems`);
    if (typeof schema['maxItems'] === 'number' && v.length > schema['maxItems']) out.push(`${path}: more than maxItems`);
    const items = schema['items'];
    if (items && typeof items === 'object') {
      for (const [i, x] of v.entries()) inputProblems(items as Record<string, unknown>, x, `${path}[${i}]`, out);
    }
  }
  if (typeOf(v) === 'object') {
    const o = v as Record<string, unknown>;
    const props = (schema['properties'] ?? {}) as Record<string, Record<string, unknown>>;
    for (const r of (schema['required'] ?? []) as string[]) if (!Object.hasOwn(o, r)) out.push(`${path}.${r}: required`);
    for (const [k, x] of Object.entries(o)) {
      if (Object.hasOwn(props, k)) inputProblems(props[k]!, x, `${path}.${k}`, out);
      else if (schema['additionalProperties'] === false) out.push(`${path}.${k}: not allowed`);
    }
  }
  return out;
}
