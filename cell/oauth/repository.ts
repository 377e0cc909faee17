/**
 * Every SQL statement of the OAuth module (signing keys, clients, the
 * denylist, authorization codes, device codes, login sessions), with the row
 * decoders. Domain code calls these functions; nothing else in the module
 * writes SQL. Statements stay in the dialect both engines run (docs/storage.md).
 */
import { count, json, num, numOrNull, object, str, strOrNull, stringArray } from '../store/decode.ts';
import type { DbNow } from '../store/db-clock.ts';
import type { Reader, Row, Tx } from '../store/types.ts';

/** The module's tables, as `store.onChange` names them. */
export const TABLES = {
  signingKeys: 'oauth_signing_keys',
  clients: 'oauth_clients',
  denylist: 'oauth_denylist',
  codes: 'oauth_codes',
  deviceCodes: 'oauth_device_codes',
  sessions: 'oauth_sessions',
  audiences: 'oauth_audiences',
  issuers: 'oauth_issuers',
  dpopProofs: 'oauth_dpop_proofs',
  refreshTokens: 'oauth_refresh_tokens',
} as const;

function oneOf<T extends string>(values: readonly T[], v: string, what: string): T {
  if (!(values as readonly string[]).includes(v)) throw new TypeError(`store row: unknown ${what} ${v}`);
  return v as T;
}

// ---------------------------------------------------------------- signing keys

export interface SigningKeyRow {
  kid: string;
  /** As stored: sealed under the group's secrets key (cell/custody/sealed-jwk.ts); a row that is not is not the group's. */
  private_jwk: unknown;
  public_jwk: JsonWebKey;
  created_at: number;
  retired_at: number | null;
}

function decodeSigningKey(r: Row): SigningKeyRow {
  return {
    kid: str(r, 'kid'),
    private_jwk: json(r, 'private_jwk', object),
    public_jwk: json(r, 'public_jwk', object) as JsonWebKey,
    created_at: num(r, 'created_at'),
    retired_at: numOrNull(r, 'retired_at'),
  };
}

/** Every signing key, newest first (retired ones included). */
export async function signingKeys(db: Reader): Promise<SigningKeyRow[]> {
  return (
    await db.all('SELECT kid, private_jwk, public_jwk, created_at, retired_at FROM oauth_signing_keys ORDER BY created_at DESC, kid DESC')
  ).map(decodeSigningKey);
}

/** Retires the active key(s) at `k.created_at` and makes `k` the active one. */
export async function insertActiveSigningKey(tx: Tx, k: Omit<SigningKeyRow, 'retired_at'>): Promise<void> {
  await tx.run('UPDATE oauth_signing_keys SET retired_at = ? WHERE retired_at IS NULL', [k.created_at]);
  await tx.run('INSERT INTO oauth_signing_keys (kid, private_jwk, public_jwk, created_at, retired_at) VALUES (?, ?, ?, ?, NULL)', [
    k.kid,
    JSON.stringify(k.private_jwk),
    JSON.stringify(k.public_jwk),
    k.created_at,
  ]);
}

// ---------------------------------------------------------------- clients

export const AUTH_METHODS = ['client_secret_basic', 'client_secret_post', 'none', 'tls_client_auth'] as const;
export type AuthMethod = (typeof AUTH_METHODS)[number];

export interface ClientRecord {
  client_id: string;
  name: string;
  secret_hash: string | null;
  auth_method: AuthMethod;
  redirect_uris: string[];
  grant_types: string[];
  scope: string[];
  subject_id: string | null;
  tls_subject_dn: string | null;
  created_at: number;
  created_by: string;
  /** The credential that registered it when that was an API key (`api_key:<id>`): its tokens live and are capped with it. */
  root: string | null;
}

const CLIENT_COLUMNS =
  'client_id, name, secret_hash, auth_method, redirect_uris, grant_types, scope, subject_id, tls_subject_dn, created_at, created_by, root';

function decodeClient(r: Row): ClientRecord {
  return {
    client_id: str(r, 'client_id'),
    name: str(r, 'name'),
    secret_hash: strOrNull(r, 'secret_hash'),
    auth_method: oneOf(AUTH_METHODS, str(r, 'auth_method'), 'client auth method'),
    redirect_uris: json(r, 'redirect_uris', stringArray),
    grant_types: json(r, 'grant_types', stringArray),
    scope: json(r, 'scope', stringArray),
    subject_id: strOrNull(r, 'subject_id'),
    tls_subject_dn: strOrNull(r, 'tls_subject_dn'),
    created_at: num(r, 'created_at'),
    created_by: str(r, 'created_by'),
    root: strOrNull(r, 'root'),
  };
}

