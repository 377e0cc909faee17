/**
 * The stdio sources of the cell's configuration (`serve --tool-sources FILE`):
 * the only place a command the cell starts for the catalog is named; the API
 * never registers one, and the command is never read from the store (a copy
 * of the database cannot make the cell run anything).
 *
 * The file's format and its parsing are runtime/mcp-client/config.ts (a
 * device reads the same file, `edge serve --tool-sources`). At start (`syncConfigSources`) each named source gets its row (origin
 * `config`) if it has none, and a new one has the tools its server lists
 * imported and pinned (actor `system:config`); a source already there keeps
 * its pins (a changed server is refused call by call until re-pinned through
 * the API), and takes the file's description and settings.
 */
import type { StdioSourceConfig } from '../../../runtime/mcp-client/config.ts';
import { newId } from '../../ids.ts';
import type { SourcesContext } from './context.ts';
import { importable } from './names.ts';
import { readListing } from '../mcp/read.ts';
import { pinsFrom } from './register.ts';
import { insertSource, sourceByName, updateSource, upsertPin } from './repository.ts';
import type { SourceRow } from './types.ts';

export { parseToolSources, readToolSources } from '../../../runtime/mcp-client/config.ts';

const ACTOR = 'system:config';

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
