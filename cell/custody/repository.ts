/**
 * Every SQL statement of the custody module (the `custody_key_check` table),
 * in the dialect both engines run (docs/storage.md).
 */
import { bytes } from '../store/decode.ts';
import type { Reader, Tx } from '../store/types.ts';

/** The table whose changes custody follows (another cell, or someone with the database, replaced the check). */
export const KEY_CHECK_TABLE = 'custody_key_check';

/** The group's key check (sealed under the group's secrets key), or undefined when none was recorded yet. */
export async function keyCheck(db: Reader): Promise<Uint8Array | undefined> {
  const r = await db.get('SELECT sealed FROM custody_key_check WHERE id = 1');
  return r ? bytes(r, 'sealed') : undefined;
}

/** Records the key check unless one is there already (the first of cells starting at once wins). */
export async function insertKeyCheck(tx: Tx, sealed: Uint8Array, at: number): Promise<void> {
  await tx.run('INSERT INTO custody_key_check (id, sealed, created_at) VALUES (1, ?, ?) ON CONFLICT (id) DO NOTHING', [sealed, at]);
}
