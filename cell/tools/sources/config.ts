/**
 * The stdio sources of the cell's configuration (`serve --tool-sources FILE`):
 * the only place a command the cell starts for the catalog is named; the API
 * never registers one, and the command is never read from the store (a copy
 * of the database cannot make the cell run anything).
 *
 * The file is JSON: `{ "sources": [ { "name", "command", "args"?, "env"?,
 * "cwd"?, "description"?, "definition_max_age_ms"?, "timeout_ms"? } ] }`.
 * At start (`syncConfigSources`) each named source gets its row (origin
 * `config`) if it has none, and a new one has the tools its server lists
 * imported and pinned (actor `system:config`); a source already there keeps
 * its pins (a changed server is refused call by call until re-pinned through
 * the API), and takes the file's description and settings.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { StdioSourceConfig } from '../../config.ts';
import { newId } from '../../ids.ts';
import type { SourcesContext } from './context.ts';
import { importable, SOURCE_NAME } from './names.ts';
import { readListing } from '../mcp/read.ts';
import { DEFAULT_DEFINITION_MAX_AGE_MS, DEFAULT_TIMEOUT_MS, pinsFrom } from './register.ts';
import { insertSource, sourceByName, updateSource, upsertPin } from './repository.ts';
import type { SourceRow } from './types.ts';

const ACTOR = 'system:config';
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

/** Gives each configured stdio source its row, importing a new one's tools (see the header). Never throws: a source that fails is logged. */
export async function syncConfigSources(ctx: SourcesContext, configured: readonly StdioSourceConfig[]): Promise<void> {
  const { core, iam } = ctx;
  for (const c of configured) {
    try {
      const row = await sourceByName(core.store, c.name);
      if (row !== undefined && row.origin !== 'config') {
        core.log.error('tools: a configured stdio source has the name of a source registered through the API; it is not used', {
          source: c.name,
        });
        continue;
      }
      const now = core.clock.now();
      if (row !== undefined) {
        const next: SourceRow = {
          ...row,
          description: c.description,
          definition_max_age_ms: c.definition_max_age_ms,
          timeout_ms: c.timeout_ms,
        };
        if (JSON.stringify(next) !== JSON.stringify(row))
          await core.store.write((tx) => updateSource(tx, { ...next, updated_at: Math.max(now, row.updated_at + 1) }));
        continue;
      }
      const source: SourceRow = {
        source_id: newId('src'),
        name: c.name,
        transport: 'stdio',
        url: null,
        auth: { type: 'none' },
        origin: 'config',
        description: c.description,
        definition_max_age_ms: c.definition_max_age_ms,
        timeout_ms: c.timeout_ms,
        bound_by: null,
        created_at: now,
        created_by: ACTOR,
        updated_at: now,
      };
      let listed: ReturnType<typeof importable> | undefined;
      try {
        listed = importable(c.name, await readListing(ctx, source, ACTOR));
      } catch (e) {
        core.log.error('tools: a configured stdio source did not list its tools; it has none until they are pinned', {
          source: c.name,
          error: e,
        });
      }
      const pins = listed ? pinsFrom(source.source_id, listed.tools, now, ACTOR) : [];
      await core.store.write(async (tx) => {
        if ((await sourceByName(tx, c.name)) !== undefined) return; // another cell of the group made it
        await insertSource(tx, source);
        for (const p of pins) await upsertPin(tx, p);
        await iam.audit(tx, {
          at: now,
          actor: ACTOR,
          action: 'catalog.source.create',
          target: source.source_id,
          outcome: 'ok',
          details: { name: c.name, transport: 'stdio', tools: pins.map((p) => p.name), refused: listed?.refused.map((r) => r.tool) ?? [] },
        });
      });
    } catch (e) {
      core.log.error('tools: a configured stdio source could not be set up', { source: c.name, error: e });
    }
  }
  await ctx.imported.reload();
}
