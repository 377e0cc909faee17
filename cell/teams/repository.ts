/**
 * What the three repositories of Agent Teams share (resources/, formations/,
 * crew-runs/): the checks of stored bodies, and the totals of the module's
 * paged lists. Statements stay in the dialect both engines run (docs/storage.md).
 */
import { authoritySchema } from '../../core/authority/schema.ts';
import type { AuthorityEnvelope } from '../../core/authority/envelope.ts';
import { count } from '../store/decode.ts';
import type { Reader } from '../store/types.ts';

// ---------------------------------------------------------------- checks of stored bodies

export function bad(what: string): TypeError {
  return new TypeError(`store row: not ${what}`);
}

export function isAuthority(v: unknown): v is AuthorityEnvelope {
  return authoritySchema.safeParse(v).success;
}

export const isStringArray = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');
export const isStringOrNull = (v: unknown): v is string | null => v === null || typeof v === 'string';

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
