/** The audit trail: who did what to whom, when, and whether it was allowed. */
import type { Reader, Tx } from '../store/types.ts';

export interface AuditEntry {
  at: number;
  actor: string;
  action: string;
  target: string;
  outcome: 'ok' | 'refused';
  details?: Record<string, unknown>;
}

export function recordAuditTx(tx: Tx, e: AuditEntry): void {
  tx.run('INSERT INTO audit (at, actor, action, target, outcome, details) VALUES (?, ?, ?, ?, ?, ?)', [
    e.at, e.actor, e.action, e.target, e.outcome, e.details ? JSON.stringify(e.details) : null,
  ]);
}

export interface AuditRow {
  seq: number; at: string; actor: string; action: string; target: string; outcome: string; details: Record<string, unknown> | null;
}

/** Newest first. */
export function listAudit(db: Reader, limit: number, offset: number, filter: { actor?: string; target?: string } = {}): AuditRow[] {
  const where: string[] = [];
  const params: (string | number)[] = [];
  if (filter.actor) { where.push('actor = ?'); params.push(filter.actor); }
  if (filter.target) { where.push('target = ?'); params.push(filter.target); }
  const rows = db.all<{ seq: number; at: number; actor: string; action: string; target: string; outcome: string; details: string | null }>(
    `SELECT seq, at, actor, action, target, outcome, details FROM audit ${where.length ? 'WHERE ' + where.join(' AND ') : ''} ORDER BY seq DESC LIMIT ? OFFSET ?`,
    [...params, limit, offset],
  );
  return rows.map((r) => ({ ...r, at: new Date(r.at).toISOString(), details: r.details ? JSON.parse(r.details) as Record<string, unknown> : null }));
}
