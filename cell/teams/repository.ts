/**
 * Every SQL statement of the Agent Teams module (skills, blueprints, agents,
 * budget ledgers and reservations, formations, billets, crews, governing
 * contracts), with the row decoders. Bodies are stored as JSON text and
 * checked when read (they were validated when written). Statements stay in
 * the dialect both engines run (docs/storage.md).
 */
import { authoritySchema } from '../../core/authority/schema.ts';
import type { AuthorityEnvelope } from '../../core/authority/envelope.ts';
import { count, json, jsonOrNull, num, numOrNull, object, str, strOrNull } from '../store/decode.ts';
import type { Reader, Row, Tx } from '../store/types.ts';
import type { Agent, AgentBody, Ledger } from './agents.ts';
import type { Billet, BilletBody, Crew, CrewBody, Formation, FormationBody } from './formations.ts';
import type { Blueprint, BlueprintBody, Contract, Skill } from './resources.ts';
import { SKILL_KINDS, type SkillKindName } from './schema.ts';

// ---------------------------------------------------------------- checks of stored bodies

function bad(what: string): TypeError {
  return new TypeError(`store row: not ${what}`);
}

function isAuthority(v: unknown): v is AuthorityEnvelope {
  return authoritySchema.safeParse(v).success;
}

const isStringArray = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');
const isStringOrNull = (v: unknown): v is string | null => v === null || typeof v === 'string';

function blueprintBody(v: unknown): BlueprintBody {
  const o = object(v);
  if (
    typeof o['name'] !== 'string' ||
    typeof o['role_label'] !== 'string' ||
    !isStringOrNull(o['system_prompt_ref']) ||
    !isStringOrNull(o['model_preference']) ||
    !isStringArray(o['required_skills']) ||
    !isAuthority(o['authority_template']) ||
    typeof o['scope'] !== 'string'
  )
    throw bad('a blueprint');
  return v as BlueprintBody;
}

function agentBody(v: unknown): AgentBody {
  const o = object(v);
  if (
    (o['source'] !== 'blueprint' && o['source'] !== 'scratch') ||
    !isStringOrNull(o['blueprint_id']) ||
    typeof o['role_label'] !== 'string' ||
    !isStringOrNull(o['provider_id']) ||
    !isStringOrNull(o['model_preference']) ||
    !isStringOrNull(o['system_prompt']) ||
    !isAuthority(o['authority'])
  )
    throw bad('an agent');
  return v as AgentBody;
}

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

type ContractBody = Omit<Contract, 'contract_id' | 'created_at' | 'created_by'>;

function contractBody(v: unknown): ContractBody {
  const o = object(v);
  const rules = o['rules'];
  if (
    typeof o['name'] !== 'string' ||
    !isStringOrNull(o['description']) ||
    !Array.isArray(rules) ||
    !rules.every((r: unknown) => {
      const x = object(r);
      return typeof x['name'] === 'string' && typeof x['expr'] === 'string';
    })
  ) {
    throw bad('a contract');
  }
  return v as ContractBody;
}

// ---------------------------------------------------------------- skills

const SKILL_COLUMNS = 'skill_id, name, skill_kind, model_preference, definition, created_at, created_by';

function skillKind(v: string): SkillKindName {
  const k = SKILL_KINDS.find((x) => x === v);
  if (k === undefined) throw bad(`a skill kind (${v})`);
  return k;
}

function decodeSkill(r: Row): Skill {
  return {
    skill_id: str(r, 'skill_id'),
    name: str(r, 'name'),
    skill_kind: skillKind(str(r, 'skill_kind')),
    model_preference: strOrNull(r, 'model_preference'),
    definition: jsonOrNull(r, 'definition', object),
    created_at: num(r, 'created_at'),
    created_by: str(r, 'created_by'),
  };
}

export async function insertSkill(tx: Tx, s: Skill): Promise<void> {
  await tx.run(`INSERT INTO team_skills (${SKILL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)`, [
    s.skill_id,
    s.name,
    s.skill_kind,
    s.model_preference,
    s.definition ? JSON.stringify(s.definition) : null,
    s.created_at,
    s.created_by,
  ]);
}

