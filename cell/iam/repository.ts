/**
 * Every SQL statement of the IAM module (principals, custom roles, API keys,
 * key tombstones, the audit trail, the cell's identity keys), with the row
 * decoders. Domain code calls these functions; nothing else in the module
 * writes SQL. Statements stay in the dialect both engines run (docs/storage.md).
 */
import { parseCeiling } from '../../core/authority/ceiling.ts';
import { count, json, jsonOrNull, num, numOrNull, object, str, strOrNull, stringArray } from '../store/decode.ts';
import type { DbNow } from '../store/db-clock.ts';
import type { Reader, Row, SqlValue, Tx } from '../store/types.ts';
import type { Principal, PrincipalKind, PrincipalStatus } from './principals.ts';

// ---------------------------------------------------------------- principals

const PRINCIPAL_COLUMNS = 'id, kind, name, status, roles, authority, created_at, created_by, status_changed_at';

const PRINCIPAL_KINDS: readonly PrincipalKind[] = ['user', 'service', 'agent'];
const PRINCIPAL_STATUSES: readonly PrincipalStatus[] = ['active', 'archived', 'deleted', 'purged'];

function oneOf<T extends string>(values: readonly T[], v: string, what: string): T {
  if (!(values as readonly string[]).includes(v)) throw new TypeError(`store row: unknown ${what} ${v}`);
  return v as T;
}

function decodePrincipal(r: Row): Principal {
  return {
    id: str(r, 'id'),
    kind: oneOf(PRINCIPAL_KINDS, str(r, 'kind'), 'principal kind'),
    name: str(r, 'name'),
    status: oneOf(PRINCIPAL_STATUSES, str(r, 'status'), 'principal status'),
    roles: json(r, 'roles', stringArray),
    authority: parseCeiling(str(r, 'authority')),
    created_at: num(r, 'created_at'),
    created_by: strOrNull(r, 'created_by'),
    status_changed_at: numOrNull(r, 'status_changed_at'),
  };
}

export async function principalById(db: Reader, id: string): Promise<Principal | undefined> {
  const r = await db.get(`SELECT ${PRINCIPAL_COLUMNS} FROM principals WHERE id = ?`, [id]);
  return r ? decodePrincipal(r) : undefined;
}

export async function principalByName(db: Reader, name: string): Promise<Principal | undefined> {
  const r = await db.get(`SELECT ${PRINCIPAL_COLUMNS} FROM principals WHERE name = ?`, [name]);
  return r ? decodePrincipal(r) : undefined;
}

export async function anyPrincipal(db: Reader): Promise<boolean> {
  return (await db.get('SELECT 1 AS x FROM principals LIMIT 1')) !== undefined;
}

export async function listPrincipals(db: Reader, limit: number, offset: number, kind?: string): Promise<Principal[]> {
  const rows = kind
    ? await db.all(`SELECT ${PRINCIPAL_COLUMNS} FROM principals WHERE kind = ? ORDER BY created_at, id LIMIT ? OFFSET ?`, [
        kind,
        limit,
        offset,
      ])
    : await db.all(`SELECT ${PRINCIPAL_COLUMNS} FROM principals ORDER BY created_at, id LIMIT ? OFFSET ?`, [limit, offset]);
  return rows.map(decodePrincipal);
}

export async function countPrincipals(db: Reader, kind?: string): Promise<number> {
  return count(
    kind
      ? await db.get('SELECT COUNT(*) AS n FROM principals WHERE kind = ?', [kind])
      : await db.get('SELECT COUNT(*) AS n FROM principals'),
  );
}

export async function countActive(db: Reader, kind: PrincipalKind): Promise<number> {
  return count(await db.get("SELECT COUNT(*) AS n FROM principals WHERE kind = ? AND status = 'active'", [kind]));
}

