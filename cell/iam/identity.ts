/**
 * The cell's own Ed25519 identity: signs journals and bundles. Created on first
 * start and kept in the store; verifiers get every key, retired ones included,
 * so old journals keep verifying.
 */
import { generateEd25519, signEd25519 } from '../../core/crypto/ed25519.ts';
import type { Cell } from '../context.ts';

export interface CellKey { kid: string; jwk: JsonWebKey; retired_at: number | null }

export async function ensureIdentityKey(cell: Cell): Promise<void> {
  const row = cell.store.get("SELECT kid FROM cell_keys WHERE purpose = 'identity' AND retired_at IS NULL");
  if (row) return;
  const k = await generateEd25519();
  await cell.store.write((tx) => tx.run(
    "INSERT INTO cell_keys (kid, purpose, private_jwk, public_jwk, created_at, retired_at) VALUES (?, 'identity', ?, ?, ?, NULL)",
    [k.kid, JSON.stringify(k.privateJwk), JSON.stringify(k.publicJwk), cell.clock.now()]));
}

export function cellSigner(cell: Cell): { kid: string; sign(bytes: Uint8Array): Promise<Uint8Array> } {
  const row = cell.store.get<{ kid: string; private_jwk: string }>(
    "SELECT kid, private_jwk FROM cell_keys WHERE purpose = 'identity' AND retired_at IS NULL ORDER BY created_at DESC LIMIT 1");
  if (!row) throw new TypeError('cell identity key missing: ensureIdentityKey runs at start');
  const jwk = JSON.parse(row.private_jwk) as JsonWebKey;
  return { kid: row.kid, sign: (bytes) => signEd25519(jwk, bytes) };
}

export function cellPublicJwks(cell: Cell): CellKey[] {
  return cell.store.all<{ kid: string; public_jwk: string; retired_at: number | null }>(
    "SELECT kid, public_jwk, retired_at FROM cell_keys WHERE purpose = 'identity' ORDER BY created_at")
    .map((r) => ({ kid: r.kid, jwk: JSON.parse(r.public_jwk) as JsonWebKey, retired_at: r.retired_at }));
}
