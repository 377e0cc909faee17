/**
 * Tables of the Agent Teams resources. Ids are `<prefix>_` + 80 random bits
 * (cell/ids.ts). The approval tables (teams-010, teams-011) belong to the
 * runs module now (cell/runs/schema.ts), under the same migration ids.
 */
import { isoTime } from '../../core/iso-time.ts';
import type { Migration } from '../store/types.ts';

export const TEAMS_MIGRATIONS: readonly Migration[] = [
  {
    id: 'teams-001-skills',
    sql: `CREATE TABLE team_skills (skill_id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, skill_kind TEXT NOT NULL,
      model_preference TEXT, definition TEXT, created_at INTEGER NOT NULL, created_by TEXT NOT NULL)`,
  },
  {
    id: 'teams-002-blueprints',
    sql: `CREATE TABLE team_blueprints (blueprint_id TEXT PRIMARY KEY, name TEXT NOT NULL, body TEXT NOT NULL,
      created_at INTEGER NOT NULL, created_by TEXT NOT NULL)`,
  },
  {
    id: 'teams-003-agents',
    sql: `CREATE TABLE team_agents (agent_id TEXT PRIMARY KEY, name TEXT NOT NULL, source TEXT NOT NULL, blueprint_id TEXT,
      body TEXT NOT NULL, created_at INTEGER NOT NULL, created_by TEXT NOT NULL)`,
  },
  {
    id: 'teams-004-ledgers',
    sql: `CREATE TABLE team_ledgers (agent_id TEXT PRIMARY KEY, budget_limit REAL NOT NULL, reserved REAL NOT NULL DEFAULT 0,
      spent REAL NOT NULL DEFAULT 0, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, updated_by TEXT NOT NULL)`,
  },
  {
    id: 'teams-005-reservations',
    sql: `CREATE TABLE team_reservations (reservation_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, amount REAL NOT NULL,
      actual REAL, run_id TEXT NOT NULL, step_id TEXT NOT NULL, created_at INTEGER NOT NULL, committed_at INTEGER)`,
  },
  {
    id: 'teams-006-formations',
    sql: `CREATE TABLE team_formations (formation_id TEXT PRIMARY KEY, name TEXT NOT NULL, body TEXT NOT NULL,
      created_at INTEGER NOT NULL, created_by TEXT NOT NULL, updated_at INTEGER NOT NULL)`,
  },
  {
    id: 'teams-007-billets',
    sql: `CREATE TABLE team_billets (billet_id TEXT PRIMARY KEY, formation_id TEXT NOT NULL, position INTEGER NOT NULL, body TEXT NOT NULL,
      created_at INTEGER NOT NULL, created_by TEXT NOT NULL)`,
  },
  {
    id: 'teams-008-crews',
    sql: `CREATE TABLE team_crews (crew_id TEXT PRIMARY KEY, formation_id TEXT NOT NULL, body TEXT NOT NULL,
      created_at INTEGER NOT NULL, created_by TEXT NOT NULL)`,
  },
  {
    id: 'teams-009-contracts',
    sql: `CREATE TABLE team_contracts (contract_id TEXT PRIMARY KEY, name TEXT NOT NULL, body TEXT NOT NULL,
      created_at INTEGER NOT NULL, created_by TEXT NOT NULL)`,
  },
  {
    // Formations are versioned (docs/agent-teams.md "Versions"): every change of the formation
    // or of a billet writes a new version; old versions stay as they were. A version's body is
    // in team_formation_versions; a billet row is valid from version_from until version_to
    // (exclusive; NULL = still current), so a change of one billet writes one row. Existing
    // formations become version 1 with the billets they have, existing crews pin it, and
    // team_billets (one row per billet, unversioned) goes. The head row of team_formations
    // keeps the latest version's name and body. Every run of a crew stores the graph it
    // executed (team_graphs, by graph hash: the runs of one crew share it).
    id: 'teams-012-formation-versions',
    sql: `ALTER TABLE team_formations ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
    CREATE TABLE team_formation_versions (formation_id TEXT NOT NULL, version INTEGER NOT NULL, body TEXT NOT NULL,
      change_kind TEXT NOT NULL, change_billet TEXT, created_at INTEGER NOT NULL, created_by TEXT NOT NULL,
      PRIMARY KEY (formation_id, version));
    INSERT INTO team_formation_versions (formation_id, version, body, change_kind, change_billet, created_at, created_by)
      SELECT formation_id, 1, body, 'migrated', NULL, updated_at, created_by FROM team_formations;
    CREATE TABLE team_billet_versions (billet_id TEXT NOT NULL, formation_id TEXT NOT NULL, version_from INTEGER NOT NULL,
      version_to INTEGER, position INTEGER NOT NULL, body TEXT NOT NULL, created_at INTEGER NOT NULL, created_by TEXT NOT NULL,
      updated_at INTEGER NOT NULL, updated_by TEXT NOT NULL, PRIMARY KEY (billet_id, version_from));
    CREATE INDEX team_billet_versions_formation ON team_billet_versions (formation_id, version_from);
    INSERT INTO team_billet_versions (billet_id, formation_id, version_from, version_to, position, body, created_at, created_by, updated_at, updated_by)
      SELECT billet_id, formation_id, 1, NULL, position, body, created_at, created_by, created_at, created_by FROM team_billets;
    DROP TABLE team_billets;
    ALTER TABLE team_crews ADD COLUMN formation_version INTEGER NOT NULL DEFAULT 1;
    CREATE INDEX team_crews_formation ON team_crews (formation_id);
    CREATE TABLE team_graphs (graph_hash TEXT PRIMARY KEY, graph TEXT NOT NULL, created_at INTEGER NOT NULL);`,
  },
  {
    // Budget reservations as per-run shares (resources/agents.ts): a reservation made since this migration
    // (folded = 0) is counted from its own row; a fold adds committed ones to the ledger's spent
    // off the runs' path. Older rows (folded = 1) are counted in the ledger's columns already.
    id: 'teams-013-ledger-shares',
    sql: `ALTER TABLE team_reservations ADD COLUMN folded INTEGER NOT NULL DEFAULT 1;
    CREATE INDEX team_reservations_unfolded ON team_reservations (agent_id, folded);`,
  },
  {
    // A run's reservations are read by run (its tokens on every crew-run GET, its open ones on a
    // takeover): without an index each read scanned every reservation ever made.
    id: 'teams-014-reservations-by-run',
    sql: 'CREATE INDEX team_reservations_run ON team_reservations (run_id)',
  },
  {
    // The reservations not folded into their ledger yet, with the columns the ledger's figures sum:
    // a run's reservation (reserveFromLedger), a ledger's read and a fold read this index alone, and
    // it holds only the unfolded rows (a few seconds' worth), not every reservation ever made.
    id: 'teams-015-open-reservations',
    sql: `CREATE INDEX team_reservations_open ON team_reservations (agent_id, committed_at, amount, actual) WHERE folded = 0;
    DROP INDEX team_reservations_unfolded;`,
  },
  {
    // Budgets a device holds (resources/holds.ts): a crew bundle hands a device part of an agent's ledger,
    // taken out of what the ledger has left until the device's journals charge it or an operator releases
    // it. `held` on the ledger is the sum of the outstanding holds (allotted - charged - released), kept
    // apart from `reserved` (whose legacy commits clamp at 0 and could eat a hold).
    id: 'teams-016-ledger-holds',
    sql: `CREATE TABLE team_ledger_holds (device_id TEXT NOT NULL, agent_id TEXT NOT NULL, allotted INTEGER NOT NULL DEFAULT 0,
      charged INTEGER NOT NULL DEFAULT 0, released INTEGER NOT NULL DEFAULT 0, until_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
      PRIMARY KEY (device_id, agent_id));
    ALTER TABLE team_ledgers ADD COLUMN held INTEGER NOT NULL DEFAULT 0;`,
  },
];

/** The kinds of a skill (`team_skills.skill_kind`). */
export const SKILL_KINDS = ['prompt', 'tool', 'chain', 'model', 'evaluator', 'transformer', 'classifier', 'extractor'] as const;
export type SkillKindName = (typeof SKILL_KINDS)[number];

/** A time (ms since the epoch) as ISO 8601 UTC, as the views show it (core/iso-time.ts). */
export const iso = (ms: number) => isoTime(ms);
