/**
 * Every SQL statement of the AI module (provider secrets, model providers),
 * with the row decoders. Statements stay in the dialect both engines run
 * (docs/storage.md). A secret's value is only ever read here sealed.
 */
import { bytes, count, num, numOrNull, str, strOrNull } from '../store/decode.ts';
import type { Reader, Row, Tx } from '../store/types.ts';

// ---------------------------------------------------------------- secrets

export interface SecretRow {
  secretId: string;
  name: string;
  sealed: Uint8Array;
  at: number;
  by: string;
}

export async function insertSecret(tx: Tx, row: SecretRow): Promise<void> {
  await tx.run('INSERT INTO ai_secrets (secret_id, name, sealed, created_at, created_by) VALUES (?, ?, ?, ?, ?)', [
    row.secretId,
    row.name,
    row.sealed,
    row.at,
    row.by,
  ]);
}

/** Who stored the secret, or undefined when there is no such secret. */
export async function secretCreator(db: Reader, secretId: string): Promise<string | undefined> {
  const r = await db.get('SELECT created_by FROM ai_secrets WHERE secret_id = ?', [secretId]);
  return r ? str(r, 'created_by') : undefined;
}

/** What a provider call reads of its secret, in one statement: who stored it, the sealed value, its last use. */
export interface SecretForCall {
  createdBy: string;
  sealed: Uint8Array;
  lastUsedAt: number | null;
}

export async function secretForCall(db: Reader, secretId: string): Promise<SecretForCall | undefined> {
  const r = await db.get('SELECT created_by, sealed, last_used_at FROM ai_secrets WHERE secret_id = ?', [secretId]);
  return r ? { createdBy: str(r, 'created_by'), sealed: bytes(r, 'sealed'), lastUsedAt: numOrNull(r, 'last_used_at') } : undefined;
}

/** The sealed value (nonce || ciphertext || tag) and when it was last used, or undefined. */
export async function sealedSecret(db: Reader, secretId: string): Promise<{ sealed: Uint8Array; lastUsedAt: number | null } | undefined> {
  const r = await db.get('SELECT sealed, last_used_at FROM ai_secrets WHERE secret_id = ?', [secretId]);
  return r ? { sealed: bytes(r, 'sealed'), lastUsedAt: numOrNull(r, 'last_used_at') } : undefined;
}

/** A stored secret as its metadata: never the value, sealed or not. */
export interface SecretMeta {
  secret_id: string;
  name: string;
  created_at: number;
  created_by: string;
  rotated_at: number | null;
  last_used_at: number | null;
}

const SECRET_META_COLUMNS = 'secret_id, name, created_at, created_by, rotated_at, last_used_at';

function decodeSecretMeta(r: Row): SecretMeta {
  return {
    secret_id: str(r, 'secret_id'),
    name: str(r, 'name'),
    created_at: num(r, 'created_at'),
    created_by: str(r, 'created_by'),
    rotated_at: numOrNull(r, 'rotated_at'),
    last_used_at: numOrNull(r, 'last_used_at'),
  };
}

/**
 * A table of this module read as its admin routes read it: one row by its id, a page oldest first
 * (created_at, then the id: a page read stays the same page), and how many rows the pages go through.
 */
function listedTable<T>(table: string, idColumn: string, columns: string, decode: (r: Row) => T) {
  return {
    byId: async (db: Reader, id: string): Promise<T | undefined> => {
      const r = await db.get(`SELECT ${columns} FROM ${table} WHERE ${idColumn} = ?`, [id]);
      return r ? decode(r) : undefined;
    },
    page: async (db: Reader, limit: number, offset: number): Promise<T[]> =>
      (await db.all(`SELECT ${columns} FROM ${table} ORDER BY created_at, ${idColumn} LIMIT ? OFFSET ?`, [limit, offset])).map(decode),
    count: async (db: Reader): Promise<number> => count(await db.get(`SELECT COUNT(*) AS n FROM ${table}`)),
  };
}

const secrets = listedTable('ai_secrets', 'secret_id', SECRET_META_COLUMNS, decodeSecretMeta);

/** A secret's metadata (never its value). */
export const secretMeta = secrets.byId;
/** Oldest first. */
export const listSecretMeta = secrets.page;
export const countSecrets = secrets.count;

/** Replaces the sealed value (a rotation). */
export async function resealSecret(tx: Tx, secretId: string, sealed: Uint8Array, at: number): Promise<void> {
  await tx.run('UPDATE ai_secrets SET sealed = ?, rotated_at = ? WHERE secret_id = ?', [sealed, at, secretId]);
}

export async function deleteSecret(tx: Tx, secretId: string): Promise<void> {
  await tx.run('DELETE FROM ai_secrets WHERE secret_id = ?', [secretId]);
}