export async function skillById(db: Reader, id: string): Promise<Skill | undefined> {
  const r = await db.get(`SELECT ${SKILL_COLUMNS} FROM team_skills WHERE skill_id = ?`, [id]);
  return r ? decodeSkill(r) : undefined;
}

export async function skillByName(db: Reader, name: string): Promise<Skill | undefined> {
  const r = await db.get(`SELECT ${SKILL_COLUMNS} FROM team_skills WHERE name = ?`, [name]);
  return r ? decodeSkill(r) : undefined;
}

export async function listSkills(db: Reader, limit: number, offset: number): Promise<Skill[]> {
  return (await db.all(`SELECT ${SKILL_COLUMNS} FROM team_skills ORDER BY created_at, skill_id LIMIT ? OFFSET ?`, [limit, offset])).map(
    decodeSkill,
  );
}

/** Rewrites a skill's model preference and definition (its name and kind never change). */
export async function updateSkill(tx: Tx, s: Skill): Promise<void> {
  await tx.run('UPDATE team_skills SET model_preference = ?, definition = ? WHERE skill_id = ?', [
    s.model_preference,
    s.definition ? JSON.stringify(s.definition) : null,
    s.skill_id,
  ]);
}

export async function deleteSkill(tx: Tx, id: string): Promise<void> {
  await tx.run('DELETE FROM team_skills WHERE skill_id = ?', [id]);
}

// ---------------------------------------------------------------- blueprints

function decodeBlueprint(r: Row): Blueprint {
  return {
    blueprint_id: str(r, 'blueprint_id'),
    ...json(r, 'body', blueprintBody),
    created_at: num(r, 'created_at'),
    created_by: str(r, 'created_by'),
  };
}

export async function insertBlueprint(tx: Tx, b: Blueprint): Promise<void> {
  const { blueprint_id, created_at, created_by, ...body } = b;
  await tx.run('INSERT INTO team_blueprints (blueprint_id, name, body, created_at, created_by) VALUES (?, ?, ?, ?, ?)', [
    blueprint_id,
    b.name,
    JSON.stringify(body),
    created_at,
    created_by,
  ]);
}

export async function blueprintById(db: Reader, id: string): Promise<Blueprint | undefined> {
  const r = await db.get('SELECT blueprint_id, body, created_at, created_by FROM team_blueprints WHERE blueprint_id = ?', [id]);
  return r ? decodeBlueprint(r) : undefined;
}

export async function listBlueprints(db: Reader, limit: number, offset: number): Promise<Blueprint[]> {
  return (
    await db.all(
      'SELECT blueprint_id, body, created_at, created_by FROM team_blueprints ORDER BY created_at, blueprint_id LIMIT ? OFFSET ?',
      [limit, offset],
    )
  ).map(decodeBlueprint);
}

export async function updateBlueprint(tx: Tx, b: Blueprint): Promise<void> {
  const { blueprint_id, created_at, created_by, ...body } = b;
  await tx.run('UPDATE team_blueprints SET name = ?, body = ? WHERE blueprint_id = ?', [b.name, JSON.stringify(body), blueprint_id]);
}

export async function deleteBlueprint(tx: Tx, id: string): Promise<void> {
  await tx.run('DELETE FROM team_blueprints WHERE blueprint_id = ?', [id]);
}

/** Blueprints whose body mentions `needle` (a quoted skill reference or contract id): a prefilter. */
export async function blueprintsMentioning(db: Reader, needle: string, limit: number): Promise<Blueprint[]> {
  return (
    await db.all(
      'SELECT blueprint_id, body, created_at, created_by FROM team_blueprints WHERE body LIKE ? ORDER BY created_at, blueprint_id LIMIT ?',
      [`%${needle}%`, limit],
    )
  ).map(decodeBlueprint);
}

// ---------------------------------------------------------------- agents

function decodeAgent(r: Row): Agent {
  return {
    agent_id: str(r, 'agent_id'),
    name: str(r, 'name'),
    ...json(r, 'body', agentBody),
    created_at: num(r, 'created_at'),
    created_by: str(r, 'created_by'),
  };
}

