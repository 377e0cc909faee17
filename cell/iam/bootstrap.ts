/**
 * First start: the owner principal and one owner API key, written to
 * `<data>/bootstrap-admin.key` (mode 0600) and returned to the caller
 * (cell/main.ts prints it once the cell listens). Later starts do nothing.
 *
 * The key file is written durably (temp file, fsync, rename) before the owner
 * is committed: a crash in between leaves a file whose key is not yet valid
 * and no owner, so the next start bootstraps again and replaces the file. The
 * other order could leave an owner whose key nobody has. Cells of a group
 * started at once on an empty store race: one creates the owner; the others
 * remove the file they wrote and print no key.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { UNBOUNDED } from '../../core/authority/ceiling.ts';
import { writeFileDurable } from '../../runtime/write-durable.ts';
import type { CellCore } from '../context.ts';
import type { Iam } from './iam.ts';
import { mintKeyTx, newSecret } from './keys.ts';
import { createPrincipalTx } from './principals.ts';
import { anyPrincipal } from './repository.ts';

export const BOOTSTRAP_KEY_FILE = 'bootstrap-admin.key';

/** Returns the owner key's secret when this start created it, else null. */
export async function bootstrapOwner(core: CellCore, iam: Iam): Promise<string | null> {
  if (await anyPrincipal(core.store)) return null;
  const secret = newSecret();
  const file = join(core.config.dataDir, BOOTSTRAP_KEY_FILE);
  writeFileDurable(file, secret + '\n', { mode: 0o600 });
  const created = await core.store.write(async (tx) => {
    // Another cell of the group may have bootstrapped meanwhile: the first one wins.
    if (await anyPrincipal(tx)) return false;
    const owner = await createPrincipalTx(core.clock, tx, {
      kind: 'user',
      name: 'owner',
      roles: ['owner'],
      authority: UNBOUNDED,
      createdBy: null,
    });
    const { row } = await mintKeyTx(core.clock, tx, {
      ownerId: owner.id,
      name: 'bootstrap',
      scopes: [],
      rateLimitRpm: null,
      allowedIps: [],
      allowedRegions: [],
      expiresAt: null,
      createdBy: 'system:bootstrap',
      secret,
    });
    await iam.audit(tx, {
      actor: 'system:bootstrap',
      action: 'api_key.mint',
      target: row.id,
      outcome: 'ok',
      details: { owner_id: owner.id },
    });
    return true;
  });
  if (created) return secret;
  // Cells of a group started at once: another one created the owner, so this key was never valid.
  rmSync(file, { force: true });
  return null;
}