/** Records that the value was opened for a provider call at `at`. */
export async function touchSecret(tx: Tx, secretId: string, at: number): Promise<void> {
  await tx.run('UPDATE ai_secrets SET last_used_at = ? WHERE secret_id = ?', [at, secretId]);
}

/** Ids of the providers that send this secret, oldest first. */
export async function providersUsingSecret(db: Reader, secretId: string): Promise<string[]> {
  return (
    await db.all('SELECT provider_id FROM ai_providers WHERE api_key_secret_id = ? ORDER BY created_at, provider_id', [secretId])
  ).map((r) => str(r, 'provider_id'));
}

/** Provider ids by the secret they send, for the given secrets. */
export async function providersBySecret(db: Reader, secretIds: readonly string[]): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  if (secretIds.length === 0) return out;
  const rows = await db.all(
    `SELECT provider_id, api_key_secret_id FROM ai_providers WHERE api_key_secret_id IN (${secretIds.map(() => '?').join(', ')})
     ORDER BY created_at, provider_id`,
    secretIds,
  );
  for (const r of rows) {
    const id = str(r, 'api_key_secret_id');
    out.set(id, [...(out.get(id) ?? []), str(r, 'provider_id')]);
  }
  return out;
}

/** Every stored secret, sealed, as witnesses of the group's key in a store from before its check (oldest first, at most `limit`). */
export async function sealedSecrets(db: Reader, limit: number): Promise<{ secretId: string; sealed: Uint8Array }[]> {
  return (await db.all('SELECT secret_id, sealed FROM ai_secrets ORDER BY created_at, secret_id LIMIT ?', [limit])).map((r) => ({
    secretId: str(r, 'secret_id'),
    sealed: bytes(r, 'sealed'),
  }));
}

// ---------------------------------------------------------------- providers

/** A registered model provider as stored. */
export interface Provider {
  provider_id: string;
  name: string;
  provider_type: string;
  default_model: string;
  base_url: string | null;
  api_key_secret_id: string | null;
  timeout_ms: number;
  max_retries: number;
  /** Answers are asked for streamed (and assembled before use). */
  stream: boolean;
  created_at: number;
  created_by: string;
  updated_at: number;
  /** Whose right to the secret a call relies on: who last chose base_url and secret together (the registrant until a change). */
  bound_by: string;
}

const PROVIDER_COLUMNS =
  'provider_id, name, provider_type, default_model, base_url, api_key_secret_id, timeout_ms, max_retries, stream, created_at, created_by, updated_at, bound_by';

function decodeProvider(r: Row): Provider {
  return {
    provider_id: str(r, 'provider_id'),
    name: str(r, 'name'),
    provider_type: str(r, 'provider_type'),
    default_model: str(r, 'default_model'),
    base_url: strOrNull(r, 'base_url'),
    api_key_secret_id: strOrNull(r, 'api_key_secret_id'),
    timeout_ms: num(r, 'timeout_ms'),
    max_retries: num(r, 'max_retries'),
    stream: num(r, 'stream') === 1,
    created_at: num(r, 'created_at'),
    created_by: str(r, 'created_by'),
    updated_at: numOrNull(r, 'updated_at') ?? num(r, 'created_at'),
    bound_by: strOrNull(r, 'bound_by') ?? str(r, 'created_by'),
  };
}

export async function insertProvider(tx: Tx, p: Provider): Promise<void> {
  await tx.run(`INSERT INTO ai_providers (${PROVIDER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, [
    p.provider_id,
    p.name,
    p.provider_type,
    p.default_model,
    p.base_url,
    p.api_key_secret_id,
    p.timeout_ms,
    p.max_retries,
    p.stream ? 1 : 0,
    p.created_at,
    p.created_by,
    p.updated_at,
    p.bound_by,
  ]);
}

/** Rewrites every changeable field of a provider (its type, creation and id stay). */
export async function updateProvider(tx: Tx, p: Provider): Promise<void> {
  await tx.run(
    `UPDATE ai_providers SET name = ?, default_model = ?, base_url = ?, api_key_secret_id = ?, timeout_ms = ?, max_retries = ?, stream = ?,
      updated_at = ?, bound_by = ? WHERE provider_id = ?`,
    [
      p.name,
      p.default_model,
      p.base_url,
      p.api_key_secret_id,
      p.timeout_ms,
      p.max_retries,
      p.stream ? 1 : 0,
      p.updated_at,
      p.bound_by,
      p.provider_id,
    ],
  );
}

export async function deleteProvider(tx: Tx, id: string): Promise<void> {
  await tx.run('DELETE FROM ai_providers WHERE provider_id = ?', [id]);
}

const providers = listedTable('ai_providers', 'provider_id', PROVIDER_COLUMNS, decodeProvider);

export const providerById = providers.byId;
/** Oldest first. */
export const listProviders = providers.page;
/** How many providers listProviders pages through. */
export const countProviders = providers.count;
