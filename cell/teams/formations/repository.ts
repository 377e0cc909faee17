/**
 * The SQL of formations (and their versions), billets and crews, with the
 * row decoders. Bodies are stored as JSON text and checked when read (they
 * were validated when written). Statements stay in the dialect both engines
 * run (docs/storage.md).
 */
import { count, json, num, object, str, strOrNull } from '../../store/decode.ts';
import type { Reader, Row, Tx } from '../../store/types.ts';
import { bad, isAuthority, isStringArray, isStringOrNull } from '../repository.ts';
import type { FormationBody, Formation, BilletBody, Billet, CrewBody, Crew } from './types.ts';

// ---------------------------------------------------------------- checks of stored bodies

function formationBody(v: unknown): FormationBody {
  const o = object(v);
  if (typeof o['name'] !== 'string' || typeof o['coordination_policy'] !== 'string') throw bad('a formation');
  return v as FormationBody;
}

function billetBody(v: unknown): BilletBody {
  const o = object(v);
  if (
    typeof o['role_label'] !== 'string' ||
    !isStringArray(o['required_skills']) ||
    !isStringOrNull(o['reports_to']) ||
    !isAuthority(o['authority_cap'])
  )
    throw bad('a billet');
  return v as BilletBody;
}

function crewBody(v: unknown): CrewBody {
  const o = object(v);
  const a = o['assignments'];
  if (
    typeof o['name'] !== 'string' ||
    typeof o['workspace_id'] !== 'string' ||
    typeof a !== 'object' ||
    a === null ||
    !Object.values(a).every((x) => typeof x === 'string')
  )
    throw bad('a crew');
  return v as CrewBody;
}

// ---------------------------------------------------------------- formations, their versions, billets

function decodeFormation(r: Row): Formation {
  return {
    formation_id: str(r, 'formation_id'),
    version: num(r, 'version'),
    ...json(r, 'body', formationBody),
    created_at: num(r, 'created_at'),
    created_by: str(r, 'created_by'),
    updated_at: num(r, 'updated_at'),
  };
}

const HEAD_COLUMNS = 'formation_id, version, body, created_at, created_by, updated_at';

/** Writes a new formation: its head row and version 1 (no billets yet). */
export async function insertFormation(tx: Tx, f: Formation, body: FormationBody): Promise<void> {
  await tx.run(
    `INSERT INTO team_formations (formation_id, name, version, body, created_at, created_by, updated_at) VALUES (?, ?, 1, ?, ?, ?, ?)`,
    [f.formation_id, f.name, JSON.stringify(body), f.created_at, f.created_by, f.updated_at],
  );
  await tx.run(
    `INSERT INTO team_formation_versions (formation_id, version, body, change_kind, change_billet, created_at, created_by)
      VALUES (?, 1, ?, 'created', NULL, ?, ?)`,
    [f.formation_id, JSON.stringify(body), f.created_at, f.created_by],
  );
}

/** The formation as its latest version shows it. */
export async function formationById(db: Reader, id: string): Promise<Formation | undefined> {
  const r = await db.get(`SELECT ${HEAD_COLUMNS} FROM team_formations WHERE formation_id = ?`, [id]);
  return r ? decodeFormation(r) : undefined;
}

/** The formation as version `version` shows it (`updated_at` is when that version was written). */
export async function formationAt(db: Reader, id: string, version: number): Promise<Formation | undefined> {
  const r = await db.get(
    `SELECT f.formation_id AS formation_id, v.version AS version, v.body AS body, f.created_at AS created_at, f.created_by AS created_by,
      v.created_at AS updated_at
      FROM team_formations f JOIN team_formation_versions v ON v.formation_id = f.formation_id
      WHERE f.formation_id = ? AND v.version = ?`,
    [id, version],
  );
  return r ? decodeFormation(r) : undefined;
}

export async function listFormations(db: Reader, limit: number, offset: number): Promise<Formation[]> {
  return (
    await db.all(`SELECT ${HEAD_COLUMNS} FROM team_formations ORDER BY created_at, formation_id LIMIT ? OFFSET ?`, [limit, offset])
  ).map(decodeFormation);
}

export interface FormationVersionRow {
  version: number;
  change_kind: string;
  change_billet: string | null;
  created_at: number;
  created_by: string;
}

/**
 * Writes version `v.version` of a formation (the next one: the caller read the
 * head in the same transaction) and moves the head to it.
 */
export async function insertFormationVersion(tx: Tx, formationId: string, body: FormationBody, v: FormationVersionRow): Promise<void> {
  await tx.run(
    `INSERT INTO team_formation_versions (formation_id, version, body, change_kind, change_billet, created_at, created_by)
      VALUES (?, ?, ?, ?, ?, ?, ?)`,
    [formationId, v.version, JSON.stringify(body), v.change_kind, v.change_billet, v.created_at, v.created_by],
  );
  await tx.run('UPDATE team_formations SET version = ?, name = ?, body = ?, updated_at = ? WHERE formation_id = ?', [
    v.version,
    body.name,
    JSON.stringify(body),
    v.created_at,
    formationId,
  ]);
}

