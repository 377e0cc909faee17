/**
 * The SQL of the resources of Agent Teams (skills, blueprints, agents, their
 * budget ledgers and reservations, governing contracts), with the row
 * decoders. Bodies are stored as JSON text and checked when read (they were
 * validated when written). Statements stay in the dialect both engines run
 * (docs/storage.md).
 */
import { count, json, jsonOrNull, num, numOrNull, object, str, strOrNull } from '../../store/decode.ts';
import type { Reader, Row, Tx } from '../../store/types.ts';
import { SKILL_KINDS, type SkillKindName } from '../schema.ts';
import { bad, isAuthority, isStringArray, isStringOrNull } from '../repository.ts';
import type { Skill, BlueprintBody, Blueprint, Contract, AgentBody, Agent, Ledger } from './types.ts';

// ---------------------------------------------------------------- checks of stored bodies

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
    held: num(r, 'held'),
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
    `SELECT l.agent_id, l.budget_limit, l.created_at, l.updated_at, l.updated_by, l.held,
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
 * Adds each agent's committed, unfolded reservations to its ledger's spent
 * and marks them folded (a `row-locks` transaction). For each agent, in the
 * order given: its ledger row locked, so folds take turns; then its rows
 * claimed (`folded = 1`) with what they spent returned, so what is added is
 * exactly what was marked and a reservation is folded once. Every agent's two
 * statements go in one round trip, the ledgers' updates in a second one.
 * An agent without a ledger row keeps its reservations unfolded. Returns how
 * many were folded.
 */
export async function foldLedgers(tx: Tx, agentIds: readonly string[]): Promise<number> {
  const locks: Promise<{ changes: number }>[] = [];
  const claims: Promise<Row[]>[] = [];
  for (const agentId of agentIds) {
    locks.push(tx.run('UPDATE team_ledgers SET updated_at = updated_at WHERE agent_id = ?', [agentId]));
    claims.push(
      tx.all(
        `UPDATE team_reservations SET folded = 1
          WHERE agent_id = ? AND folded = 0 AND committed_at IS NOT NULL
            AND EXISTS (SELECT 1 FROM team_ledgers l WHERE l.agent_id = ?)
          RETURNING actual`,
        [agentId, agentId],
      ),
    );
  }
  const [, claimed] = await Promise.all([Promise.all(locks), Promise.all(claims)]);
  let folded = 0;
  const adds: Promise<unknown>[] = [];
  for (const [i, rows] of claimed.entries()) {
    if (rows.length === 0) continue;
    let spent = 0;
    for (const r of rows) spent += numOrNull(r, 'actual') ?? 0;
    adds.push(tx.run('UPDATE team_ledgers SET spent = spent + ? WHERE agent_id = ?', [spent, agentIds[i]!]));
    folded += rows.length;
  }
  await Promise.all(adds);
  return folded;
}

/** Registers a ledger, or resets the limit of an existing one (reserved and spent stay). */
export async function upsertLedger(tx: Tx, agentId: string, limit: number, at: number, by: string): Promise<void> {
  await tx.run(
    `INSERT INTO team_ledgers (agent_id, budget_limit, reserved, spent, created_at, updated_at, updated_by) VALUES (?, ?, 0, 0, ?, ?, ?)
      ON CONFLICT (agent_id) DO UPDATE SET budget_limit = excluded.budget_limit, updated_at = excluded.updated_at, updated_by = excluded.updated_by`,
    [agentId, limit, at, at, by],
  );
}

/**
 * Reserves for a run's model call with the ledger's decision in the same statement: `amount`, or
 * what the ledger has left when that is less but at least `minimum` (core/engine/budget.ts
 * grantTokens: whole tokens, never 0), as the run's own row. Returns the amount reserved, or null
 * when the ledger (absent, or with too little left) refused. What is left is the ledger's columns
 * less the rows not folded into them yet (ledgerOf) and what devices hold (`held`). Applied once (the runs module's writeWithDriver
 * settles a commit of unknown outcome from the journal before it would apply the write again).
 */
export async function reserveFromLedger(
  tx: Tx,
  r: { id: string; agentId: string; amount: number; minimum: number; runId: string; stepId: string; at: number },
): Promise<number | null> {
  // floor(x) for x >= 0 on both engines: CAST truncates on SQLite and rounds on PostgreSQL. What is left
  // is computed once, in a subquery of its own kept apart by its LIMIT (the ledger row is one at most):
  // without it both engines flatten it into the expressions that use it and sum the rows again for each.
  // The sum is a scalar subquery read from team_reservations_open alone (no GROUP BY: on SQLite a
  // grouped join costs a sorter, ~100 µs a call, more than the rest of the step's statements together).
  const row = await tx.get(
    `INSERT INTO team_reservations (reservation_id, agent_id, amount, actual, run_id, step_id, created_at, committed_at, folded)
     SELECT ?, g.agent_id, CASE WHEN g.left_tokens < ? THEN g.left_tokens ELSE ? END, NULL, ?, ?, ?, NULL, 0
     FROM (SELECT f.agent_id, CAST(f.left_raw AS BIGINT) - CASE WHEN CAST(f.left_raw AS BIGINT) > f.left_raw THEN 1 ELSE 0 END AS left_tokens
           FROM (SELECT l.agent_id,
                   l.budget_limit - l.reserved - l.held - l.spent - COALESCE((SELECT SUM(CASE WHEN x.committed_at IS NULL THEN x.amount ELSE x.actual END)
                     FROM team_reservations x WHERE x.agent_id = l.agent_id AND x.folded = 0), 0) AS left_raw
                 FROM team_ledgers l
                 WHERE l.agent_id = ?
                 LIMIT 1) f) g
     WHERE g.left_tokens >= ? AND g.left_tokens > 0
     ON CONFLICT (reservation_id) DO NOTHING RETURNING amount`,
    [r.id, r.amount, r.amount, r.runId, r.stepId, r.at, r.agentId, r.minimum],
  );
  return row ? num(row, 'amount') : null;
}

// ---------------------------------------------------------------- budgets devices hold (holds.ts)

/** What a device holds of an agent's ledger: handed out (allotted), charged by its journals, released by an operator. */
export interface LedgerHold {
  device_id: string;
  agent_id: string;
  allotted: number;
  charged: number;
  released: number;
  until_at: number;
  updated_at: number;
}

const HOLD_COLUMNS = 'device_id, agent_id, allotted, charged, released, until_at, updated_at';

const decodeHold = (r: Row): LedgerHold => ({
  device_id: str(r, 'device_id'),
  agent_id: str(r, 'agent_id'),
  allotted: num(r, 'allotted'),
  charged: num(r, 'charged'),
  released: num(r, 'released'),
  until_at: num(r, 'until_at'),
  updated_at: num(r, 'updated_at'),
});

/** A device's holds, by agent id. */
export async function holdsOfDevice(db: Reader, deviceId: string): Promise<LedgerHold[]> {
  return (await db.all(`SELECT ${HOLD_COLUMNS} FROM team_ledger_holds WHERE device_id = ? ORDER BY agent_id`, [deviceId])).map(decodeHold);
}

/**
 * Adds `held` tokens to the ledger's `held` column, only while it still has `grant` left (its columns, its
 * unfolded reservations and what devices hold already): false when it has not.
 */
export async function holdOnLedger(tx: Tx, agentId: string, held: number, grant: number): Promise<boolean> {
  const r = await tx.run(
    `UPDATE team_ledgers SET held = held + ?
      WHERE agent_id = ? AND budget_limit - reserved - held - spent - COALESCE((SELECT SUM(CASE WHEN x.committed_at IS NULL THEN x.amount ELSE x.actual END)
        FROM team_reservations x WHERE x.agent_id = team_ledgers.agent_id AND x.folded = 0), 0) >= ?`,
    [held, agentId, grant],
  );
  return r.changes === 1;
}

/** Adds `grant` to a device's hold of an agent (a row when it has none), its end at least `until`. */
export async function addToHold(tx: Tx, deviceId: string, agentId: string, grant: number, until: number, at: number): Promise<void> {
  await tx.run(
    `INSERT INTO team_ledger_holds (${HOLD_COLUMNS}) VALUES (?, ?, ?, 0, 0, ?, ?)
      ON CONFLICT (device_id, agent_id) DO UPDATE SET allotted = team_ledger_holds.allotted + excluded.allotted,
        until_at = CASE WHEN excluded.until_at > team_ledger_holds.until_at THEN excluded.until_at ELSE team_ledger_holds.until_at END,
        updated_at = excluded.updated_at`,
    [deviceId, agentId, grant, until, at],
  );
}

/** Rewrites what a hold was charged and released (the caller computed them from the row it read in this transaction). */
export async function setHold(tx: Tx, h: LedgerHold): Promise<void> {
  await tx.run('UPDATE team_ledger_holds SET charged = ?, released = ?, updated_at = ? WHERE device_id = ? AND agent_id = ?', [
    h.charged,
    h.released,
    h.updated_at,
    h.device_id,
    h.agent_id,
  ]);
}

/** Takes `unheld` out of the ledger's `held` (never below 0) and adds `spent` to its spent. */
export async function settleOnLedger(tx: Tx, agentId: string, unheld: number, spent: number): Promise<void> {
  await tx.run('UPDATE team_ledgers SET held = CASE WHEN held - ? < 0 THEN 0 ELSE held - ? END, spent = spent + ? WHERE agent_id = ?', [
    unheld,
    unheld,
    spent,
    agentId,
  ]);
}

/** The reservations made for a run so far (open or committed), by step id: the model calls it issued. */
export async function reservationsByStep(db: Reader, runId: string): Promise<Map<string, Set<string>>> {
  const out = new Map<string, Set<string>>();
  for (const r of await db.all('SELECT reservation_id, step_id FROM team_reservations WHERE run_id = ?', [runId])) {
    const step = str(r, 'step_id');
    out.set(step, (out.get(step) ?? new Set<string>()).add(str(r, 'reservation_id')));
  }
  return out;
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

/** The amount reservation `id` holds, or null when there is none (reserveFromLedger refused it). */
export async function reservedAmount(db: Reader, id: string): Promise<number | null> {
  const r = await db.get('SELECT amount FROM team_reservations WHERE reservation_id = ?', [id]);
  return r ? num(r, 'amount') : null;
}

/**
 * commitReservation for a reservation reserveFromLedger made (a row of its own, never folded while
 * open: foldLedgers folds committed rows only), in its one statement and nothing after it: the
 * runs' journal append sends it together with its COMMIT (StagedWrite.atOnce). False when it was
 * committed already or is unknown.
 */
export async function commitOwnReservation(tx: Tx, id: string, actual: number, at: number): Promise<boolean> {
  const r = await tx.get(
    'UPDATE team_reservations SET actual = ?, committed_at = ? WHERE reservation_id = ? AND committed_at IS NULL AND folded = 0 RETURNING reservation_id',
    [actual, at, id],
  );
  return r !== undefined;
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
