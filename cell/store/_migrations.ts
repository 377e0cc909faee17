/**
 * Rules both engines apply to migrations: ids unique and non-empty, a
 * migration recorded once with the SHA-256 of its SQL, and a database whose
 * `_migrations` names an id this cell does not know is newer than the cell:
 * it refuses to start rather than run old code on a newer schema.
 */
import { createHash } from 'node:crypto';
import type { Migration } from './types.ts';

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
