/**
 * Shapes shared across Agent Teams: who uses a resource (the users named by a
 * refusal, and the hook other modules report their users of a crew through).
 */
import type { Reader } from '../store/types.ts';

export type UsedBy = Record<string, string[]>;

/** A job definition that names a crew (team) or pins its graph (agent); the jobs module reports them. */
export interface CrewDefinitionUser {
  schedule_id: string;
  job_type: 'team' | 'agent';
}

export type CrewUsersHook = (crew: { crew_id: string; graph_hash: string | null }, db: Reader) => Promise<CrewDefinitionUser[]>;
