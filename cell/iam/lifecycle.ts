/**
 * The owner lifecycle and what it does to keys (spec: API key lifecycle):
 * archive or soft delete -> the owner's active keys are soft-deleted,
 * recoverable within the retention window; restore brings them back; purge
 * hard-deletes every key of the owner and tombstones it. The sweep purges
 * owners, and soft-deleted keys, whose retention window has passed.
 *
 * Other modules react to a principal leaving (e.g. the scheduler disables
 * its definitions) through `onDeactivate` hooks, run inside the same
 * transaction so the audit trail and the effect land together.
 */
import { conflict } from '../../core/errors.ts';
import type { CellCore } from '../context.ts';
import type { Tx } from '../store/types.ts';
import type { Iam } from './iam.ts';
import type { Principal } from './principals.ts';
import * as repo from './repository.ts';

export type LifecycleAction = 'archive' | 'restore' | 'delete' | 'purge';

/** Called inside the transaction that makes a principal inactive (archive, delete, purge; the sweep purges). */
export type DeactivateHook = (
  tx: Tx,
  principalId: string,
  action: Exclude<LifecycleAction, 'restore'>,
  actor: string,
  at: number,
) => Promise<void>;

const NEXT: Record<LifecycleAction, { from: Principal['status'][]; to: Principal['status'] }> = {
  archive: { from: ['active'], to: 'archived' },
  delete: { from: ['active', 'archived'], to: 'deleted' },
  restore: { from: ['archived', 'deleted'], to: 'active' },
  purge: { from: ['active', 'archived', 'deleted'], to: 'purged' },
};

export class Lifecycle {
  readonly #hooks: DeactivateHook[] = [];
  constructor(
    private readonly core: CellCore,
    private readonly iam: Iam,
  ) {}

  /** Registers a reaction to a principal becoming inactive. */
  onDeactivate(hook: DeactivateHook): void {
    this.#hooks.push(hook);
  }

  async apply(p: Principal, action: LifecycleAction, actor: string, guard?: (tx: Tx) => Promise<void>): Promise<Principal> {
    const rule = NEXT[action];
    if (!rule.from.includes(p.status)) {
      throw conflict(`cannot ${action} a principal that is ${p.status}`, { reason: 'invalid_transition', status: p.status });
    }
    const now = this.core.clock.now();
    if (action === 'restore' && p.status_changed_at !== null && now - p.status_changed_at > this.core.config.retentionSeconds * 1000) {
      throw conflict('the retention window has passed; the principal can only be purged', { reason: 'retention_elapsed' });
    }
    return this.core.store.write(async (tx) => {
      // The caller's own refusal, read in this transaction (teams: a crew that binds the agent).
      if (guard) await guard(tx);
      await repo.setPrincipalStatus(tx, p.id, rule.to, now);
      let keys = 0;
      if (action === 'archive' || action === 'delete') {
        keys = await repo.softDeleteOwnerKeys(tx, p.id, now);
      } else if (action === 'restore') {
        keys = await repo.restoreOwnerKeys(tx, p.id);
      } else {
        keys = await repo.purgeOwnerKeys(tx, p.id, now);
        await repo.clearPassword(tx, p.id);
      }
      if (action !== 'restore') for (const h of this.#hooks) await h(tx, p.id, action, actor, now);
      await this.iam.audit(tx, {
        at: now,
        actor,
        action: `principal.${action}`,
        target: p.id,
        outcome: 'ok',
        details: { keys_affected: keys },
      });
      return { ...p, status: rule.to, status_changed_at: now };
    });
  }

  /**
   * The purge sweep: owners archived or deleted longer than the retention window
   * are purged, and soft-deleted keys past the window are collected too.
   */
  async sweep(): Promise<{ principals: number; keys: number }> {
    const now = this.core.clock.now();
    const cutoff = now - this.core.config.retentionSeconds * 1000;
    return this.core.store.write(async (tx) => {
      const owners = await repo.expiredPrincipals(tx, cutoff);
      let keys = 0;
      for (const id of owners) {
        await repo.setPrincipalStatus(tx, id, 'purged', now);
        await repo.clearPassword(tx, id);
        keys += await repo.purgeOwnerKeys(tx, id, now);
        for (const h of this.#hooks) await h(tx, id, 'purge', 'system:sweep', now);
        await this.iam.audit(tx, { at: now, actor: 'system:sweep', action: 'principal.purge', target: id, outcome: 'ok' });
      }
      keys += await repo.purgeSoftDeletedKeys(tx, cutoff, now);
      return { principals: owners.length, keys };
    });
  }
}
