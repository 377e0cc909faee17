/**
 * API keys: mint, rotate (with a grace window for the previous secret),
 * revoke, lookup by hash, and the projection the edge's key bundle carries.
 * Only SHA-256 hashes are stored; a secret is returned once, at mint/rotate.
 * The decision whether a presented key is good is core's verifyPresentedKey,
 * the same function the edge runs against its bundle.
 */
import { KEY_PREFIX, generateSecret, isSecretFormat } from '../../core/apikey/secret.ts';
import { hashSecret } from '../../core/apikey/hash.ts';
import { verifyPresentedKey, type KeyRecord } from '../../core/apikey/verify.ts';
import { meetCeilings, parseCeiling, type Ceiling } from '../../core/authority/ceiling.ts';
import { effectiveAuthority } from '../../core/authority/scopes.ts';
import type { AuthorityEnvelope } from '../../core/authority/envelope.ts';
import type { Grant } from '../../core/authority/contain.ts';
import { ServiceError, conflict, unauthorized } from '../../core/errors.ts';
import type { AuthContext, Authenticator, Cell } from '../context.ts';
import { clientIp } from '../http/client-ip.ts';
import type { Reader, Tx } from '../store/types.ts';
import { newId } from './ids.ts';
import { getPrincipal, principalPermissions, type Principal } from './principals.ts';

export type KeyStatus = 'active' | 'revoked' | 'soft_deleted' | 'purged';

export interface KeyRow {
  id: string; owner_id: string; name: string; hash: string; prev_hash: string | null; prev_not_after: number | null;
  scopes: string; rate_limit_rpm: number | null; allowed_ips: string; allowed_regions: string; status: KeyStatus;
  created_at: number; created_by: string; expires_at: number | null; rotated_at: number | null;
  revoked_at: number | null; deleted_at: number | null;
  /** JSON envelope cap of this key, or null: the owner's full ceiling. */
  authority: string | null;
}

export interface MintInput {
  ownerId: string; name: string; scopes: string[]; rateLimitRpm: number | null;
  allowedIps: string[]; allowedRegions: string[]; expiresAt: number | null; createdBy: string;
  /** Envelope cap of the key; null or absent: the owner's full ceiling. */
  authority?: AuthorityEnvelope | null;
  /** A secret generated beforehand (bootstrap writes it to disk before committing); default: a fresh one. */
  secret?: string;
}

const randomBytes = (n: number) => crypto.getRandomValues(new Uint8Array(n));

export function getKeyRow(db: Reader, id: string): KeyRow | undefined {
  return db.get('SELECT * FROM api_keys WHERE id = ?', [id]) as unknown as KeyRow | undefined;
}

/** A fresh API key secret. */
export function newSecret(): string {
  return generateSecret(randomBytes);
}

export function listKeyRows(db: Reader, limit: number, offset: number, ownerId?: string): KeyRow[] {
  return (ownerId
    ? db.all('SELECT * FROM api_keys WHERE owner_id = ? ORDER BY created_at, id LIMIT ? OFFSET ?', [ownerId, limit, offset])
    : db.all('SELECT * FROM api_keys ORDER BY created_at, id LIMIT ? OFFSET ?', [limit, offset])) as unknown as KeyRow[];
}

/** Mints inside the caller's transaction; returns the row and the secret (shown once). */
export function mintKeyTx(cell: Cell, tx: Tx, input: MintInput): { row: KeyRow; secret: string } {
  const secret = input.secret ?? generateSecret(randomBytes);
  if (!isSecretFormat(secret)) throw new TypeError('mintKeyTx: not an API key secret');
  const row: KeyRow = {
    id: newId('key'), owner_id: input.ownerId, name: input.name, hash: hashSecret(secret),
    prev_hash: null, prev_not_after: null, scopes: JSON.stringify(input.scopes),
    rate_limit_rpm: input.rateLimitRpm, allowed_ips: JSON.stringify(input.allowedIps),
    allowed_regions: JSON.stringify(input.allowedRegions), status: 'active', created_at: cell.clock.now(),
    created_by: input.createdBy, expires_at: input.expiresAt, rotated_at: null, revoked_at: null, deleted_at: null,
    authority: input.authority ? JSON.stringify(input.authority) : null,
  };
  const cols = Object.keys(row);
  tx.run(`INSERT INTO api_keys (${cols.join(', ')}) VALUES (${cols.map(() => '?').join(', ')})`, Object.values(row));
  invalidateKeyCache(cell);
  return { row, secret };
}

