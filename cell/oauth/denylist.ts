/**
 * Revoked token ids. Kept in the store (survives restarts) and mirrored in
 * memory so the bearer path checks it on every request at no cost. An entry
 * is kept until the token's own `exp`: after that the token is refused as
 * expired anyway.
 */
import type { Cell } from '../context.ts';
import type { Tx } from '../store/types.ts';

const lists = new WeakMap<Cell, Map<string, number>>();

function mem(cell: Cell): Map<string, number> {
  let m = lists.get(cell);
  if (!m) {
    m = new Map();
    for (const r of cell.store.all<{ jti: string; exp: number }>('SELECT jti, exp FROM oauth_denylist')) m.set(r.jti, r.exp);
    lists.set(cell, m);
  }
  return m;
}

export function isRevoked(cell: Cell, jti: string): boolean {
  return mem(cell).has(jti);
}

/** Revoked token ids whose tokens expire after `nowSeconds`: [jti, exp], for the devices' key bundles. */
export function liveRevocations(cell: Cell, nowSeconds: number): [string, number][] {
  const out: [string, number][] = [];
  for (const [jti, exp] of mem(cell)) if (exp > nowSeconds) out.push([jti, exp]);
  return out.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
}

/** Adds to the denylist inside a transaction; call `noteRevokedTx` effects after commit via the returned function. */
export function denyTx(cell: Cell, tx: Tx, jti: string, expSeconds: number): () => void {
  tx.run('INSERT OR IGNORE INTO oauth_denylist (jti, exp) VALUES (?, ?)', [jti, expSeconds]);
  return () => { mem(cell).set(jti, expSeconds); };
}

export async function deny(cell: Cell, jti: string, expSeconds: number): Promise<void> {
  const after = await cell.store.write((tx) => denyTx(cell, tx, jti, expSeconds));
  after();
}

/** Drops entries whose tokens have expired. */
export async function sweepDenylist(cell: Cell): Promise<number> {
  const nowS = Math.floor(cell.clock.now() / 1000);
  const n = await cell.store.write((tx) => tx.run('DELETE FROM oauth_denylist WHERE exp < ?', [nowS]).changes);
  const m = mem(cell);
  for (const [j, exp] of m) if (exp < nowS) m.delete(j);
  return n;
}