export async function insertPrincipal(tx: Tx, p: Principal, passwordHash: string | null): Promise<void> {
  await tx.run(`INSERT INTO principals (${PRINCIPAL_COLUMNS}, password_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, [
    p.id,
    p.kind,
    p.name,
    p.status,
    JSON.stringify(p.roles),
    JSON.stringify(p.authority),
    p.created_at,
    p.created_by,
    p.status_changed_at,
    passwordHash,
  ]);
}

export async function setPrincipalStatus(tx: Tx, id: string, status: PrincipalStatus, at: number): Promise<void> {
  await tx.run('UPDATE principals SET status = ?, status_changed_at = ? WHERE id = ?', [status, at, id]);
}

/** Sets a principal's envelope ceiling (an agent's authority follows its template). */
export async function setPrincipalAuthority(tx: Tx, id: string, authority: unknown): Promise<void> {
  await tx.run('UPDATE principals SET authority = ? WHERE id = ?', [JSON.stringify(authority), id]);
}

export async function clearPassword(tx: Tx, id: string): Promise<void> {
  await tx.run('UPDATE principals SET password_hash = NULL WHERE id = ?', [id]);
}

export async function passwordHashOf(db: Reader, id: string): Promise<string | null> {
  const r = await db.get('SELECT password_hash FROM principals WHERE id = ?', [id]);
  return r ? strOrNull(r, 'password_hash') : null;
}

/** Archived or deleted principals whose status changed at or before `cutoff`. */
export async function expiredPrincipals(db: Reader, cutoff: number): Promise<string[]> {
  const rows = await db.all("SELECT id FROM principals WHERE status IN ('archived', 'deleted') AND status_changed_at <= ?", [cutoff]);
  return rows.map((r) => str(r, 'id'));
}

export async function principalNameTaken(db: Reader, name: string): Promise<boolean> {
  return (await db.get('SELECT 1 AS x FROM principals WHERE name = ?', [name])) !== undefined;
}

/** Renames a principal and sets its roles. */
export async function updatePrincipal(tx: Tx, id: string, name: string, roles: readonly string[]): Promise<void> {
  await tx.run('UPDATE principals SET name = ?, roles = ? WHERE id = ?', [name, JSON.stringify(roles), id]);
}

/**
 * Principals holding `role`, oldest first, of the given statuses. The LIKE over the
 * stored JSON only narrows (`_` and `-` both occur in role names); the decoded roles decide.
 */
export async function principalsWithRole(db: Reader, role: string, statuses: readonly PrincipalStatus[]): Promise<Principal[]> {
  const rows = await db.all(`SELECT ${PRINCIPAL_COLUMNS} FROM principals WHERE roles LIKE ? ORDER BY created_at, id`, [`%"${role}"%`]);
  return rows.map(decodePrincipal).filter((p) => p.roles.includes(role) && statuses.includes(p.status));
}

// ---------------------------------------------------------------- roles

export interface CustomRole {
  name: string;
  permissions: string[];
  description: string | null;
  created_at: number;
  created_by: string;
}

function decodeRole(r: Row): CustomRole {
  return {
    name: str(r, 'name'),
    permissions: json(r, 'permissions', stringArray),
    description: strOrNull(r, 'description'),
    created_at: num(r, 'created_at'),
    created_by: str(r, 'created_by'),
  };
}

export async function customRole(db: Reader, name: string): Promise<CustomRole | undefined> {
  const r = await db.get('SELECT name, permissions, description, created_at, created_by FROM roles WHERE name = ?', [name]);
  return r ? decodeRole(r) : undefined;
}

export async function customRoles(db: Reader): Promise<CustomRole[]> {
  return (await db.all('SELECT name, permissions, description, created_at, created_by FROM roles ORDER BY name')).map(decodeRole);
}

/** Sets a custom role's permissions and description. */
export async function updateRole(tx: Tx, name: string, permissions: readonly string[], description: string | null): Promise<void> {
  await tx.run('UPDATE roles SET permissions = ?, description = ? WHERE name = ?', [JSON.stringify(permissions), description, name]);
}

export async function deleteRole(tx: Tx, name: string): Promise<void> {
  await tx.run('DELETE FROM roles WHERE name = ?', [name]);
}

export async function insertRole(tx: Tx, role: CustomRole): Promise<void> {
  await tx.run('INSERT INTO roles (name, permissions, description, created_at, created_by) VALUES (?, ?, ?, ?, ?)', [
    role.name,
    JSON.stringify(role.permissions),
    role.description,
    role.created_at,
    role.created_by,
  ]);
}

// ---------------------------------------------------------------- API keys

export type KeyStatus = 'active' | 'revoked' | 'soft_deleted' | 'purged';
const KEY_STATUSES: readonly KeyStatus[] = ['active', 'revoked', 'soft_deleted', 'purged'];

/** An API key as stored: never a secret, only SHA-256 hashes. */
export interface KeyRow {
  id: string;
  owner_id: string;
  name: string;
  hash: string;
  prev_hash: string | null;
  prev_not_after: number | null;
  scopes: string[];
  rate_limit_rpm: number | null;
  allowed_ips: string[];
  allowed_regions: string[];
  status: KeyStatus;
  created_at: number;
  created_by: string;
  expires_at: number | null;
  rotated_at: number | null;
  revoked_at: number | null;
  deleted_at: number | null;
  /** Envelope cap of this key, or null: the owner's full ceiling. */
  authority: Record<string, unknown> | null;
}

const KEY_COLUMNS =
  'id, owner_id, name, hash, prev_hash, prev_not_after, scopes, rate_limit_rpm, allowed_ips, allowed_regions, status, ' +
  'created_at, created_by, expires_at, rotated_at, revoked_at, deleted_at, authority';

function decodeKey(r: Row): KeyRow {
  return {
    id: str(r, 'id'),
    owner_id: str(r, 'owner_id'),
    name: str(r, 'name'),
    hash: str(r, 'hash'),
    prev_hash: strOrNull(r, 'prev_hash'),
    prev_not_after: numOrNull(r, 'prev_not_after'),
    scopes: json(r, 'scopes', stringArray),
    rate_limit_rpm: numOrNull(r, 'rate_limit_rpm'),
    allowed_ips: json(r, 'allowed_ips', stringArray),
    allowed_regions: json(r, 'allowed_regions', stringArray),
    status: oneOf(KEY_STATUSES, str(r, 'status'), 'key status'),
    created_at: num(r, 'created_at'),
    created_by: str(r, 'created_by'),
    expires_at: numOrNull(r, 'expires_at'),
    rotated_at: numOrNull(r, 'rotated_at'),
    revoked_at: numOrNull(r, 'revoked_at'),
    deleted_at: numOrNull(r, 'deleted_at'),
    authority: jsonOrNull(r, 'authority', object),
  };
}

export async function keyById(db: Reader, id: string): Promise<KeyRow | undefined> {
  const r = await db.get(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = ?`, [id]);
  return r ? decodeKey(r) : undefined;
}

