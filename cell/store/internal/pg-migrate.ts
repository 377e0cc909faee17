/**
 * Migrations on PostgreSQL: under a session advisory lock (so cells started
 * at once take turns; the lock dies with the connection), create
 * `_migrations` if missing, refuse a schema newer than this cell, and apply
 * each missing migration (rendered for PostgreSQL) in its own transaction
 * together with its `_migrations` row.
 */
import type pg from 'pg';
import { checkPortable } from './dialect.ts';
import { changedNote, migrationSha, refuseNewerSchema } from './migrations.ts';
import { renderMigration } from './pg-sql.ts';
import { str } from '../decode.ts';
import type { Migration, Row } from '../types.ts';

/** Key of the advisory lock the cells of one database take to migrate ("cellmigr" as a 63-bit number). */
export const MIGRATION_LOCK_KEY = '7162812004535060338';

export async function migratePostgres(pool: pg.Pool, migrations: readonly Migration[], note: (msg: string) => void): Promise<void> {
  const client = await pool.connect();
  // A connection that dies while checked out emits 'error'; the query in flight rejects with it.
  client.on('error', () => undefined);
  try {
    await client.query(`SELECT pg_advisory_lock(${MIGRATION_LOCK_KEY})`);
    try {
      await client.query('CREATE TABLE IF NOT EXISTS _migrations (id TEXT PRIMARY KEY, seq BIGINT NOT NULL, sql_sha256 TEXT NOT NULL)');
      const applied = (await client.query<Row>('SELECT id, sql_sha256 FROM _migrations ORDER BY seq')).rows.map((r) => ({
        id: str(r, 'id'),
        sql_sha256: str(r, 'sql_sha256'),
      }));
      refuseNewerSchema(
        applied.map((r) => r.id),
        migrations,
      );
      const bySha = new Map(applied.map((r) => [r.id, r.sql_sha256]));
      let seq = applied.length;
      for (const m of migrations) {
        const sha = migrationSha(m);
        const had = bySha.get(m.id);
        if (had !== undefined) {
          if (had !== sha) note(changedNote(m.id));
          continue;
        }
        checkPortable(m.sql);
        const stmts = renderMigration(m.sql);
        await client.query('BEGIN');
        try {
          for (const s of stmts) {
            try {
              await client.query(s);
            } catch (err) {
              throw new Error(`store: migration ${m.id} failed: ${(err as Error).message}`);
            }
          }
          await client.query('INSERT INTO _migrations (id, seq, sql_sha256) VALUES ($1, $2, $3)', [m.id, ++seq, sha]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK').catch(() => undefined);
          throw err;
        }
      }
    } finally {
      await client.query(`SELECT pg_advisory_unlock(${MIGRATION_LOCK_KEY})`).catch(() => undefined);
    }
  } finally {
    // Not returned to the pool: closing the session also ends the advisory lock if the unlock failed.
    client.release(true);
  }
}
