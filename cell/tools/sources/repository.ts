/**
 * Every SQL statement of the catalog's sources (`tool_sources`) and their
 * pins (`tool_pins`), with the row decoders. Statements stay in the dialect
 * both engines run (docs/storage.md).
 */
import type { PinnedDefinition } from '../../../core/catalog/pin.ts';
import { count, json, num, object, str, strOrNull } from '../../store/decode.ts';
import type { Reader, Row, Tx } from '../../store/types.ts';
import type { PinRow, SourceAuth, SourceRow, SourceTransport } from './types.ts';

const SOURCE_COLUMNS =
  'source_id, name, transport, url, auth, origin, description, definition_max_age_ms, timeout_ms, bound_by, created_at, created_by, updated_at';

function authOf(v: unknown): SourceAuth {
  const o = object(v);
  if (o['type'] === 'none' || o['type'] === 'cell' || o['type'] === 'client_credentials') return o as unknown as SourceAuth;
  throw new TypeError('tool_sources.auth has an unknown type');
}

function sourceOf(r: Row): SourceRow {
  const transport = str(r, 'transport');
  const origin = str(r, 'origin');
  if ((transport !== 'http' && transport !== 'stdio') || (origin !== 'api' && origin !== 'config'))
    throw new TypeError('tool_sources row with an unknown transport or origin');
  return {
    source_id: str(r, 'source_id'),
    name: str(r, 'name'),
    transport: transport as SourceTransport,
    url: strOrNull(r, 'url'),
    auth: json(r, 'auth', authOf),
    origin,
    description: str(r, 'description'),
    definition_max_age_ms: num(r, 'definition_max_age_ms'),
    timeout_ms: num(r, 'timeout_ms'),
    bound_by: strOrNull(r, 'bound_by'),
    created_at: num(r, 'created_at'),
    created_by: str(r, 'created_by'),
    updated_at: num(r, 'updated_at'),
  };
}

function pinOf(r: Row): PinRow {
  return {
    source_id: str(r, 'source_id'),
    tool: str(r, 'tool'),
    name: str(r, 'name'),
    definition: json(r, 'definition', (v) => object(v) as unknown as PinnedDefinition),
    pin: str(r, 'pin'),
    pinned_at: num(r, 'pinned_at'),
    pinned_by: str(r, 'pinned_by'),
  };
}

const sourceParams = (s: SourceRow) => [
  s.source_id,
  s.name,
  s.transport,
  s.url,
  JSON.stringify(s.auth),
  s.origin,
  s.description,
  s.definition_max_age_ms,
  s.timeout_ms,
  s.bound_by,
  s.created_at,
  s.created_by,
  s.updated_at,
];

