/**
 * The stdio sources of a program's configuration (`serve --tool-sources FILE`,
 * the cell's and a device's: the same file format): the only place a command
 * the program starts for its tool catalog is named. The cell never registers
 * one through its API nor reads one from its store (a copy of the database
 * cannot make the cell run anything, cell/tools/sources/config.ts); a device
 * starts the servers its operator names (edge/mcp-tools.ts).
 *
 * The file is JSON: `{ "sources": [ { "name", "command", "args"?, "env"?,
 * "cwd"?, "description"?, "definition_max_age_ms"?, "timeout_ms"? } ] }`.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

/** A source's name: lower-case letters, digits and `-`, a letter first, at most 24 characters. */
export const SOURCE_NAME = /^[a-z][a-z0-9-]{0,23}$/;

/** Defaults of a source: its tool list read again at most every second; 30 s per call. */
export const DEFAULT_DEFINITION_MAX_AGE_MS = 1000;
export const DEFAULT_TIMEOUT_MS = 30_000;

/** One stdio source of `--tool-sources`: a name, the command that starts its server, and its settings. */
export interface StdioSourceConfig {
  name: string;
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd: string | null;
  description: string;
  definition_max_age_ms: number;
  timeout_ms: number;
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The sources of a `--tool-sources` file, or the first problem with it (a message for the operator). */
export function parseToolSources(text: string, baseDir: string): { ok: true; sources: StdioSourceConfig[] } | { ok: false; error: string } {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return { ok: false, error: 'is not JSON' };
  }
  if (!isObj(doc) || !Array.isArray(doc['sources'])) return { ok: false, error: 'must be { "sources": [ ... ] }' };
  const out: StdioSourceConfig[] = [];
  for (const [i, s] of (doc['sources'] as unknown[]).entries()) {
    const at = `sources[${i}]`;
    if (!isObj(s)) return { ok: false, error: `${at} is not an object` };
    const known = ['name', 'command', 'args', 'env', 'cwd', 'description', 'definition_max_age_ms', 'timeout_ms'];
    const extra = Object.keys(s).find((k) => !known.includes(k));
    if (extra !== undefined) return { ok: false, error: `${at}.${extra} is not a setting of a stdio source` };
    if (typeof s['name'] !== 'string' || !SOURCE_NAME.test(s['name']))
      return { ok: false, error: `${at}.name: lower-case letters, digits and -, a letter first, at most 24 characters` };
    if (out.some((o) => o.name === s['name'])) return { ok: false, error: `${at}.name ${s['name']} appears twice` };
    if (typeof s['command'] !== 'string' || s['command'].length === 0) return { ok: false, error: `${at}.command must be a string` };
    const args = s['args'] ?? [];
    if (!Array.isArray(args) || !args.every((a) => typeof a === 'string'))
      return { ok: false, error: `${at}.args must be a list of strings` };
    const env = s['env'] ?? {};
    if (!isObj(env) || !Object.values(env).every((v) => typeof v === 'string'))
      return { ok: false, error: `${at}.env must map names to strings` };
    if (s['cwd'] !== undefined && typeof s['cwd'] !== 'string') return { ok: false, error: `${at}.cwd must be a string` };
    if (s['description'] !== undefined && typeof s['description'] !== 'string')
      return { ok: false, error: `${at}.description must be a string` };
    const int = (k: string, def: number, min: number, max: number): number | string => {
      const v = s[k] ?? def;
      return Number.isSafeInteger(v) && (v as number) >= min && (v as number) <= max
        ? (v as number)
        : `${at}.${k} must be an integer from ${min} to ${max}`;
    };
    const maxAge = int('definition_max_age_ms', DEFAULT_DEFINITION_MAX_AGE_MS, 0, 3_600_000);
    const timeout = int('timeout_ms', DEFAULT_TIMEOUT_MS, 100, 600_000);
    if (typeof maxAge === 'string') return { ok: false, error: maxAge };
    if (typeof timeout === 'string') return { ok: false, error: timeout };
    out.push({
      name: s['name'],
      command: s['command'],
      args: args as string[],
      env: env as Record<string, string>,
      cwd: typeof s['cwd'] === 'string' ? resolve(baseDir, s['cwd']) : null,
      description: (s['description'] as string | undefined) ?? '',
      definition_max_age_ms: maxAge,
      timeout_ms: timeout,
    });
  }
  return { ok: true, sources: out };
}

/** Reads and parses a `--tool-sources` file; throws an Error with the operator's message. */
export function readToolSources(path: string): StdioSourceConfig[] {
  const r = parseToolSources(readFileSync(path, 'utf8'), resolve(path, '..'));
  if (!r.ok) throw new Error(`--tool-sources ${path} ${r.error}`);
  return r.sources;
}