/**
 * New secret; the previous one keeps verifying until now + grace, never past
 * the key's own expiry. Only the most recent previous secret survives a rotation.
 */
export function rotateKeyTx(cell: Cell, tx: Tx, row: KeyRow, graceSeconds: number): { row: KeyRow; secret: string } {
  const now = cell.clock.now();
  if (row.status !== 'active') throw conflict(`key is ${row.status} and cannot be rotated`, { reason: 'key_not_active' });
  if (row.expires_at !== null && row.expires_at <= now) throw conflict('key has expired and cannot be rotated', { reason: 'key_expired' });
  const secret = generateSecret(randomBytes);
  let notAfter = now + graceSeconds * 1000;
  if (row.expires_at !== null) notAfter = Math.min(notAfter, row.expires_at);
  const next: KeyRow = { ...row, prev_hash: row.hash, prev_not_after: notAfter, hash: hashSecret(secret), rotated_at: now };
  tx.run('UPDATE api_keys SET hash = ?, prev_hash = ?, prev_not_after = ?, rotated_at = ? WHERE id = ?',
    [next.hash, next.prev_hash, next.prev_not_after, now, row.id]);
  invalidateKeyCache(cell);
  return { row: next, secret };
}

export function revokeKeyTx(cell: Cell, tx: Tx, row: KeyRow): KeyRow {
  if (row.status === 'revoked' || row.status === 'purged') return row;
  const now = cell.clock.now();
  tx.run("UPDATE api_keys SET status = 'revoked', revoked_at = ? WHERE id = ?", [now, row.id]);
  invalidateKeyCache(cell);
  return { ...row, status: 'revoked', revoked_at: now };
}

/** Public view: never the secret, never a hash. */
export function keyView(row: KeyRow, secret?: string) {
  const iso = (t: number | null) => (t === null ? null : new Date(t).toISOString());
  return {
    key_id: row.id,
    ...(secret !== undefined ? { secret } : {}),
    owner_id: row.owner_id,
    name: row.name,
    status: row.status,
    scopes: JSON.parse(row.scopes) as string[],
    rate_limit_rpm: row.rate_limit_rpm,
    allowed_ips: JSON.parse(row.allowed_ips) as string[],
    allowed_regions: JSON.parse(row.allowed_regions) as string[],
    created_at: iso(row.created_at)!,
    created_by: row.created_by,
    expires_at: iso(row.expires_at),
    rotated_at: iso(row.rotated_at),
    previous_secret_valid_until: row.prev_hash ? iso(row.prev_not_after) : null,
    revoked_at: iso(row.revoked_at),
    authority: row.authority === null ? null : parseCeiling(row.authority),
  };
}

/** The envelope a key holds: its owner's ceiling met with the key's own cap. */
export function keyEnvelope(row: Pick<KeyRow, 'authority'>, owner: Pick<Principal, 'authority'> | undefined): Ceiling {
  if (!owner) return {};
  return row.authority === null ? owner.authority : meetCeilings(owner.authority, parseCeiling(row.authority));
}

/** Everything a key lets its holder do, as containment compares it. */
export function keyAuthority(cell: Cell, row: KeyRow, owner: Principal | undefined = getPrincipal(cell, row.owner_id)): Grant {
  const perms = owner ? principalPermissions(cell, owner) : [];
  return { permissions: effectiveAuthority(perms, JSON.parse(row.scopes) as string[]), envelope: keyEnvelope(row, owner) };
}

/** The record core judges, built from a row and its owner. */
export function keyRecord(cell: Cell, row: KeyRow, owner: Principal | undefined = getPrincipal(cell, row.owner_id)): KeyRecord {
  const hashes: KeyRecord['hashes'] = [{ hash: row.hash, not_after: row.expires_at }];
  if (row.prev_hash && row.prev_not_after !== null) hashes.push({ hash: row.prev_hash, not_after: row.prev_not_after });
  return {
    key_id: row.id,
    owner_id: row.owner_id,
    owner_status: owner?.status ?? 'purged',
    status: row.status,
    hashes,
    expires_at: row.expires_at,
    owner_permissions: owner ? principalPermissions(cell, owner) : [],
    scopes: JSON.parse(row.scopes) as string[],
    rate_limit_rpm: row.rate_limit_rpm,
    allowed_ips: JSON.parse(row.allowed_ips) as string[],
    allowed_regions: JSON.parse(row.allowed_regions) as string[],
  };
}