/** The key whose current or previous secret has this hash. */
export async function keyByHash(db: Reader, hash: string): Promise<KeyRow | undefined> {
  const r = await db.get(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE hash = ? OR prev_hash = ? LIMIT 1`, [hash, hash]);
  return r ? decodeKey(r) : undefined;
}

export async function listKeys(db: Reader, limit: number, offset: number, ownerId?: string): Promise<KeyRow[]> {
  const rows = ownerId
    ? await db.all(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE owner_id = ? ORDER BY created_at, id LIMIT ? OFFSET ?`, [
        ownerId,
        limit,
        offset,
      ])
    : await db.all(`SELECT ${KEY_COLUMNS} FROM api_keys ORDER BY created_at, id LIMIT ? OFFSET ?`, [limit, offset]);
  return rows.map(decodeKey);
}

export async function countKeys(db: Reader, ownerId?: string): Promise<number> {
  return count(
    ownerId
      ? await db.get('SELECT COUNT(*) AS n FROM api_keys WHERE owner_id = ?', [ownerId])
      : await db.get('SELECT COUNT(*) AS n FROM api_keys'),
  );
}

export async function allKeys(db: Reader): Promise<KeyRow[]> {
  return (await db.all(`SELECT ${KEY_COLUMNS} FROM api_keys ORDER BY id`)).map(decodeKey);
}

