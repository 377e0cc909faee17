/**
 * Owner recovery (`node dist/cell.mjs admin reset-owner`): an operator who
 * lost every owner key but holds the machine (the data directory, or the
 * PostgreSQL store's URL) mints a new API key for the owner. Nothing is
 * revoked: the lost keys stay as they were until the operator revokes them
 * with the new key (the command lists them). The mint is audited as
 * `api_key.mint` by `system:reset-owner`, with `details.reason: reset_owner`.
 *
 * As at bootstrap (cell/iam/bootstrap.ts), the key file is written durably
 * (mode 0600) before the key is committed: a crash in between leaves a file
 * whose key was never valid, never a valid key that nobody holds.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { UNBOUNDED } from '../../core/authority/ceiling.ts';
import { isoTime } from '../../core/iso-time.ts';
import { SetupError } from '../../runtime/setup-error.ts';
import { writeFileDurable } from '../../runtime/write-durable.ts';
import type { CellCore } from '../context.ts';
import type { Iam } from './iam.ts';
import { mintKeyTx, newSecret } from './keys.ts';
import { createPrincipalTx } from './principals.ts';
import { listKeys, principalById, principalsWithRole } from './repository.ts';

export interface OwnerReset {
  secret: string;
  keyId: string;
  ownerId: string;
  /** Where the secret was written (mode 0600). */
  file: string;
  /** True when no active owner was left and a new owner principal was created. */
  createdOwner: boolean;
  /** The owner's other keys, still active: revoke the lost ones with the new key. */
  activeKeys: { id: string; name: string; created_at: number }[];
}

/** Mints a new owner key (for `principalId`, else the oldest active owner; a new owner when none is active). */
export async function resetOwner(core: CellCore, iam: Iam, opts: { principalId?: string }): Promise<OwnerReset> {
  const at = core.clock.now();
  const secret = newSecret();
  const file = join(core.config.dataDir, `owner-reset-${isoTime(at).replace(/[:.]/g, '')}.key`);
  writeFileDurable(file, secret + '\n', { mode: 0o600 });
  try {
    return await core.store.write(async (tx) => {
      let ownerId: string;
      let createdOwner = false;
      if (opts.principalId !== undefined) {
        const p = await principalById(tx, opts.principalId);
        if (p?.status !== 'active' || !p.roles.includes('owner'))
          throw new SetupError(`--principal ${opts.principalId}: no active principal with the owner role has that id`);
        ownerId = p.id;
      } else {
        const owners = await principalsWithRole(tx, 'owner', ['active']);
        if (owners[0]) ownerId = owners[0].id;
        else {
          const p = await createPrincipalTx(core.clock, tx, {
            kind: 'user',
            name: `owner-reset-${at}`,
            roles: ['owner'],
            authority: UNBOUNDED,
            createdBy: 'system:reset-owner',
          });
          ownerId = p.id;
          createdOwner = true;
          await iam.audit(tx, {
            actor: 'system:reset-owner',
            action: 'principal.create',
            target: p.id,
            outcome: 'ok',
            details: { reason: 'reset_owner', roles: ['owner'] },
          });
        }
      }
      const activeKeys = (await listKeys(tx, 1000, 0, ownerId))
        .filter((k) => k.status === 'active')
        .map((k) => ({ id: k.id, name: k.name, created_at: k.created_at }));
      const { row } = await mintKeyTx(core.clock, tx, {
        ownerId,
        name: `owner-reset-${isoTime(at)}`,
        scopes: [],
        rateLimitRpm: null,
        allowedIps: [],
        allowedRegions: [],
        expiresAt: null,
        createdBy: 'system:reset-owner',
        secret,
      });
      await iam.audit(tx, {
        actor: 'system:reset-owner',
        action: 'api_key.mint',
        target: row.id,
        outcome: 'ok',
        details: { owner_id: ownerId, reason: 'reset_owner', keys_left_active: activeKeys.map((k) => k.id) },
      });
      return { secret, keyId: row.id, ownerId, file, createdOwner, activeKeys };
    });
  } catch (err) {
    // Never committed: the file holds a key that is not valid.
    rmSync(file, { force: true });
    throw err;
  }
}
