/**
 * The owner lifecycle and what it does to keys (spec: API key lifecycle):
 * archive or soft delete -> the owner's active keys are soft-deleted,
 * recoverable within the retention window; restore brings them back; purge
 * hard-deletes every key of the owner and tombstones it. The sweep purges
 * owners, and soft-deleted keys, whose retention window has passed.
 *
 * Whatever acts later on a principal's behalf stops with it: archive, delete
 * and purge (by a caller or by the sweep) call the hooks other modules
 * register with `onPrincipalDeactivated`, inside the same transaction (the
 * jobs module disables the principal's job definitions there).
 */
import { conflict } from '../../core/errors.ts';
import type { Cell } from '../context.ts';
import type { Tx } from '../store/types.ts';
import { recordAuditTx } from './audit.ts';
import { invalidateKeyCache } from './keys.ts';
import type { Principal } from './principals.ts';

export type LifecycleAction = 'archive' | 'restore' | 'delete' | 'purge';

/** Runs inside the transaction that archives, deletes or purges principal `principalId`. */
export type DeactivationHook = (tx: Tx, principalId: string, action: Exclude<LifecycleAction, 'restore'>, actor: string, at: number) => void;

const deactivationHooks = new WeakMap<Cell, DeactivationHook[]>();

/** Registers `hook` for this cell's principal deactivations (a module's init). */
export function onPrincipalDeactivated(cell: Cell, hook: DeactivationHook): void {
  const list = deactivationHooks.get(cell) ?? [];
  list.push(hook);
  deactivationHooks.set(cell, list);
}

function deactivatedTx(cell: Cell, tx: Tx, principalId: string, action: Exclude<LifecycleAction, 'restore'>, actor: string, at: number): void {
  for (const hook of deactivationHooks.get(cell) ?? []) hook(tx, principalId, action, actor, at);
}

const NEXT: Record<LifecycleAction, { from: Principal['status'][]; to: Principal['status'] }> = {
  archive: { from: ['active'], to: 'archived' },
  delete: { from: ['active', 'archived'], to: 'deleted' },
  restore: { from: ['archived', 'deleted'], to: 'active' },
  purge: { from: ['active', 'archived', 'deleted'], to: 'purged' },
};

export function applyLifecycleTx(cell: Cell, tx: Tx, p: Principal, action: LifecycleAction, actor: string): Principal {
  const rule = NEXT[action];
  if (!rule.from.includes(p.status)) {
    throw conflict(`cannot ${action} a principal that is ${p.status}`, { reason: 'invalid_transition', status: p.status });
  }
  const now = cell.clock.now();
  if (action === 'restore' && p.status_changed_at !== null && now - p.status_changed_at > cell.config.retentionSeconds * 1000) {
    throw conflict('the retention window has passed; the principal can only be purged', { reason: 'retention_elapsed' });
  }
  tx.run('UPDATE principals SET status = ?, status_changed_at = ? WHERE id = ?', [rule.to, now, p.id]);
  let keys = 0;
  if (action === 'archive' || action === 'delete') {
    keys = tx.run("UPDATE api_keys SET status = 'soft_deleted', deleted_at = ? WHERE owner_id = ? AND status = 'active'", [now, p.id]).changes;
  } else if (action === 'restore') {
    keys = tx.run("UPDATE api_keys SET status = 'active', deleted_at = NULL WHERE owner_id = ? AND status = 'soft_deleted'", [p.id]).changes;
  } else {
    keys = purgeKeysTx(tx, 'owner_id = ?', [p.id], now, 'owner_purged');
    tx.run('UPDATE principals SET password_hash = NULL WHERE id = ?', [p.id]);
  }
  recordAuditTx(tx, { at: now, actor, action: `principal.${action}`, target: p.id, outcome: 'ok', details: { keys_affected: keys } });
  if (action !== 'restore') deactivatedTx(cell, tx, p.id, action, actor, now);
  invalidateKeyCache(cell);
  return { ...p, status: rule.to, status_changed_at: now };
}

function purgeKeysTx(tx: Tx, where: string, params: (string | number)[], now: number, reason: string): number {
  const rows = tx.all<{ id: string; owner_id: string }>(`SELECT id, owner_id FROM api_keys WHERE ${where}`, params);
  for (const r of rows) {
    tx.run('INSERT OR REPLACE INTO key_tombstones (key_id, owner_id, at, reason) VALUES (?, ?, ?, ?)', [r.id, r.owner_id, now, reason]);
  }
  tx.run(`DELETE FROM api_keys WHERE ${where}`, params);
  return rows.length;
}

/**
 * The purge sweep: owners archived or deleted longer than the retention window
 * are purged, and soft-deleted keys past the window are collected too.
 */
export async function purgeSweep(cell: Cell): Promise<{ principals: number; keys: number }> {
  const now = cell.clock.now();
  const cutoff = now - cell.config.retentionSeconds * 1000;
  return cell.store.write((tx) => {
    const owners = tx.all<{ id: string }>(
      "SELECT id FROM principals WHERE status IN ('archived', 'deleted') AND status_changed_at <= ?", [cutoff]);
    let keys = 0;
    for (const o of owners) {
      tx.run("UPDATE principals SET status = 'purged', status_changed_at = ?, password_hash = NULL WHERE id = ?", [now, o.id]);
      keys += purgeKeysTx(tx, 'owner_id = ?', [o.id], now, 'owner_purged');
      recordAuditTx(tx, { at: now, actor: 'system:sweep', action: 'principal.purge', target: o.id, outcome: 'ok' });
      deactivatedTx(cell, tx, o.id, 'purge', 'system:sweep', now);
    }
    keys += purgeKeysTx(tx, "status = 'soft_deleted' AND deleted_at <= ?", [cutoff], now, 'retention_elapsed');
    if (owners.length || keys) invalidateKeyCache(cell);
    return { principals: owners.length, keys };
  });
}
