/**
 * The OAuth token signing keys: Ed25519, held in the cell's store, separate
 * from the cell identity key. One key is active; rotation creates a new one
 * and retires the old, which stays in /oauth/jwks.json for the longest token
 * lifetime plus a minute, so tokens it signed keep verifying until they expire.
 */
import { createLocalJWKSet, importJWK, type JWK, type JWTVerifyGetKey } from 'jose';
import { generateEd25519 } from '../../core/crypto/ed25519.ts';
import type { Cell } from '../context.ts';
import { maxTokenLifetimeSeconds } from './settings.ts';

interface KeyRow { kid: string; private_jwk: string; public_jwk: string; created_at: number; retired_at: number | null }

export interface PublishedKey extends JWK { kid: string; alg: 'EdDSA'; use: 'sig' }

export interface Keyring {
  active: { kid: string; key: CryptoKey };
  published: PublishedKey[];
  keySet: JWTVerifyGetKey;
}

const rings = new WeakMap<Cell, Keyring>();

/** Creates the first signing key when there is none. */
export async function ensureSigningKey(cell: Cell): Promise<void> {
  if (!cell.store.get('SELECT kid FROM oauth_signing_keys WHERE retired_at IS NULL')) await addKey(cell);
  await loadKeyring(cell);
}

async function addKey(cell: Cell): Promise<string> {
  const k = await generateEd25519();
  const now = cell.clock.now();
  await cell.store.write((tx) => {
    tx.run('UPDATE oauth_signing_keys SET retired_at = ? WHERE retired_at IS NULL', [now]);
    tx.run('INSERT INTO oauth_signing_keys (kid, private_jwk, public_jwk, created_at, retired_at) VALUES (?, ?, ?, ?, NULL)',
      [k.kid, JSON.stringify(k.privateJwk), JSON.stringify(k.publicJwk), now]);
  });
  return k.kid;
}

/** Rotates: a new active key; the previous one keeps verifying for the overlap. Returns the new kid. */
export async function rotateSigningKey(cell: Cell): Promise<string> {
  const kid = await addKey(cell);
  await loadKeyring(cell);
  return kid;
}

async function loadKeyring(cell: Cell): Promise<Keyring> {
  const overlapMs = (maxTokenLifetimeSeconds(cell) + 60) * 1000;
  const now = cell.clock.now();
  const rows = cell.store.all<KeyRow & Record<string, never>>('SELECT * FROM oauth_signing_keys ORDER BY created_at DESC') as KeyRow[];
  const activeRow = rows.find((r) => r.retired_at === null);
  if (!activeRow) throw new TypeError('no active OAuth signing key: ensureSigningKey runs at init');
  const published = rows
    .filter((r) => r.retired_at === null || r.retired_at + overlapMs > now)
    .map((r) => ({ ...(JSON.parse(r.public_jwk) as JWK), kid: r.kid, alg: 'EdDSA' as const, use: 'sig' as const }));
  const key = (await importJWK(JSON.parse(activeRow.private_jwk) as JWK, 'EdDSA')) as CryptoKey;
  const ring: Keyring = { active: { kid: activeRow.kid, key }, published, keySet: createLocalJWKSet({ keys: published }) };
  rings.set(cell, ring);
  return ring;
}

/** The current keyring (reloaded when a retired key's overlap has ended). */
export function keyring(cell: Cell): Keyring {
  const ring = rings.get(cell);
  if (!ring) throw new TypeError('OAuth keyring not loaded: the oauth module init runs first');
  return ring;
}

/** Drops retired keys whose overlap has passed from the published set. */
export async function refreshKeyring(cell: Cell): Promise<void> {
  await loadKeyring(cell);
}