export async function insertAgent(tx: Tx, a: Agent): Promise<void> {
  const { agent_id, name, created_at, created_by, ...body } = a;
  await tx.run(
    'INSERT INTO team_agents (agent_id, name, source, blueprint_id, body, created_at, created_by) VALUES (?, ?, ?, ?, ?, ?, ?)',
    [agent_id, name, body.source, body.blueprint_id, JSON.stringify(body), created_at, created_by],
  );
}

export async function agentById(db: Reader, id: string): Promise<Agent | undefined> {
  const r = await db.get('SELECT agent_id, name, body, created_at, created_by FROM team_agents WHERE agent_id = ?', [id]);
  return r ? decodeAgent(r) : undefined;
}

/** Of `ids`, those naming an agent (one statement: a crew run's start checks every agent of the crew). */
export async function agentIdsIn(db: Reader, ids: readonly string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await db.all(`SELECT agent_id FROM team_agents WHERE agent_id IN (${ids.map(() => '?').join(', ')})`, [...ids]);
  return new Set(rows.map((r) => str(r, 'agent_id')));
}

export async function listAgents(db: Reader, limit: number, offset: number): Promise<Agent[]> {
  return (
    await db.all('SELECT agent_id, name, body, created_at, created_by FROM team_agents ORDER BY created_at, agent_id LIMIT ? OFFSET ?', [
      limit,
      offset,
    ])
  ).map(decodeAgent);
}

export async function updateAgent(tx: Tx, a: Agent): Promise<void> {
  const { agent_id, name, created_at, created_by, ...body } = a;
  await tx.run('UPDATE team_agents SET body = ? WHERE agent_id = ?', [JSON.stringify(body), agent_id]);
}

/** Agents minted from a blueprint, oldest first. */
export async function agentsOfBlueprint(db: Reader, blueprintId: string, limit: number): Promise<Agent[]> {
  return (
    await db.all(
      'SELECT agent_id, name, body, created_at, created_by FROM team_agents WHERE blueprint_id = ? ORDER BY created_at, agent_id LIMIT ?',
      [blueprintId, limit],
    )
  ).map(decodeAgent);
}

/** Agents whose body mentions `needle` (a quoted provider or contract id): a prefilter. */
export async function agentsMentioning(db: Reader, needle: string, limit: number): Promise<Agent[]> {
  return (
    await db.all(
      'SELECT agent_id, name, body, created_at, created_by FROM team_agents WHERE body LIKE ? ORDER BY created_at, agent_id LIMIT ?',
      [`%${needle}%`, limit],
    )
  ).map(decodeAgent);
}

// ---------------------------------------------------------------- budget ledgers and reservations

function decodeLedger(r: Row): Ledger {
  return {
    agent_id: str(r, 'agent_id'),
    budget_limit: num(r, 'budget_limit'),
    reserved: num(r, 'reserved'),
    spent: num(r, 'spent'),
    created_at: num(r, 'created_at'),
    updated_at: num(r, 'updated_at'),
    updated_by: str(r, 'updated_by'),
  };
}

/**
 * The ledger as it stands: its columns plus the reservations not folded into
 * them yet (open ones are reserved, committed ones spent).
 */
export async function ledgerOf(db: Reader, agentId: string): Promise<Ledger | undefined> {
  const r = await db.get(
    `SELECT l.agent_id, l.budget_limit, l.created_at, l.updated_at, l.updated_by,
       l.reserved + COALESCE((SELECT SUM(x.amount) FROM team_reservations x WHERE x.agent_id = l.agent_id AND x.folded = 0 AND x.committed_at IS NULL), 0) AS reserved,
       l.spent + COALESCE((SELECT SUM(x.actual) FROM team_reservations x WHERE x.agent_id = l.agent_id AND x.folded = 0 AND x.committed_at IS NOT NULL), 0) AS spent
     FROM team_ledgers l WHERE l.agent_id = ?`,
    [agentId],
  );
  return r ? decodeLedger(r) : undefined;
}

