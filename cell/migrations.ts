/**
 * Every migration of the cell, in the order a fresh store applies them, and
 * the cell's own `meta` table (its id). Each module owns its tables and
 * lists its migrations in its schema file; ids are never renamed and shipped
 * SQL is never edited (stores in the field recorded both).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileDurable } from '../runtime/write-durable.ts';
import { str } from './store/decode.ts';

export const CELL_ID_FILE = 'cell-id';
import type { Migration, Store } from './store/types.ts';
import { IAM_MIGRATIONS } from './iam/schema.ts';
import { OAUTH_MIGRATIONS } from './oauth/schema.ts';
import { RUNS_MIGRATIONS } from './runs/schema.ts';
import { AI_MIGRATIONS } from './ai/schema.ts';
import { TOOLS_MIGRATIONS } from './tools/schema.ts';
import { TEAMS_MIGRATIONS } from './teams/schema.ts';
import { JOBS_MIGRATIONS } from './jobs/schema.ts';
import { EDGE_MIGRATIONS } from './edge/schema.ts';
import { RECEIPTS_MIGRATIONS } from './receipts/schema.ts';
import { CLUSTER_MIGRATIONS } from './cluster/schema.ts';
import { CUSTODY_MIGRATIONS } from './custody/schema.ts';

const SYSTEM_MIGRATIONS: Migration[] = [{ id: 'sys-001-meta', sql: 'CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)' }];

export const MIGRATIONS: readonly Migration[] = [
  ...SYSTEM_MIGRATIONS,
  ...IAM_MIGRATIONS,
  ...OAUTH_MIGRATIONS,
  ...RUNS_MIGRATIONS,
  ...AI_MIGRATIONS,
  ...TOOLS_MIGRATIONS,
  ...TEAMS_MIGRATIONS,
  ...JOBS_MIGRATIONS,
  ...EDGE_MIGRATIONS,
  ...CLUSTER_MIGRATIONS,
  ...RECEIPTS_MIGRATIONS,
  // Last: custody-001 moves the key check ai-005 created.
  ...CUSTODY_MIGRATIONS,
];

/**
 * The cell's id: the one asked for (`--cell-id`), else the one this data
 * directory keeps (`<data>/cell-id`), else the one an older embedded store
 * recorded in `meta`, else a new one; kept in `<data>/cell-id` from then on.
 * The id lives with the data directory, not in the store, because the cells
 * of a group share one database and each has its own id.
 */
export async function settleCellId(store: Store, dataDir: string, wanted: string | null): Promise<string> {
  const file = join(dataDir, CELL_ID_FILE);
  const kept = existsSync(file) ? readFileSync(file, 'utf8').trim() : '';
  let id = wanted ?? (kept || null);
  if (!id && store.engine === 'embedded') {
    const row = await store.get("SELECT value FROM meta WHERE key = 'cell_id'");
    if (row) id = str(row, 'value');
  }
  id ??= `cell-${crypto.randomUUID().slice(0, 8)}`;
  if (id !== kept) writeFileDurable(file, id + '\n', { mode: 0o600 });
  return id;
}

/**
 * The group's id: the id of the first cell that started on this store, kept
 * in `meta` (`group_id`), the same for every cell of a group. It names the
 * group as one authority: the OAuth issuer (`service://<group id>`), the
 * issuer of edge bundles and the trust anchor devices pin. A single cell's
 * group id is its own cell id (also on a store older than the field: the
 * first start that knows it records the cell's id).
 */
export async function settleGroupId(store: Store, cellId: string): Promise<string> {
  const known = await store.get("SELECT value FROM meta WHERE key = 'group_id'");
  if (known) return str(known, 'value');
  return store.write(async (tx) => {
    // Cells starting at once: the first commit wins, the others read it.
    await tx.run("INSERT INTO meta (key, value) VALUES ('group_id', ?) ON CONFLICT (key) DO NOTHING", [cellId]);
    return str((await tx.get("SELECT value FROM meta WHERE key = 'group_id'"))!, 'value');
  });
}