/** A formation's versions, oldest first, and how many there are. */
export async function listFormationVersions(
  db: Reader,
  formationId: string,
  limit: number,
  offset: number,
): Promise<{ items: FormationVersionRow[]; total: number }> {
  const total = count(await db.get('SELECT COUNT(*) AS n FROM team_formation_versions WHERE formation_id = ?', [formationId]));
  const items = (
    await db.all(
      `SELECT version, change_kind, change_billet, created_at, created_by FROM team_formation_versions
        WHERE formation_id = ? ORDER BY version LIMIT ? OFFSET ?`,
      [formationId, limit, offset],
    )
  ).map((r) => ({
    version: num(r, 'version'),
    change_kind: str(r, 'change_kind'),
    change_billet: strOrNull(r, 'change_billet'),
    created_at: num(r, 'created_at'),
    created_by: str(r, 'created_by'),
  }));
  return { items, total };
}

export async function formationVersionRow(db: Reader, formationId: string, version: number): Promise<FormationVersionRow | undefined> {
  const r = await db.get(
    'SELECT version, change_kind, change_billet, created_at, created_by FROM team_formation_versions WHERE formation_id = ? AND version = ?',
    [formationId, version],
  );
  return r
    ? {
        version: num(r, 'version'),
        change_kind: str(r, 'change_kind'),
        change_billet: strOrNull(r, 'change_billet'),
        created_at: num(r, 'created_at'),
        created_by: str(r, 'created_by'),
      }
    : undefined;
}

/** Removes a formation with every version and billet row. */
export async function deleteFormation(tx: Tx, formationId: string): Promise<void> {
  await tx.run('DELETE FROM team_billet_versions WHERE formation_id = ?', [formationId]);
  await tx.run('DELETE FROM team_formation_versions WHERE formation_id = ?', [formationId]);
  await tx.run('DELETE FROM team_formations WHERE formation_id = ?', [formationId]);
}

function decodeBillet(r: Row): Billet {
  return {
    billet_id: str(r, 'billet_id'),
    formation_id: str(r, 'formation_id'),
    position: num(r, 'position'),
    ...json(r, 'body', billetBody),
    created_at: num(r, 'created_at'),
    created_by: str(r, 'created_by'),
    updated_at: num(r, 'updated_at'),
    updated_by: str(r, 'updated_by'),
  };
}

const BILLET_COLUMNS = 'billet_id, formation_id, position, body, created_at, created_by, updated_at, updated_by';
/** Rows of version ? (twice): valid from version_from until version_to (exclusive). */
const AT_VERSION = 'version_from <= ? AND (version_to IS NULL OR version_to > ?)';

/** Writes a billet row valid from `versionFrom` on. */
export async function insertBillet(tx: Tx, b: Billet, versionFrom: number): Promise<void> {
  const body: BilletBody = {
    role_label: b.role_label,
    required_skills: b.required_skills,
    reports_to: b.reports_to,
    authority_cap: b.authority_cap,
    ...(b.timeout_ms !== undefined ? { timeout_ms: b.timeout_ms } : {}),
    ...(b.retry !== undefined ? { retry: b.retry } : {}),
    ...(b.tool_choice !== undefined ? { tool_choice: b.tool_choice } : {}),
  };
  await tx.run(
    `INSERT INTO team_billet_versions (billet_id, formation_id, version_from, version_to, position, body, created_at, created_by, updated_at, updated_by)
      VALUES (?, ?, ?, NULL, ?, ?, ?, ?, ?, ?)`,
    [b.billet_id, b.formation_id, versionFrom, b.position, JSON.stringify(body), b.created_at, b.created_by, b.updated_at, b.updated_by],
  );
}

/** Ends the current row of a billet: it is not part of `versionTo` and later versions. */
export async function closeBillet(tx: Tx, billetId: string, versionTo: number): Promise<void> {
  await tx.run('UPDATE team_billet_versions SET version_to = ? WHERE billet_id = ? AND version_to IS NULL', [versionTo, billetId]);
}

/** The billet as the latest version of its formation has it (undefined when removed or unknown). */
export async function billetById(db: Reader, id: string): Promise<Billet | undefined> {
  const r = await db.get(`SELECT ${BILLET_COLUMNS} FROM team_billet_versions WHERE billet_id = ? AND version_to IS NULL`, [id]);
  return r ? decodeBillet(r) : undefined;
}