/** Agents with committed reservations not folded into their ledger yet. */
export async function agentsToFold(db: Reader): Promise<string[]> {
  const rows = await db.all(
    'SELECT DISTINCT agent_id FROM team_reservations WHERE folded = 0 AND committed_at IS NOT NULL ORDER BY agent_id',
  );
  return rows.map((r) => str(r, 'agent_id'));
}

/**
 * Adds an agent's committed, unfolded reservations to its ledger's spent and
 * marks them folded (a `row-locks` transaction: the ledger's row is locked
 * first, so folds take turns and a reservation is folded once). Returns how
 * many were folded.
 */
export async function foldLedger(tx: Tx, agentId: string): Promise<number> {
  if ((await tx.run('UPDATE team_ledgers SET updated_at = updated_at WHERE agent_id = ?', [agentId])).changes === 0) return 0;
  const rows = await tx.all(
    'SELECT reservation_id, actual FROM team_reservations WHERE agent_id = ? AND folded = 0 AND committed_at IS NOT NULL ORDER BY reservation_id LIMIT 1000',
    [agentId],
  );
  if (rows.length === 0) return 0;
  let spent = 0;
  for (const r of rows) spent += numOrNull(r, 'actual') ?? 0;
  const ids = rows.map((r) => str(r, 'reservation_id'));
  await tx.run(`UPDATE team_reservations SET folded = 1 WHERE reservation_id IN (${ids.map(() => '?').join(', ')})`, ids);
  await tx.run('UPDATE team_ledgers SET spent = spent + ? WHERE agent_id = ?', [spent, agentId]);
  return rows.length;
}

/** Registers a ledger, or resets the limit of an existing one (reserved and spent stay). */
export async function upsertLedger(tx: Tx, agentId: string, limit: number, at: number, by: string): Promise<void> {
  await tx.run(
    `INSERT INTO team_ledgers (agent_id, budget_limit, reserved, spent, created_at, updated_at, updated_by) VALUES (?, ?, 0, 0, ?, ?, ?)
      ON CONFLICT (agent_id) DO UPDATE SET budget_limit = excluded.budget_limit, updated_at = excluded.updated_at, updated_by = excluded.updated_by`,
    [agentId, limit, at, at, by],
  );
}

export async function insertReservation(
  tx: Tx,
  r: { id: string; agentId: string; amount: number; runId: string; stepId: string; at: number },
): Promise<void> {
  // The run's own row: the ledger is not written (ledgerOf counts it until foldLedger does). Idempotent: a
  // write staged with a journal append whose COMMIT's outcome was unknown may be applied again (runs/journal.ts).
  await tx.run(
    'INSERT INTO team_reservations (reservation_id, agent_id, amount, actual, run_id, step_id, created_at, committed_at, folded) VALUES (?, ?, ?, NULL, ?, ?, ?, NULL, 0) ON CONFLICT (reservation_id) DO NOTHING',
    [r.id, r.agentId, r.amount, r.runId, r.stepId, r.at],
  );
}

/**
 * Commits a reservation's actual usage (once: false when it was committed
 * already or is unknown). One made before ledger shares (`folded`) moves its
 * amount out of the ledger's `reserved` (never below 0) and `actual` into
 * `spent`; a newer one changes its own row only.
 */
export async function commitReservation(tx: Tx, id: string, actual: number, at: number): Promise<boolean> {
  // One statement commits it and says what it was (no read first: one round trip less in the step's commit).
  const r = await tx.get(
    'UPDATE team_reservations SET actual = ?, committed_at = ? WHERE reservation_id = ? AND committed_at IS NULL RETURNING agent_id, amount, folded',
    [actual, at, id],
  );
  if (!r) return false;
  if (num(r, 'folded') !== 0) {
    const amount = num(r, 'amount');
    await tx.run(
      'UPDATE team_ledgers SET reserved = CASE WHEN reserved - ? < 0 THEN 0 ELSE reserved - ? END, spent = spent + ? WHERE agent_id = ?',
      [amount, amount, actual, str(r, 'agent_id')],
    );
  }
  return true;
}

