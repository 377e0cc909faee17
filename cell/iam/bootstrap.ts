/**
 * First start: the owner principal and one owner API key, printed once and
 * written to `<data>/bootstrap-admin.key` (mode 0600). Later starts do nothing.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Cell } from '../context.ts';
import { recordAuditTx } from './audit.ts';
import { mintKeyTx } from './keys.ts';
import { createPrincipalTx } from './principals.ts';

export const BOOTSTRAP_KEY_FILE = 'bootstrap-admin.key';

/** Returns the owner key's secret when this start created it, else null. */
export async function bootstrapOwner(cell: Cell): Promise<string | null> {
  if (cell.store.get('SELECT 1 AS x FROM principals LIMIT 1')) return null;
  const secret = await cell.store.write((tx) => {
    const owner = createPrincipalTx(cell, tx, { kind: 'user', name: 'owner', roles: ['owner'], createdBy: null });
    const { row, secret } = mintKeyTx(cell, tx, {
      ownerId: owner.id, name: 'bootstrap', scopes: [], rateLimitRpm: null,
      allowedIps: [], allowedRegions: [], expiresAt: null, createdBy: 'system:bootstrap',
    });
    recordAuditTx(tx, { at: cell.clock.now(), actor: 'system:bootstrap', action: 'api_key.mint', target: row.id, outcome: 'ok', details: { owner_id: owner.id } });
    return secret;
  });
  writeFileSync(join(cell.config.dataDir, BOOTSTRAP_KEY_FILE), secret + '\n', { mode: 0o600 });
  return secret;
}