export async function insertKey(tx: Tx, k: KeyRow): Promise<void> {
  await tx.run(`INSERT INTO api_keys (${KEY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, [
    k.id,
    k.owner_id,
    k.name,
    k.hash,
    k.prev_hash,
    k.prev_not_after,
    JSON.stringify(k.scopes),
    k.rate_limit_rpm,
    JSON.stringify(k.allowed_ips),
    JSON.stringify(k.allowed_regions),
    k.status,
    k.created_at,
    k.created_by,
    k.expires_at,
    k.rotated_at,
    k.revoked_at,
    k.deleted_at,
    k.authority === null ? null : JSON.stringify(k.authority),
  ]);
}

/**
 * Replaces an active key's hash, only if it is still `prevHash` (the secret the
 * rotation read): a rotation racing another, on this cell or another, changes
 * nothing. Returns the rows changed (0 or 1).
 */
export async function rotateKeyHashes(
  tx: Tx,
  id: string,
  hash: string,
  prevHash: string,
  prevNotAfter: number,
  at: number,
): Promise<number> {
  return (
    await tx.run(
      "UPDATE api_keys SET hash = ?, prev_hash = ?, prev_not_after = ?, rotated_at = ? WHERE id = ? AND hash = ? AND status = 'active'",
      [hash, prevHash, prevNotAfter, at, id, prevHash],
    )
  ).changes;
}

export async function revokeKey(tx: Tx, id: string, at: number): Promise<void> {
  await tx.run("UPDATE api_keys SET status = 'revoked', revoked_at = ? WHERE id = ?", [at, id]);
}

/** Active keys of an owner -> soft_deleted; returns how many. */
export async function softDeleteOwnerKeys(tx: Tx, ownerId: string, at: number): Promise<number> {
  return (
    await tx.run("UPDATE api_keys SET status = 'soft_deleted', deleted_at = ? WHERE owner_id = ? AND status = 'active'", [at, ownerId])
  ).changes;
}

/** Soft-deleted keys of an owner -> active; returns how many. */
export async function restoreOwnerKeys(tx: Tx, ownerId: string): Promise<number> {
  return (
    await tx.run("UPDATE api_keys SET status = 'active', deleted_at = NULL WHERE owner_id = ? AND status = 'soft_deleted'", [ownerId])
  ).changes;
}

/** Hard-deletes the selected keys, keeping a tombstone of each; returns how many. */
async function purgeKeys(tx: Tx, where: string, params: SqlValue[], at: number, reason: string): Promise<number> {
  const rows = await tx.all(`SELECT id, owner_id FROM api_keys WHERE ${where}`, params);
  for (const r of rows) {
    await tx.run(
      `INSERT INTO key_tombstones (key_id, owner_id, at, reason) VALUES (?, ?, ?, ?)
      ON CONFLICT (key_id) DO UPDATE SET owner_id = excluded.owner_id, at = excluded.at, reason = excluded.reason`,
      [str(r, 'id'), str(r, 'owner_id'), at, reason],
    );
  }
  await tx.run(`DELETE FROM api_keys WHERE ${where}`, params);
  return rows.length;
}

export function purgeOwnerKeys(tx: Tx, ownerId: string, at: number): Promise<number> {
  return purgeKeys(tx, 'owner_id = ?', [ownerId], at, 'owner_purged');
}

export function purgeSoftDeletedKeys(tx: Tx, cutoff: number, at: number): Promise<number> {
  return purgeKeys(tx, "status = 'soft_deleted' AND deleted_at <= ?", [cutoff], at, 'retention_elapsed');
}

export async function keyTombstones(db: Reader): Promise<{ key_id: string; at: number }[]> {
  return (await db.all('SELECT key_id, at FROM key_tombstones ORDER BY key_id')).map((r) => ({
    key_id: str(r, 'key_id'),
    at: num(r, 'at'),
  }));
}

// ---------------------------------------------------------------- audit

export interface AuditRecord {
  at: number;
  actor: string;
  action: string;
  target: string;
  outcome: 'ok' | 'refused';
  details?: Record<string, unknown>;
}

export interface AuditRow {
  seq: number;
  at: number;
  actor: string;
  action: string;
  target: string;
  outcome: string;
  details: Record<string, unknown> | null;
}

export async function insertAudit(tx: Tx, e: AuditRecord): Promise<void> {
  await tx.run('INSERT INTO audit (at, actor, action, target, outcome, details) VALUES (?, ?, ?, ?, ?, ?)', [
    e.at,
    e.actor,
    e.action,
    e.target,
    e.outcome,
    e.details ? JSON.stringify(e.details) : null,
  ]);
}

/** Newest first. */
export async function listAudit(
  db: Reader,
  limit: number,
  offset: number,
  filter: { actor?: string; target?: string; action?: string; after?: number; before?: number } = {},
): Promise<{ items: AuditRow[]; total: number }> {
  const where: string[] = [];
  const params: SqlValue[] = [];
  if (filter.actor) {
    where.push('actor = ?');
    params.push(filter.actor);
  }
  if (filter.target) {
    where.push('target = ?');
    params.push(filter.target);
  }
  if (filter.action) {
    where.push('action = ?');
    params.push(filter.action);
  }
  if (filter.after !== undefined) {
    where.push('at > ?');
    params.push(filter.after);
  }
  if (filter.before !== undefined) {
    where.push('at < ?');
    params.push(filter.before);
  }
  const w = where.length ? `WHERE ${where.join(' AND ')}` : '';
  const rows = await db.all(`SELECT seq, at, actor, action, target, outcome, details FROM audit ${w} ORDER BY seq DESC LIMIT ? OFFSET ?`, [
    ...params,
    limit,
    offset,
  ]);
  const total = count(await db.get(`SELECT COUNT(*) AS n FROM audit ${w}`, params));
  return {
    total,
    items: rows.map((r) => ({
      seq: num(r, 'seq'),
      at: num(r, 'at'),
      actor: str(r, 'actor'),
      action: str(r, 'action'),
      target: str(r, 'target'),
      outcome: str(r, 'outcome'),
      details: jsonOrNull(r, 'details', object),
    })),
  };
}

// ---------------------------------------------------------------- the cell's identity keys

export interface CellKeyRow {
  kid: string;
  purpose: string;
  /** The cell the key belongs to (null: recorded before keys were per cell, not yet claimed). */
  cell_id: string | null;
  /** As stored: sealed under the group's secrets key (cell/custody/sealed-jwk.ts); a row that is not is not the group's. */
  private_jwk: unknown;
  public_jwk: JsonWebKey;
  created_at: number;
  retired_at: number | null;
}

const CELL_KEY_COLUMNS = 'kid, purpose, cell_id, private_jwk, public_jwk, created_at, retired_at';

function decodeCellKey(r: Row): CellKeyRow {
  return {
    kid: str(r, 'kid'),
    purpose: str(r, 'purpose'),
    cell_id: strOrNull(r, 'cell_id'),
    private_jwk: json(r, 'private_jwk', object),
    public_jwk: json(r, 'public_jwk', object) as JsonWebKey,
    created_at: num(r, 'created_at'),
    retired_at: numOrNull(r, 'retired_at'),
  };
}

/** One cell's keys of a purpose, oldest first (retired included). */
export async function cellKeys(db: Reader, purpose: string, cellId: string): Promise<CellKeyRow[]> {
  return (
    await db.all(`SELECT ${CELL_KEY_COLUMNS} FROM cell_keys WHERE purpose = ? AND cell_id = ? ORDER BY created_at, kid`, [purpose, cellId])
  ).map(decodeCellKey);
}

/** Every cell's keys of a purpose (public parts are what callers use), by cell then age. */
export async function allCellKeys(db: Reader, purpose: string): Promise<CellKeyRow[]> {
  return (
    await db.all(`SELECT ${CELL_KEY_COLUMNS} FROM cell_keys WHERE purpose = ? ORDER BY cell_id NULLS FIRST, created_at, kid`, [purpose])
  ).map(decodeCellKey);
}

/** Gives keys recorded before keys were per cell (no cell id) to `cellId`; returns how many. */
export async function claimUnownedCellKeys(tx: Tx, purpose: string, cellId: string): Promise<number> {
  return (await tx.run('UPDATE cell_keys SET cell_id = ? WHERE purpose = ? AND cell_id IS NULL', [cellId, purpose])).changes;
}

export async function insertCellKey(tx: Tx, k: CellKeyRow): Promise<void> {
  await tx.run(`INSERT INTO cell_keys (${CELL_KEY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)`, [
    k.kid,
    k.purpose,
    k.cell_id,
    JSON.stringify(k.private_jwk),
    JSON.stringify(k.public_jwk),
    k.created_at,
    k.retired_at,
  ]);
}

export async function retireCellKey(tx: Tx, kid: string, at: number): Promise<void> {
  await tx.run('UPDATE cell_keys SET retired_at = ? WHERE kid = ?', [at, kid]);
}

// ---------------------------------------------------------------- rpm buckets shared by a group of cells

export async function putRateBucket(tx: Tx, key: string, b: { tokens: number; at: number }): Promise<void> {
  await tx.run(
    'INSERT INTO iam_rate_buckets (bucket_key, tokens, at) VALUES (?, ?, ?) ON CONFLICT (bucket_key) DO UPDATE SET tokens = excluded.tokens, at = excluded.at',
    [key, b.tokens, b.at],
  );
}

/**
 * Locks the bucket's row, creating it full (`full`: capacity tokens as of
 * now, which is what a missing row means) when there is none, and answers it
 * as locked: a `row-locks` take's first statement. A concurrent take of the
 * same bucket waits for this transaction and then reads what it wrote.
 */
export async function lockRateBucket(tx: Tx, key: string, full: { tokens: number; at: number }): Promise<{ tokens: number; at: number }> {
  const r = await tx.get(
    'INSERT INTO iam_rate_buckets (bucket_key, tokens, at) VALUES (?, ?, ?) ON CONFLICT (bucket_key) DO UPDATE SET tokens = iam_rate_buckets.tokens RETURNING tokens, at',
    [key, full.tokens, full.at],
  );
  if (!r) throw new TypeError(`lockRateBucket: the upsert of ${key} returned no row`);
  return { tokens: num(r, 'tokens'), at: num(r, 'at') };
}

/** Drops buckets last touched more than `fullAfterMs` before `now` (the database's clock); returns how many. */
export async function pruneRateBuckets(tx: Tx, now: DbNow, fullAfterMs: number): Promise<number> {
  return (await tx.run(`DELETE FROM iam_rate_buckets WHERE at < ${now.sql} - ?`, [...now.params, fullAfterMs])).changes;
}
