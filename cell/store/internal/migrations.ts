/**
 * Rules both engines apply to migrations: ids unique and non-empty, a
 * migration recorded once with the SHA-256 of its SQL, and a database whose
 * `_migrations` names an id this cell does not know is newer than the cell:
 * it refuses to start rather than run old code on a newer schema.
 */
import { createHash } from 'node:crypto';
import type { Migration, Store } from '../types.ts';

/** Throws a TypeError on a malformed list (empty or duplicate ids): a programming mistake. */
export function checkMigrations(migrations: readonly Migration[]): void {
  const seen = new Set<string>();
  for (const m of migrations) {
    if (typeof m.id !== 'string' || m.id === '' || typeof m.sql !== 'string') {
      throw new TypeError('openStore: a migration needs a non-empty id and sql');
    }
    if (seen.has(m.id)) throw new TypeError(`openStore: duplicate migration id ${m.id}`);
    seen.add(m.id);
  }
}

export function migrationSha(m: Migration): string {
  return createHash('sha256').update(m.sql).digest('hex');
}

/** Throws when the database records migrations this cell does not have. */
export function refuseNewerSchema(applied: readonly string[], known: readonly Migration[]): void {
  const ids = new Set(known.map((m) => m.id));
  const unknown = applied.filter((id) => !ids.has(id));
  if (unknown.length > 0) {
    const shown = unknown.slice(0, 5).join(', ') + (unknown.length > 5 ? `, … (${unknown.length} in all)` : '');
    throw new Error(
      `store: the database schema is newer than this cell: it records migration(s) ${shown} that this cell does not know; ` +
        'run the cell version that applied them (or a newer one); refusing to start',
    );
  }
}

/** What a note says when a recorded migration's SQL differs from the one shipped now. */
export function changedNote(id: string): string {
  return `store: migration ${id} was applied with different SQL; it is not re-run`;
}

/**
 * Migrations on the embedded engine (the directory lock already makes this
 * store the only one): each missing migration in its own logged transaction
 * together with its `_migrations` row.
 */
export async function migrateEmbedded(store: Store, migrations: readonly Migration[], note: (msg: string) => void): Promise<void> {
  const hasTable = await store.get("SELECT 1 AS one FROM sqlite_master WHERE type = 'table' AND name = '_migrations'");
  if (!hasTable) {
    await store.write(async (tx) => {
      await tx.run('CREATE TABLE IF NOT EXISTS _migrations (id TEXT PRIMARY KEY, seq INTEGER NOT NULL, sql_sha256 TEXT NOT NULL)');
    });
  }
  const applied = await store.all('SELECT id, sql_sha256 FROM _migrations ORDER BY seq');
  refuseNewerSchema(
    applied.map((r) => String(r['id'])),
    migrations,
  );
  const bySha = new Map(applied.map((r) => [String(r['id']), r['sql_sha256']]));
  let seq = applied.length;
  for (const m of migrations) {
    const sha = migrationSha(m);
    const had = bySha.get(m.id);
    if (had !== undefined) {
      if (had !== sha) note(changedNote(m.id));
      continue;
    }
    await store.write(async (tx) => {
      try {
        await tx.run(m.sql);
      } catch (err) {
        throw new Error(`store: migration ${m.id} failed: ${(err as Error).message}`);
      }
      await tx.run('INSERT INTO _migrations (id, seq, sql_sha256) VALUES (?, ?, ?)', [m.id, seq + 1, sha]);
    });
    seq++;
  }
}