export async function insertSource(tx: Tx, s: SourceRow): Promise<void> {
  await tx.run(`INSERT INTO tool_sources (${SOURCE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, sourceParams(s));
}

/** Writes every changeable field of a source (not its id, name, transport, origin or creation). */
export async function updateSource(tx: Tx, s: SourceRow): Promise<void> {
  await tx.run(
    `UPDATE tool_sources SET url = ?, auth = ?, description = ?, definition_max_age_ms = ?, timeout_ms = ?, bound_by = ?, updated_at = ?
     WHERE source_id = ?`,
    [s.url, JSON.stringify(s.auth), s.description, s.definition_max_age_ms, s.timeout_ms, s.bound_by, s.updated_at, s.source_id],
  );
}

export async function deleteSource(tx: Tx, sourceId: string): Promise<void> {
  await tx.run('DELETE FROM tool_pins WHERE source_id = ?', [sourceId]);
  await tx.run('DELETE FROM tool_sources WHERE source_id = ?', [sourceId]);
}

export async function sourceById(db: Reader, sourceId: string): Promise<SourceRow | undefined> {
  const r = await db.get(`SELECT ${SOURCE_COLUMNS} FROM tool_sources WHERE source_id = ?`, [sourceId]);
  return r ? sourceOf(r) : undefined;
}

export async function sourceByName(db: Reader, name: string): Promise<SourceRow | undefined> {
  const r = await db.get(`SELECT ${SOURCE_COLUMNS} FROM tool_sources WHERE name = ?`, [name]);
  return r ? sourceOf(r) : undefined;
}

/** Sources in registration order (oldest first, then by id). */
export async function listSources(db: Reader, limit: number, offset: number): Promise<SourceRow[]> {
  const rows = await db.all(`SELECT ${SOURCE_COLUMNS} FROM tool_sources ORDER BY created_at, source_id LIMIT ? OFFSET ?`, [limit, offset]);
  return rows.map(sourceOf);
}

export async function countSources(db: Reader): Promise<number> {
  return count(await db.get('SELECT COUNT(*) AS n FROM tool_sources'));
}

/** Sources whose client credentials name the stored secret (a secret they send is not deleted). */
export async function sourcesUsingSecret(db: Reader, secretId: string): Promise<string[]> {
  const rows = await db.all('SELECT source_id, auth FROM tool_sources WHERE auth LIKE ? ORDER BY source_id', [
    `%${JSON.stringify(secretId)}%`,
  ]);
  return rows
    .filter((r) => {
      const a = json(r, 'auth', authOf);
      return a.type === 'client_credentials' && a.client_secret_id === secretId;
    })
    .map((r) => str(r, 'source_id'));
}

/** Every source and every pin (the catalog's imported tools are few: the whole set is held in memory). */
export async function allSourcesAndPins(db: Reader): Promise<{ sources: SourceRow[]; pins: PinRow[] }> {
  const sources = (await db.all(`SELECT ${SOURCE_COLUMNS} FROM tool_sources ORDER BY created_at, source_id`)).map(sourceOf);
  const pins = (
    await db.all('SELECT source_id, tool, name, definition, pin, pinned_at, pinned_by FROM tool_pins ORDER BY source_id, name')
  ).map(pinOf);
  return { sources, pins };
}

export async function pinsOf(db: Reader, sourceId: string): Promise<PinRow[]> {
  const rows = await db.all(
    'SELECT source_id, tool, name, definition, pin, pinned_at, pinned_by FROM tool_pins WHERE source_id = ? ORDER BY name',
    [sourceId],
  );
  return rows.map(pinOf);
}

/** The pins of the given sources, by source (one read for a page of sources). */
export async function pinsBySource(db: Reader, sourceIds: readonly string[]): Promise<Map<string, PinRow[]>> {
  const out = new Map<string, PinRow[]>(sourceIds.map((id) => [id, []]));
  if (sourceIds.length === 0) return out;
  const rows = await db.all(
    `SELECT source_id, tool, name, definition, pin, pinned_at, pinned_by FROM tool_pins
     WHERE source_id IN (${sourceIds.map(() => '?').join(', ')}) ORDER BY name`,
    sourceIds,
  );
  for (const r of rows.map(pinOf)) out.get(r.source_id)?.push(r);
  return out;
}

/** Inserts or replaces the pin of one tool of a source. */
export async function upsertPin(tx: Tx, p: PinRow): Promise<void> {
  await tx.run(
    `INSERT INTO tool_pins (source_id, tool, name, definition, pin, pinned_at, pinned_by) VALUES (?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (source_id, tool) DO UPDATE SET name = excluded.name, definition = excluded.definition, pin = excluded.pin,
       pinned_at = excluded.pinned_at, pinned_by = excluded.pinned_by`,
    [p.source_id, p.tool, p.name, JSON.stringify(p.definition), p.pin, p.pinned_at, p.pinned_by],
  );
}

export async function deletePin(tx: Tx, sourceId: string, tool: string): Promise<void> {
  await tx.run('DELETE FROM tool_pins WHERE source_id = ? AND tool = ?', [sourceId, tool]);
}