/** The billets of version `version` of a formation, in position order. */
export async function listBillets(db: Reader, formationId: string, version: number): Promise<Billet[]> {
  return (
    await db.all(
      `SELECT ${BILLET_COLUMNS} FROM team_billet_versions WHERE formation_id = ? AND ${AT_VERSION} ORDER BY position, billet_id`,
      [formationId, version, version],
    )
  ).map(decodeBillet);
}

export async function countBillets(db: Reader, formationId: string, version: number): Promise<number> {
  return count(
    await db.get(`SELECT COUNT(*) AS n FROM team_billet_versions WHERE formation_id = ? AND ${AT_VERSION}`, [
      formationId,
      version,
      version,
    ]),
  );
}

/** The position a new billet takes: after every billet the formation ever had (positions are never reused). */
export async function nextBilletPosition(db: Reader, formationId: string): Promise<number> {
  return count(await db.get('SELECT COALESCE(MAX(position) + 1, 0) AS n FROM team_billet_versions WHERE formation_id = ?', [formationId]));
}

/**
 * Formations with a version whose body or billets contain `needle` (a JSON
 * string such as "skill:x" or a contract id, quoted), any version: a
 * prefilter, the caller checks each candidate exactly.
 */
export async function formationsMentioning(db: Reader, needle: string, limit: number): Promise<string[]> {
  const like = `%${needle}%`;
  return (
    await db.all(
      `SELECT formation_id FROM team_formation_versions WHERE body LIKE ?
        UNION SELECT formation_id FROM team_billet_versions WHERE body LIKE ?
        ORDER BY formation_id LIMIT ?`,
      [like, like, limit],
    )
  ).map((r) => str(r, 'formation_id'));
}

/** Every version body and billet body of a formation, as stored (JSON text). */
export async function formationTexts(db: Reader, formationId: string): Promise<string[]> {
  const a = await db.all('SELECT body FROM team_formation_versions WHERE formation_id = ?', [formationId]);
  const b = await db.all('SELECT body FROM team_billet_versions WHERE formation_id = ?', [formationId]);
  return [...a, ...b].map((r) => str(r, 'body'));
}

// ---------------------------------------------------------------- crews

function decodeCrew(r: Row): Crew {
  return {
    crew_id: str(r, 'crew_id'),
    formation_id: str(r, 'formation_id'),
    formation_version: num(r, 'formation_version'),
    ...json(r, 'body', crewBody),
    created_at: num(r, 'created_at'),
    created_by: str(r, 'created_by'),
  };
}

const CREW_COLUMNS = 'crew_id, formation_id, formation_version, body, created_at, created_by';

function crewBodyOf(c: Crew): CrewBody {
  return { name: c.name, assignments: c.assignments, workspace_id: c.workspace_id };
}

export async function insertCrew(tx: Tx, c: Crew): Promise<void> {
  await tx.run(`INSERT INTO team_crews (${CREW_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)`, [
    c.crew_id,
    c.formation_id,
    c.formation_version,
    JSON.stringify(crewBodyOf(c)),
    c.created_at,
    c.created_by,
  ]);
}

/** Rewrites a crew's pinned version and body (name, assignments, workspace). */
export async function updateCrew(tx: Tx, c: Crew): Promise<void> {
  await tx.run('UPDATE team_crews SET formation_version = ?, body = ? WHERE crew_id = ?', [
    c.formation_version,
    JSON.stringify(crewBodyOf(c)),
    c.crew_id,
  ]);
}

export async function deleteCrew(tx: Tx, crewId: string): Promise<void> {
  await tx.run('DELETE FROM team_crews WHERE crew_id = ?', [crewId]);
}

export async function crewById(db: Reader, id: string): Promise<Crew | undefined> {
  const r = await db.get(`SELECT ${CREW_COLUMNS} FROM team_crews WHERE crew_id = ?`, [id]);
  return r ? decodeCrew(r) : undefined;
}

export async function listCrews(db: Reader, limit: number, offset: number): Promise<Crew[]> {
  return (await db.all(`SELECT ${CREW_COLUMNS} FROM team_crews ORDER BY created_at, crew_id LIMIT ? OFFSET ?`, [limit, offset])).map(
    decodeCrew,
  );
}

/** Ids of the crews of a formation (any version), oldest first. */
export async function crewsOfFormation(db: Reader, formationId: string, limit: number): Promise<string[]> {
  return (
    await db.all('SELECT crew_id FROM team_crews WHERE formation_id = ? ORDER BY created_at, crew_id LIMIT ?', [formationId, limit])
  ).map((r) => str(r, 'crew_id'));
}

/** Crews whose body mentions `needle` (an agent id): a prefilter, the caller checks the assignments. */
export async function crewsMentioning(db: Reader, needle: string, limit: number): Promise<Crew[]> {
  return (
    await db.all(`SELECT ${CREW_COLUMNS} FROM team_crews WHERE body LIKE ? ORDER BY created_at, crew_id LIMIT ?`, [`%${needle}%`, limit])
  ).map(decodeCrew);
}