/** Reservations of a run not committed yet. */
export async function openReservations(db: Reader, runId: string): Promise<string[]> {
  return (
    await db.all('SELECT reservation_id FROM team_reservations WHERE run_id = ? AND committed_at IS NULL ORDER BY reservation_id', [runId])
  ).map((r) => str(r, 'reservation_id'));
}

/** Tokens a run has spent so far (committed actual usage). */
export async function runTokens(db: Reader, runId: string): Promise<number> {
  return count(await db.get('SELECT COALESCE(SUM(actual), 0) AS n FROM team_reservations WHERE run_id = ?', [runId]));
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

// ---------------------------------------------------------------- graphs runs executed

/** Keeps a compiled graph by its hash (a graph already kept stays as it is: equal hashes are equal graphs). */
export async function insertGraph(tx: Tx, graphHash: string, graph: unknown, at: number): Promise<void> {
  await tx.run('INSERT INTO team_graphs (graph_hash, graph, created_at) VALUES (?, ?, ?) ON CONFLICT (graph_hash) DO NOTHING', [
    graphHash,
    JSON.stringify(graph),
    at,
  ]);
}

/** Whether a graph is kept under that hash. */
export async function hasGraph(db: Reader, graphHash: string): Promise<boolean> {
  return (await db.get('SELECT 1 AS x FROM team_graphs WHERE graph_hash = ?', [graphHash])) !== undefined;
}

/** A kept graph (parsed JSON), or undefined. */
export async function graphByHash(db: Reader, graphHash: string): Promise<unknown> {
  const r = await db.get('SELECT graph FROM team_graphs WHERE graph_hash = ?', [graphHash]);
  return r ? json(r, 'graph', object) : undefined;
}

// ---------------------------------------------------------------- contracts

function decodeContract(r: Row): Contract {
  return {
    contract_id: str(r, 'contract_id'),
    ...json(r, 'body', contractBody),
    created_at: num(r, 'created_at'),
    created_by: str(r, 'created_by'),
  };
}

export async function insertContract(tx: Tx, k: Contract): Promise<void> {
  const { contract_id, created_at, created_by, ...body } = k;
  await tx.run('INSERT INTO team_contracts (contract_id, name, body, created_at, created_by) VALUES (?, ?, ?, ?, ?)', [
    contract_id,
    k.name,
    JSON.stringify(body),
    created_at,
    created_by,
  ]);
}

export async function contractById(db: Reader, id: string): Promise<Contract | undefined> {
  const r = await db.get('SELECT contract_id, body, created_at, created_by FROM team_contracts WHERE contract_id = ?', [id]);
  return r ? decodeContract(r) : undefined;
}

export async function listContracts(db: Reader, limit: number, offset: number): Promise<Contract[]> {
  return (
    await db.all('SELECT contract_id, body, created_at, created_by FROM team_contracts ORDER BY created_at, contract_id LIMIT ? OFFSET ?', [
      limit,
      offset,
    ])
  ).map(decodeContract);
}

export async function updateContract(tx: Tx, k: Contract): Promise<void> {
  const { contract_id, created_at, created_by, ...body } = k;
  await tx.run('UPDATE team_contracts SET name = ?, body = ? WHERE contract_id = ?', [k.name, JSON.stringify(body), contract_id]);
}

export async function deleteContract(tx: Tx, id: string): Promise<void> {
  await tx.run('DELETE FROM team_contracts WHERE contract_id = ?', [id]);
}

// ---------------------------------------------------------------- list totals

/** The table behind each paged list of the module (GET skills, blueprints, agents, contracts, formations, crews). */
const LISTED = {
  skills: 'team_skills',
  blueprints: 'team_blueprints',
  agents: 'team_agents',
  contracts: 'team_contracts',
  formations: 'team_formations',
  crews: 'team_crews',
} as const;
export type Listed = keyof typeof LISTED;

/** How many rows a paged list holds in all: the rows its list query pages through (give both the same filter). */
export async function countListed(db: Reader, what: Listed): Promise<number> {
  return count(await db.get(`SELECT COUNT(*) AS n FROM ${LISTED[what]}`));
}
