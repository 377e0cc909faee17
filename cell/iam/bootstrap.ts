/**
 * First start: the owner principal and one owner API key, printed once and
 * written to `<data>/bootstrap-admin.key` (mode 0600). Later starts do nothing.
 *
 * The key file is written durably (temp file, fsync, rename) before the owner
 * is committed: a crash in between leaves a file whose key is not yet valid
 * and no owner, so the next start bootstraps again and replaces the file. The
 * other order could leave an owner whose key nobody has.
 */
import { join } from 'node:path';
import { writeFileDurable } from '../../runtime/write-durable.ts';
import { UNBOUNDED } from '../../core/authority/ceiling.ts';
import type { Cell } from '../context.ts';
import { recordAuditTx } from './audit.ts';
import { mintKeyTx, newSecret } from './keys.ts';
import { createPrincipalTx } from './principals.ts';

export const BOOTSTRAP_KEY_FILE = 'bootstrap-admin.key';

/** Returns the owner key's secret when this start created it, else null. */
export async function bootstrapOwner(cell: Cell): Promise<string | null> {
  if (cell.store.get('SELECT 1 AS x FROM principals LIMIT 1')) return null;
  const secret = newSecret();
  writeFileDurable(join(cell.config.dataDir, BOOTSTRAP_KEY_FILE), secret + '\n', { mode: 0o600 });
  await cell.store.write((tx) => {
    const owner = createPrincipalTx(cell, tx, { kind: 'user', name: 'owner', roles: ['owner'], authority: UNBOUNDED, createdBy: null });
    const { row } = mintKeyTx(cell, tx, {
      ownerId: owner.id, name: 'bootstrap', scopes: [], rateLimitRpm: null,
      allowedIps: [], allowedRegions: [], expiresAt: null, createdBy: 'system:bootstrap', secret,
    });
    recordAuditTx(tx, { at: cell.clock.now(), actor: 'system:bootstrap', action: 'api_key.mint', target: row.id, outcome: 'ok', details: { owner_id: owner.id } });
  });
  return secret;
}
