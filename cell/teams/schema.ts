/** Tables of the Agent Teams resources. Ids are `<prefix>_` + 80 random bits (cell/iam/ids.ts). */
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
    id: 'teams-010-approvals',
    sql: `CREATE TABLE team_approvals (run_id TEXT NOT NULL, step_id TEXT NOT NULL, principal TEXT NOT NULL, decision TEXT NOT NULL,
      comment TEXT, at INTEGER NOT NULL, PRIMARY KEY (run_id, step_id, principal))`,
  },
  {
    id: 'teams-011-approval-requests',
    sql: `CREATE TABLE team_approval_requests (run_id TEXT NOT NULL, step_id TEXT NOT NULL, body TEXT NOT NULL, at INTEGER NOT NULL,
      PRIMARY KEY (run_id, step_id))`,
  },
];

/** Parses a JSON column. */
export function parseBody<T>(s: string): T {
  return JSON.parse(s) as T;
}

export const iso = (ms: number) => new Date(ms).toISOString();