// --- lookup cache: hash -> record, dropped whole on any IAM write -------------

interface CacheEntry { record: KeyRecord; owner: Principal | undefined; envelope: Ceiling }
const caches = new WeakMap<Cell, Map<string, CacheEntry | null>>();

export function invalidateKeyCache(cell: Cell): void {
  caches.get(cell)?.clear();
}

function lookup(cell: Cell, hash: string): CacheEntry | undefined {
  let cache = caches.get(cell);
  if (!cache) { cache = new Map(); caches.set(cell, cache); }
  const hit = cache.get(hash);
  if (hit !== undefined) return hit ?? undefined;
  const row = cell.store.get('SELECT * FROM api_keys WHERE hash = ? OR prev_hash = ? LIMIT 1', [hash, hash]) as unknown as KeyRow | undefined;
  const owner = row ? getPrincipal(cell, row.owner_id) : undefined;
  const entry = row ? { record: keyRecord(cell, row, owner), owner, envelope: keyEnvelope(row, owner) } : null;
  if (cache.size > 50_000) cache.clear();
  cache.set(hash, entry);
  return entry ?? undefined;
}

/** Judges a presented secret; returns the request's authority or throws the refusal. */
export function authenticateKeySecret(cell: Cell, secret: string, ip: string | null): AuthContext {
  if (!isSecretFormat(secret)) throw unauthorized('malformed API key');
  const hash = hashSecret(secret);
  const entry = lookup(cell, hash);
  const verdict = verifyPresentedKey(entry?.record, hash, { now: cell.clock.now(), ip, region: cell.config.region });
  if (!verdict.ok || !entry?.owner) {
    const code = verdict.ok ? 'unauthorized' : verdict.code;
    throw new ServiceError(code, code === 'forbidden' ? 'the key may not be used from here' : 'API key refused', {
      details: { reason: verdict.ok ? 'owner_inactive' : verdict.reason },
    });
  }
  const { record, owner } = entry;
  return {
    principal: { id: owner.id, kind: owner.kind, name: owner.name, roles: owner.roles },
    permissions: record.owner_permissions,
    scopes: record.scopes,
    effective: verdict.effective,
    envelope: entry.envelope,
    credential: {
      type: 'api_key', id: record.key_id, root: `api_key:${record.key_id}`,
      ...(record.rate_limit_rpm !== null ? { rateLimitRpm: record.rate_limit_rpm } : {}),
    },
  };
}

export function apiKeyAuthenticator(cell: Cell): Authenticator {
  return {
    name: 'api_key',
    async authenticate({ scheme, token }, c) {
      if (!token.startsWith(KEY_PREFIX)) return null;
      if (scheme !== 'bearer') throw unauthorized('API keys are presented with the Bearer scheme');
      return authenticateKeySecret(cell, token, clientIp(c, cell.config.trustedProxies));
    },
  };
}

/** Every key as the edge bundle carries it: live records, and tombstones for the dead. */
export function projectKeyRecords(cell: Cell): { records: KeyRecord[]; tombstones: { key_id: string; at: number }[] } {
  const rows = cell.store.all('SELECT * FROM api_keys ORDER BY id') as unknown as KeyRow[];
  const records: KeyRecord[] = [];
  const tombstones: { key_id: string; at: number }[] = [];
  for (const r of rows) {
    if (r.status === 'active') records.push(keyRecord(cell, r));
    else tombstones.push({ key_id: r.id, at: r.revoked_at ?? r.deleted_at ?? r.created_at });
  }
  for (const t of cell.store.all<{ key_id: string; at: number }>('SELECT key_id, at FROM key_tombstones ORDER BY key_id')) {
    tombstones.push({ key_id: t.key_id, at: t.at });
  }
  return { records, tombstones };
}