export async function clientById(db: Reader, clientId: string): Promise<ClientRecord | undefined> {
  const r = await db.get(`SELECT ${CLIENT_COLUMNS} FROM oauth_clients WHERE client_id = ?`, [clientId]);
  return r ? decodeClient(r) : undefined;
}

/** Oldest first. */
export async function listClients(db: Reader, limit: number, offset: number): Promise<ClientRecord[]> {
  return (await db.all(`SELECT ${CLIENT_COLUMNS} FROM oauth_clients ORDER BY created_at, client_id LIMIT ? OFFSET ?`, [limit, offset])).map(
    decodeClient,
  );
}

/** Every registered client's id, sorted (what a key bundle carries so a device refuses a deleted client's tokens). */
export async function allClientIds(db: Reader): Promise<string[]> {
  return (await db.all('SELECT client_id FROM oauth_clients ORDER BY client_id')).map((r) => str(r, 'client_id'));
}

/** How many clients listClients pages through. */
/** The names of the built-in clients (registered by the cell itself, `created_by` system). */
export async function builtInClientNames(db: Reader): Promise<string[]> {
  return (await db.all("SELECT name FROM oauth_clients WHERE created_by = 'system' ORDER BY name")).map((r) => str(r, 'name'));
}

/** How many clients one registrant made (`created_by`: a principal, `system`, `dynamic-registration`, …). */
export async function countClientsCreatedBy(db: Reader, createdBy: string): Promise<number> {
  return count(await db.get('SELECT COUNT(*) AS n FROM oauth_clients WHERE created_by = ?', [createdBy]));
}

export async function countClients(db: Reader): Promise<number> {
  return count(await db.get('SELECT COUNT(*) AS n FROM oauth_clients'));
}

