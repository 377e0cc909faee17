/**
 * What a log line may never carry, removed in one place for both programs
 * (runtime/log.ts applies it to every line): the values of credential-bearing
 * fields, found by name at any depth (`authorization`, `cookie`, `secret`,
 * `client_secret`, `subject_token`, ...), and API key secrets (`svck_live_…`)
 * wherever they appear in the finished line: a message, a key, a nested value,
 * an error's text.
 *
 * pino's own `redact` takes fixed paths (one level of wildcard, case-sensitive),
 * so a field one level deeper than foreseen, or spelled `Authorization`, would
 * pass; and it does not look at values. Both are done here instead: a walk of
 * the logged object that copies only what it changes, and a scan of the
 * serialized line.
 */

/** What replaces a removed value. */
export const CENSOR = '[redacted]';

/** Field names whose values are removed (compared in lower case). */
export const SECRET_FIELDS: ReadonlySet<string> = new Set([
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'secret',
  'client_secret',
  'subject_token',
  'actor_token',
  'access_token',
  'refresh_token',
  'password',
]);

/** Field names seen so far and whether each is secret: one map lookup per field (names are few: they are code, not data). */
const seen = new Map<string, boolean>();
const SEEN_MAX = 4096;

function isSecretField(key: string): boolean {
  let secret = seen.get(key);
  if (secret === undefined) {
    secret = SECRET_FIELDS.has(key.toLowerCase());
    if (seen.size < SEEN_MAX) seen.set(key, secret);
  }
  return secret;
}

/** Objects nested deeper than this are replaced as a whole (a log line is not a dump). */
const MAX_DEPTH = 8;

/** `fields` with the value of every secret-named field, at any depth, replaced by CENSOR; the same object when nothing is. */
export function redactFields(fields: Record<string, unknown>): Record<string, unknown> {
  return redactObject(fields, 0);
}

function redactObject(obj: Record<string, unknown>, depth: number): Record<string, unknown> {
  let out: Record<string, unknown> | null = null;
  for (const key in obj) {
    if (!Object.hasOwn(obj, key)) continue;
    const value = obj[key];
    const next = isSecretField(key) ? CENSOR : redactValue(value, depth);
    if (next !== value) {
      out ??= { ...obj };
      out[key] = next;
    }
  }
  return out ?? obj;
}

function redactValue(value: unknown, depth: number): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (depth >= MAX_DEPTH) return '[too deep]';
  if (Array.isArray(value)) {
    let out: unknown[] | null = null;
    for (let i = 0; i < value.length; i++) {
      const next = redactValue(value[i], depth + 1);
      if (next !== value[i]) {
        out ??= [...value];
        out[i] = next;
      }
    }
    return out ?? value;
  }
  // An error's own fields are not enumerable: log its type, message and stack (the line scan cleans their text), and its
  // code when it has one (a ServiceError's, node's ENOENT, a PostgreSQL SQLSTATE).
  if (value instanceof Error) {
    const code = (value as { code?: unknown }).code;
    return {
      type: value.name,
      message: value.message,
      ...(typeof code === 'string' ? { code } : {}),
      ...(value.stack ? { stack: value.stack } : {}),
    };
  }
  return redactObject(value as Record<string, unknown>, depth + 1);
}

const KEY_SECRET = /svck_live_[A-Za-z0-9_-]*/g;

/** The serialized `line` with every API key secret replaced; the same string when it has none (one scan). */
export function redactLine(line: string): string {
  return line.includes('svck_live_') ? line.replace(KEY_SECRET, CENSOR) : line;
}
