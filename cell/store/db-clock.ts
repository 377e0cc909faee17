/**
 * "Now" as a statement reads it (ms since the epoch): on PostgreSQL the
 * database's own clock (`clock_timestamp()`) in the statement itself, so every
 * cell of a group judges time on one clock whatever its own says; on the
 * embedded engine (one cell by construction) the cell's clock, passed in as a
 * parameter. What a group shares and judges by time (heartbeats, leases,
 * prunes of shared records) reads it; a statement places `sql` where the
 * time goes and appends `params` to its own at that place.
 *
 * @example
 * const now = dbNow(store.engine, clock.now());
 * await tx.run(`DELETE FROM t WHERE expires_at <= ${now.sql}`, [...now.params]);
 */
import type { SqlValue } from './types.ts';

/** The database's clock, ms since the epoch, as PostgreSQL spells it (the dialect leaves clocks out of shared SQL: this is only sent to PostgreSQL). */
export const PG_NOW_MS = 'CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)';

export interface DbNow {
  /** The SQL expression of now, ms since the epoch. */
  sql: string;
  /** Its parameters (the cell's clock on the embedded engine; none on PostgreSQL). */
  params: SqlValue[];
}

/** The database's clock on PostgreSQL; `local` (the cell's clock) on the embedded engine. */
export function dbNow(engine: 'embedded' | 'postgres', local: number): DbNow {
  return engine === 'postgres' ? { sql: PG_NOW_MS, params: [] } : { sql: 'CAST(? AS BIGINT)', params: [local] };
}
