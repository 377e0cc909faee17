/**
 * At start, on the PostgreSQL engine: the SQL workspaces an earlier version
 * kept as schemas of the cells' database (`ws_<hash>`) are moved, one after
 * the other in the background, into databases of their own
 * (sandbox/pg-provision.ts: pg_dump and pg_restore, then the old schema is
 * dropped). A job of such a workspace that comes first waits for its move;
 * one whose move cannot be made fails `workspace_not_migrated`, and nothing
 * of it runs in the cells' database.
 */
import type { JobsContext } from './context.ts';
import { sqlWorkspaceIds } from './repository.ts';
import { wsNames } from './sandbox/pg-workspace.ts';
import { workspaceSecrets } from './workspace-secrets.ts';

export async function migrateLegacyWorkspaces(ctx: JobsContext): Promise<void> {
  const pgw = ctx.pgWorkspaces;
  if (!pgw) return;
  try {
    const legacy = await pgw.legacySchemas();
    if (legacy.size === 0) return;
    for (const workspaceId of await sqlWorkspaceIds(ctx.core.store)) {
      if (ctx.stopped) return;
      // The schema's name depends on the workspace alone (the role's on the database too).
      if (!legacy.has(wsNames('', workspaceId).schema)) continue;
      try {
        await pgw.prepare(workspaceId, (await workspaceSecrets(ctx, workspaceId)).rolePassword);
      } catch (err) {
        ctx.core.log.error(
          'a SQL workspace of an earlier version could not be moved into a database of its own; its jobs fail until it is',
          {
            workspace_id: workspaceId,
            error: err,
          },
        );
      }
    }
  } catch (err) {
    if (!ctx.stopped) ctx.core.log.warn('the SQL workspaces of an earlier version were not looked for', { error: err });
  }
}
