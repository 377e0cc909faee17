/**
 * Issuing signed bundles for a registered device (routes and the
 * `bundle keys` CLI share this): the key bundle (format 2) from the IAM
 * projection plus what the device needs to judge this cell's access tokens
 * (every principal, the token issuer and signing keys, the live denylist),
 * the crew bundle from a crew's export, and the trust anchor a device pins.
 */
import type { KeyRecord } from '../../core/apikey/verify.ts';
import { invalid } from '../../core/errors.ts';
import { buildKeyBundle, type BundleOwner, type TokenTrust } from '../../bundles/key-bundle.ts';
import { buildCrewBundle, type CrewContent, type ModelReference } from '../../bundles/crew-bundle.ts';
import type { Cell } from '../context.ts';
import type { Tx } from '../store/types.ts';
import { cellPublicJwks, cellSigner } from '../iam/identity.ts';
import { getKeyRow, keyRecord, projectKeyRecords } from '../iam/keys.ts';
import { listPrincipals, principalPermissions } from '../iam/principals.ts';
import { liveRevocations } from '../oauth/denylist.ts';
import { issuerOf } from '../oauth/settings.ts';
import { keyring } from '../oauth/signing-keys.ts';
import { requireDevice } from './devices.ts';

/** Default lifetime of a key bundle: a week, long enough to carry it, short enough to bound stale keys. */
export const DEFAULT_KEY_BUNDLE_TTL_SECONDS = 7 * 24 * 3600;
/** Default lifetime of a crew bundle: 30 days. */
export const DEFAULT_CREW_BUNDLE_TTL_SECONDS = 30 * 24 * 3600;
export const MAX_BUNDLE_TTL_SECONDS = 365 * 24 * 3600;

export interface IssuedBundle {
  text: string;
  version: number;
  issued_at: number;
  expires_at: number | null;
}

function nextVersionTx(tx: Tx, type: string): number {
  const row = tx.get<{ version: number }>('SELECT version FROM edge_bundle_versions WHERE type = ?', [type]);
  const v = (row?.version ?? 0) + 1;
  tx.run('INSERT INTO edge_bundle_versions (type, version) VALUES (?, ?) ON CONFLICT(type) DO UPDATE SET version = excluded.version', [type, v]);
  return v;
}

function ttlMs(ttlSeconds: number | undefined, dflt: number): number {
  const t = ttlSeconds ?? dflt;
  if (!Number.isInteger(t) || t < 1 || t > MAX_BUNDLE_TTL_SECONDS) throw invalid(`ttl_seconds must be 1 to ${MAX_BUNDLE_TTL_SECONDS}`);
  return t * 1000;
}

/**
 * Every key as the device must judge it: active records, plus the records of
 * revoked or soft-deleted keys (so the device refuses them for the same reason
 * the cell does), plus tombstones for keys that are gone.
 */
export function keyRecordsForEdge(cell: Cell): { records: KeyRecord[]; tombstones: { key_id: string; at: number }[] } {
  const { records, tombstones } = projectKeyRecords(cell);
  const all = [...records];
  for (const t of tombstones) {
    const row = getKeyRow(cell.store, t.key_id);
    if (row) all.push(keyRecord(cell, row));
  }
  return { records: all, tombstones };
}

/**
 * What a device needs to judge this cell's access tokens offline: the issuer,
 * the published token signing keys, and the revoked token ids whose tokens
 * have not expired (tokens are short-lived, so the list stays short).
 */
export function tokenTrustForEdge(cell: Cell): TokenTrust {
  return {
    issuer: issuerOf(cell),
    keys: keyring(cell).published.map((k) => ({ kid: k.kid, kty: 'OKP' as const, crv: 'Ed25519' as const, x: k.x!, alg: 'EdDSA' as const })),
    revoked: liveRevocations(cell, Math.floor(cell.clock.now() / 1000)),
  };
}

/** Every principal with its status and, when active, its role permissions: the possible token subjects. */
export function subjectsForEdge(cell: Cell): Record<string, BundleOwner> {
  const out: Record<string, BundleOwner> = {};
  const PAGE = 1000;
  for (let offset = 0; ; offset += PAGE) {
    const page = listPrincipals(cell.store, PAGE, offset);
    for (const p of page) out[p.id] = { status: p.status, permissions: p.status === 'active' ? principalPermissions(cell, p) : [] };
    if (page.length < PAGE) return out;
  }
}

export async function issueKeyBundle(cell: Cell, deviceId: string, ttlSeconds?: number): Promise<IssuedBundle> {
  requireDevice(cell, deviceId);
  const ttl = ttlMs(ttlSeconds, DEFAULT_KEY_BUNDLE_TTL_SECONDS);
  const now = cell.clock.now();
  const version = await cell.store.write((tx) => nextVersionTx(tx, 'api-key-records'));
  const { records, tombstones } = keyRecordsForEdge(cell);
  const text = await buildKeyBundle({
    issuer: cell.config.cellId, signer: cellSigner(cell), audience: deviceId, version,
    issuedAt: now, expiresAt: now + ttl, records, tombstones, subjects: subjectsForEdge(cell), tokens: tokenTrustForEdge(cell),
  });
  return { text, version, issued_at: now, expires_at: now + ttl };
}

export async function issueCrewBundle(cell: Cell, deviceId: string, crew: CrewContent, model: ModelReference | null, ttlSeconds?: number): Promise<IssuedBundle> {
  requireDevice(cell, deviceId);
  const ttl = ttlMs(ttlSeconds, DEFAULT_CREW_BUNDLE_TTL_SECONDS);
  const now = cell.clock.now();
  const version = await cell.store.write((tx) => nextVersionTx(tx, 'crew'));
  const text = await buildCrewBundle({
    issuer: cell.config.cellId, signer: cellSigner(cell), audience: deviceId, version,
    issuedAt: now, expiresAt: now + ttl, crew, model,
  });
  return { text, version, issued_at: now, expires_at: now + ttl };
}

/** What a device pins with `edge trust`: the cell id and its identity public keys. */
export function trustAnchor(cell: Cell): { cell_id: string; keys: { kid: string; jwk: JsonWebKey }[] } {
  return {
    cell_id: cell.config.cellId,
    keys: cellPublicJwks(cell).filter((k) => k.retired_at === null).map((k) => ({ kid: k.kid, jwk: k.jwk })),
  };
}
