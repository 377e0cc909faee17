/**
 * Store-facing statements about who a job definition acts as: the author
 * quota, re-authoring, and disabling definitions whose author's authority
 * lapsed (definition-authority.ts says when). Every disable is audited in the
 * same transaction.
 */
import type { Reader, Tx } from '../store/types.ts';
import { recordAuditTx } from '../iam/audit.ts';

/** Live (not soft-deleted) definitions that act as `authorId`: what the per-principal quota counts. */
export function countAuthored(db: Reader, authorId: string): number {
  return db.get<{ n: number }>('SELECT count(*) AS n FROM job_definitions WHERE author_id = ? AND deleted_at IS NULL', [authorId])?.n ?? 0;
}

/** Makes `authorId`, with its effective authority `authority`, the principal the definition acts as. */
export function setAuthorTx(tx: Tx, scheduleId: string, authorId: string, authority: readonly string[]): void {
  tx.run('UPDATE job_definitions SET author_id = ?, author_authority = ? WHERE schedule_id = ?', [authorId, JSON.stringify(authority), scheduleId]);
}

/**
 * Disables every enabled, live definition authored by `authorId` (its author
 * was archived, deleted or purged). Audited per definition; returns their ids.
 */
export function disableAuthoredTx(tx: Tx, authorId: string, reason: string, actor: string, at: number): string[] {
  const ids = tx.all<{ schedule_id: string }>('SELECT schedule_id FROM job_definitions WHERE author_id = ? AND enabled = 1 AND deleted_at IS NULL ORDER BY schedule_id', [authorId])
    .map((r) => r.schedule_id);
  for (const id of ids) {
    tx.run('UPDATE job_definitions SET enabled = 0, next_fire_at = NULL, disabled_reason = ?, updated_at = ? WHERE schedule_id = ?', [reason, at, id]);
    recordAuditTx(tx, { at, actor, action: 'jobs.definition.disable', target: id, outcome: 'ok', details: { reason, author: authorId } });
  }
  return ids;
}

/**
 * At fire time: disables the definition instead of firing it (compare-and-set
 * on the fire time `fireAt`, so one cell does it once), records the fire as
 * refused and audits it. False when another fire or a change got there first.
 */
export function disableAtFireTx(tx: Tx, d: { schedule_id: string; author_id: string }, fireAt: number, reason: string, now: number, cellId: string): boolean {
  const r = tx.run(
    'UPDATE job_definitions SET enabled = 0, next_fire_at = NULL, disabled_reason = ?, updated_at = ? WHERE schedule_id = ? AND next_fire_at = ? AND enabled = 1 AND deleted_at IS NULL',
    [reason, now, d.schedule_id, fireAt]);
  if (r.changes === 0) return false;
  tx.run('INSERT OR IGNORE INTO job_fires (schedule_id, fire_at, state, run_id, detail, cell_id, created_at) VALUES (?, ?, ?, NULL, ?, ?, ?)',
    [d.schedule_id, fireAt, 'refused', reason, cellId, now]);
  recordAuditTx(tx, { at: now, actor: 'system:scheduler', action: 'jobs.definition.disable', target: d.schedule_id, outcome: 'ok', details: { reason, author: d.author_id } });
  return true;
}