export async function insertClient(tx: Tx, c: ClientRecord): Promise<void> {
  await tx.run(`INSERT INTO oauth_clients (${CLIENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, [
    c.client_id,
    c.name,
    c.secret_hash,
    c.auth_method,
    JSON.stringify(c.redirect_uris),
    JSON.stringify(c.grant_types),
    JSON.stringify(c.scope),
    c.subject_id,
    c.tls_subject_dn,
    c.created_at,
    c.created_by,
    c.root,
  ]);
}

/**
 * Writes (or rewrites) a client described by its own metadata document: `none` authentication, no
 * subject, `created_by` = `createdBy`. A row of that id made otherwise is never touched; returns
 * whether one was written.
 */
export async function upsertDocumentClient(
  tx: Tx,
  c: Pick<ClientRecord, 'client_id' | 'name' | 'redirect_uris' | 'grant_types' | 'scope' | 'created_at' | 'created_by'>,
): Promise<boolean> {
  const r = await tx.run(
    `INSERT INTO oauth_clients (${CLIENT_COLUMNS})
     VALUES (?, ?, NULL, 'none', ?, ?, ?, NULL, NULL, ?, ?, NULL)
     ON CONFLICT (client_id) DO UPDATE SET name = excluded.name, redirect_uris = excluded.redirect_uris,
       grant_types = excluded.grant_types, scope = excluded.scope
     WHERE oauth_clients.created_by = excluded.created_by`,
    [
      c.client_id,
      c.name,
      JSON.stringify(c.redirect_uris),
      JSON.stringify(c.grant_types),
      JSON.stringify(c.scope),
      c.created_at,
      c.created_by,
    ],
  );
  return r.changes > 0;
}

/** Replaces a client's secret hash (a rotation). */
export async function setClientSecretHash(tx: Tx, clientId: string, secretHash: string): Promise<void> {
  await tx.run('UPDATE oauth_clients SET secret_hash = ? WHERE client_id = ?', [secretHash, clientId]);
}

/** Deletes a client with its pending authorization codes and device codes; returns how many of each went. */
export async function deleteClient(tx: Tx, clientId: string): Promise<{ codes: number; deviceCodes: number }> {
  const codes = (await tx.run('DELETE FROM oauth_codes WHERE client_id = ?', [clientId])).changes;
  await tx.run('DELETE FROM oauth_refresh_tokens WHERE client_id = ?', [clientId]);
  const deviceCodes = (await tx.run('DELETE FROM oauth_device_codes WHERE client_id = ?', [clientId])).changes;
  await tx.run('DELETE FROM oauth_clients WHERE client_id = ?', [clientId]);
  return { codes, deviceCodes };
}

/**
 * Writes a built-in public client (cell/oauth/builtin-clients.ts): no secret, `none` authentication,
 * no subject, created by `system`. An existing row of that id is rewritten to this shape (its
 * created_at kept).
 */
export async function upsertBuiltInClient(
  tx: Tx,
  c: Pick<ClientRecord, 'client_id' | 'name' | 'redirect_uris' | 'grant_types' | 'scope' | 'created_at'>,
): Promise<void> {
  await tx.run(
    `INSERT INTO oauth_clients (${CLIENT_COLUMNS})
     VALUES (?, ?, NULL, 'none', ?, ?, ?, NULL, NULL, ?, 'system', NULL)
     ON CONFLICT (client_id) DO UPDATE SET name = excluded.name, secret_hash = NULL, auth_method = 'none',
       redirect_uris = excluded.redirect_uris, grant_types = excluded.grant_types, scope = excluded.scope,
       subject_id = NULL, tls_subject_dn = NULL`,
    [c.client_id, c.name, JSON.stringify(c.redirect_uris), JSON.stringify(c.grant_types), JSON.stringify(c.scope), c.created_at],
  );
}

// ---------------------------------------------------------------- denylist

export interface DeniedRow {
  jti: string;
  exp: number;
}

/** Denylists a token id until `exp` (seconds); a second entry for the same jti is a no-op. */
export async function insertDenied(tx: Tx, jti: string, exp: number): Promise<void> {
  await tx.run('INSERT INTO oauth_denylist (jti, exp) VALUES (?, ?) ON CONFLICT (jti) DO NOTHING', [jti, exp]);
}

/** Whether a token id is denylisted. */
export async function isDenied(db: Reader, jti: string): Promise<boolean> {
  return (await db.get('SELECT jti FROM oauth_denylist WHERE jti = ?', [jti])) !== undefined;
}

/** Entries whose tokens expire at or after `nowSeconds`. */
export async function liveDenied(db: Reader, nowSeconds: number): Promise<DeniedRow[]> {
  return (await db.all('SELECT jti, exp FROM oauth_denylist WHERE exp >= ?', [nowSeconds])).map((r) => ({
    jti: str(r, 'jti'),
    exp: num(r, 'exp'),
  }));
}

/** Drops entries whose tokens expired before `nowSeconds`; returns how many. */
/** Drops the entries of tokens expired by the database's clock (`exp` in seconds); returns how many. */
export async function deleteExpiredDenied(tx: Tx, now: DbNow): Promise<number> {
  return (await tx.run(`DELETE FROM oauth_denylist WHERE exp * 1000 < ${now.sql}`, now.params)).changes;
}

// ---------------------------------------------------------------- the group's audiences

/** Records (or moves) the audience of a cell's API. */
export async function upsertAudience(tx: Tx, cellId: string, audience: string, at: number): Promise<void> {
  await tx.run(
    'INSERT INTO oauth_audiences (cell_id, audience, updated_at) VALUES (?, ?, ?) ON CONFLICT (cell_id) DO UPDATE SET audience = excluded.audience, updated_at = excluded.updated_at',
    [cellId, audience, at],
  );
}

/** The audience of a cell's API, or undefined. */
export async function audienceOfCell(db: Reader, cellId: string): Promise<string | undefined> {
  const r = await db.get('SELECT audience FROM oauth_audiences WHERE cell_id = ?', [cellId]);
  return r ? str(r, 'audience') : undefined;
}

/** Every member's audience. */
export async function groupAudiences(db: Reader): Promise<string[]> {
  return (await db.all('SELECT audience FROM oauth_audiences ORDER BY cell_id')).map((r) => str(r, 'audience'));
}

// ---------------------------------------------------------------- the group's declared issuer URLs

/** Records (or replaces) the issuer URL a cell declared with `--oauth-issuer`. */
export async function upsertIssuer(tx: Tx, cellId: string, issuer: string, at: number): Promise<void> {
  await tx.run(
    'INSERT INTO oauth_issuers (cell_id, issuer, updated_at) VALUES (?, ?, ?) ON CONFLICT (cell_id) DO UPDATE SET issuer = excluded.issuer, updated_at = excluded.updated_at',
    [cellId, issuer, at],
  );
}

/** Forgets a cell's declared issuer URL (it started without `--oauth-issuer`). */
export async function deleteIssuer(tx: Tx, cellId: string): Promise<void> {
  await tx.run('DELETE FROM oauth_issuers WHERE cell_id = ?', [cellId]);
}

/** The issuer URL a cell declared, or undefined. */
export async function issuerOfCell(db: Reader, cellId: string): Promise<string | undefined> {
  const r = await db.get('SELECT issuer FROM oauth_issuers WHERE cell_id = ?', [cellId]);
  return r ? str(r, 'issuer') : undefined;
}

/** Every issuer URL the group's cells declared. */
export async function groupIssuers(db: Reader): Promise<string[]> {
  return (await db.all('SELECT issuer FROM oauth_issuers ORDER BY cell_id')).map((r) => str(r, 'issuer'));
}

// ---------------------------------------------------------------- DPoP proofs seen (the group's replay cache)

/**
 * Records a proof until `expiresAt` (ms); false when a live record of it
 * exists (a replay). An expired record left by the pruning is taken over.
 */
export async function rememberProof(tx: Tx, key: string, expiresAt: number, now: DbNow): Promise<boolean> {
  const r = await tx.run(
    `INSERT INTO oauth_dpop_proofs (proof_key, expires_at) VALUES (?, ?) ON CONFLICT (proof_key) DO UPDATE SET expires_at = excluded.expires_at WHERE oauth_dpop_proofs.expires_at <= ${now.sql}`,
    [key, expiresAt, ...now.params],
  );
  return r.changes > 0;
}

/** Drops proofs that can no longer pass the freshness check, judged on the database's clock; returns how many. */
export async function pruneProofs(tx: Tx, now: DbNow): Promise<number> {
  return (await tx.run(`DELETE FROM oauth_dpop_proofs WHERE expires_at <= ${now.sql}`, now.params)).changes;
}

// ---------------------------------------------------------------- authorization codes

export interface IssuedToken {
  jti: string;
  exp: number;
}

export interface CodeRow {
  code_hash: string;
  client_id: string;
  subject_id: string;
  redirect_uri: string;
  scope: string[];
  code_challenge: string;
  created_at: number;
  expires_at: number;
  used_at: number | null;
  issued: IssuedToken[];
  /** The audience the authorization request named (RFC 8707), as its canonical form; null: none named. */
  resource: string | null;
}

const CODE_COLUMNS =
  'code_hash, client_id, subject_id, redirect_uri, scope, code_challenge, created_at, expires_at, used_at, issued, resource';

function issuedList(v: unknown): IssuedToken[] {
  if (!Array.isArray(v) || !v.every((t) => typeof t === 'object' && t !== null && typeof t.jti === 'string' && typeof t.exp === 'number')) {
    throw new TypeError('store row: expected a list of {jti, exp}');
  }
  return v as IssuedToken[];
}

function decodeCode(r: Row): CodeRow {
  return {
    code_hash: str(r, 'code_hash'),
    client_id: str(r, 'client_id'),
    subject_id: str(r, 'subject_id'),
    redirect_uri: str(r, 'redirect_uri'),
    scope: json(r, 'scope', stringArray),
    code_challenge: str(r, 'code_challenge'),
    created_at: num(r, 'created_at'),
    expires_at: num(r, 'expires_at'),
    used_at: numOrNull(r, 'used_at'),
    issued: json(r, 'issued', issuedList),
    resource: strOrNull(r, 'resource'),
  };
}

export async function insertCode(tx: Tx, c: Omit<CodeRow, 'used_at' | 'issued'>): Promise<void> {
  await tx.run(`INSERT INTO oauth_codes (${CODE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)`, [
    c.code_hash,
    c.client_id,
    c.subject_id,
    c.redirect_uri,
    JSON.stringify(c.scope),
    c.code_challenge,
    c.created_at,
    c.expires_at,
    '[]',
    c.resource,
  ]);
}

export async function codeByHash(db: Reader, hash: string): Promise<CodeRow | undefined> {
  const r = await db.get(`SELECT ${CODE_COLUMNS} FROM oauth_codes WHERE code_hash = ?`, [hash]);
  return r ? decodeCode(r) : undefined;
}

/** Marks an unused code used; false when it was used already. */
export async function claimCode(tx: Tx, hash: string, at: number): Promise<boolean> {
  return (await tx.run('UPDATE oauth_codes SET used_at = ? WHERE code_hash = ? AND used_at IS NULL', [at, hash])).changes === 1;
}

export async function setCodeIssued(tx: Tx, hash: string, issued: readonly IssuedToken[]): Promise<void> {
  await tx.run('UPDATE oauth_codes SET issued = ? WHERE code_hash = ?', [JSON.stringify(issued), hash]);
}

// ---------------------------------------------------------------- device codes

export type DeviceStatus = 'pending' | 'approved' | 'denied' | 'used';
const DEVICE_STATUSES: readonly DeviceStatus[] = ['pending', 'approved', 'denied', 'used'];

export interface DeviceRow {
  device_code_hash: string;
  user_code: string;
  client_id: string;
  scope: string[];
  created_at: number;
  expires_at: number;
  interval_s: number;
  last_poll_at: number | null;
  status: DeviceStatus;
  subject_id: string | null;
}

const DEVICE_COLUMNS =
  'device_code_hash, user_code, client_id, scope, created_at, expires_at, interval_s, last_poll_at, status, subject_id';

function decodeDevice(r: Row): DeviceRow {
  return {
    device_code_hash: str(r, 'device_code_hash'),
    user_code: str(r, 'user_code'),
    client_id: str(r, 'client_id'),
    scope: json(r, 'scope', stringArray),
    created_at: num(r, 'created_at'),
    expires_at: num(r, 'expires_at'),
    interval_s: num(r, 'interval_s'),
    last_poll_at: numOrNull(r, 'last_poll_at'),
    status: oneOf(DEVICE_STATUSES, str(r, 'status'), 'device code status'),
    subject_id: strOrNull(r, 'subject_id'),
  };
}

export async function userCodeTaken(db: Reader, userCode: string): Promise<boolean> {
  return (await db.get('SELECT 1 AS x FROM oauth_device_codes WHERE user_code = ?', [userCode])) !== undefined;
}

/** Drops device codes that expired before `before`. */
export async function deleteDeviceCodesExpiredBefore(tx: Tx, before: number): Promise<void> {
  await tx.run('DELETE FROM oauth_device_codes WHERE expires_at < ?', [before]);
}

export async function insertDeviceCode(tx: Tx, d: Omit<DeviceRow, 'last_poll_at' | 'status' | 'subject_id'>): Promise<void> {
  await tx.run(`INSERT INTO oauth_device_codes (${DEVICE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, 'pending', NULL)`, [
    d.device_code_hash,
    d.user_code,
    d.client_id,
    JSON.stringify(d.scope),
    d.created_at,
    d.expires_at,
    d.interval_s,
  ]);
}

export async function deviceByUserCode(db: Reader, userCode: string): Promise<DeviceRow | undefined> {
  const r = await db.get(`SELECT ${DEVICE_COLUMNS} FROM oauth_device_codes WHERE user_code = ?`, [userCode]);
  return r ? decodeDevice(r) : undefined;
}

export async function deviceByHash(db: Reader, hash: string): Promise<DeviceRow | undefined> {
  const r = await db.get(`SELECT ${DEVICE_COLUMNS} FROM oauth_device_codes WHERE device_code_hash = ?`, [hash]);
  return r ? decodeDevice(r) : undefined;
}

/** Approves or denies a pending, unexpired user code as `subjectId`; false when it was not pending. */
export async function decideDeviceCode(
  tx: Tx,
  userCode: string,
  status: 'approved' | 'denied',
  subjectId: string,
  now: number,
): Promise<boolean> {
  return (
    (
      await tx.run(
        "UPDATE oauth_device_codes SET status = ?, subject_id = ? WHERE user_code = ? AND status = 'pending' AND expires_at > ?",
        [status, subjectId, userCode, now],
      )
    ).changes === 1
  );
}

export async function notePoll(tx: Tx, hash: string, at: number, intervalSeconds: number): Promise<void> {
  await tx.run('UPDATE oauth_device_codes SET last_poll_at = ?, interval_s = ? WHERE device_code_hash = ?', [at, intervalSeconds, hash]);
}

/** Marks an approved device code used; false when it was not (still) approved. */
export async function claimDeviceCode(tx: Tx, hash: string): Promise<boolean> {
  return (
    (await tx.run("UPDATE oauth_device_codes SET status = 'used' WHERE device_code_hash = ? AND status = 'approved'", [hash])).changes === 1
  );
}

// ---------------------------------------------------------------- login sessions

export interface SessionRow {
  principal_id: string;
  csrf: string;
  expires_at: number;
}

export async function deleteExpiredSessions(tx: Tx, now: number): Promise<void> {
  await tx.run('DELETE FROM oauth_sessions WHERE expires_at < ?', [now]);
}

export async function insertSession(
  tx: Tx,
  s: { id_hash: string; principal_id: string; csrf: string; created_at: number; expires_at: number },
): Promise<void> {
  await tx.run('INSERT INTO oauth_sessions (id_hash, principal_id, csrf, created_at, expires_at) VALUES (?, ?, ?, ?, ?)', [
    s.id_hash,
    s.principal_id,
    s.csrf,
    s.created_at,
    s.expires_at,
  ]);
}

export async function sessionByHash(db: Reader, idHash: string): Promise<SessionRow | undefined> {
  const r = await db.get('SELECT principal_id, csrf, expires_at FROM oauth_sessions WHERE id_hash = ?', [idHash]);
  return r ? { principal_id: str(r, 'principal_id'), csrf: str(r, 'csrf'), expires_at: num(r, 'expires_at') } : undefined;
}

export async function deleteSession(tx: Tx, idHash: string): Promise<void> {
  await tx.run('DELETE FROM oauth_sessions WHERE id_hash = ?', [idHash]);
}

// ---------------------------------------------------------------- refresh tokens

export interface RefreshRow {
  token_hash: string;
  /** The grant this token rotates within: one consent; the root (`token:<family>`) of the access tokens it gives. */
  family: string;
  client_id: string;
  subject_id: string;
  scope: string[];
  audience: string;
  /** RFC 9449 §5: the DPoP key the family is bound to (a public client's refresh tokens are). */
  jkt: string | null;
  created_at: number;
  expires_at: number;
  family_expires_at: number;
  used_at: number | null;
}

const REFRESH_COLUMNS =
  'token_hash, family, client_id, subject_id, scope, audience, jkt, created_at, expires_at, family_expires_at, used_at';

function decodeRefresh(r: Row): RefreshRow {
  return {
    token_hash: str(r, 'token_hash'),
    family: str(r, 'family'),
    client_id: str(r, 'client_id'),
    subject_id: str(r, 'subject_id'),
    scope: json(r, 'scope', stringArray),
    audience: str(r, 'audience'),
    jkt: strOrNull(r, 'jkt'),
    created_at: num(r, 'created_at'),
    expires_at: num(r, 'expires_at'),
    family_expires_at: num(r, 'family_expires_at'),
    used_at: numOrNull(r, 'used_at'),
  };
}

export async function insertRefresh(tx: Tx, r: Omit<RefreshRow, 'used_at'>): Promise<void> {
  await tx.run(`INSERT INTO oauth_refresh_tokens (${REFRESH_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)`, [
    r.token_hash,
    r.family,
    r.client_id,
    r.subject_id,
    JSON.stringify(r.scope),
    r.audience,
    r.jkt,
    r.created_at,
    r.expires_at,
    r.family_expires_at,
  ]);
}

export async function refreshByHash(db: Reader, hash: string): Promise<RefreshRow | undefined> {
  const r = await db.get(`SELECT ${REFRESH_COLUMNS} FROM oauth_refresh_tokens WHERE token_hash = ?`, [hash]);
  return r ? decodeRefresh(r) : undefined;
}

/** Marks an unused refresh token used; false when it was used already (a reuse, or a race lost). */
export async function claimRefresh(tx: Tx, hash: string, at: number): Promise<boolean> {
  return (await tx.run('UPDATE oauth_refresh_tokens SET used_at = ? WHERE token_hash = ? AND used_at IS NULL', [at, hash])).changes === 1;
}

/** Ends a family: every token of it marked used (none refreshes again). */
export async function endRefreshFamily(tx: Tx, family: string, at: number): Promise<void> {
  await tx.run('UPDATE oauth_refresh_tokens SET used_at = ? WHERE family = ? AND used_at IS NULL', [at, family]);
}

/** Drops the tokens of families that expired before `now` (ms); returns how many. */
export async function deleteExpiredRefresh(tx: Tx, now: DbNow): Promise<number> {
  return (await tx.run(`DELETE FROM oauth_refresh_tokens WHERE family_expires_at < ${now.sql}`, now.params)).changes;
}
