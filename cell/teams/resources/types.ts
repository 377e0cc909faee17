/**
 * The shapes of the resources of Agent Teams: skills, blueprints, governing
 * contracts, agents and their budget ledgers.
 */
import type { AuthorityEnvelope } from '../../../core/authority/envelope.ts';
import type { SkillKindName } from '../schema.ts';

export interface Skill {
  skill_id: string;
  name: string;
  skill_kind: SkillKindName;
  model_preference: string | null;
  definition: Record<string, unknown> | null;
  created_at: number;
  created_by: string;
}

export interface BlueprintBody {
  name: string;
  role_label: string;
  system_prompt_ref: string | null;
  model_preference: string | null;
  required_skills: string[];
  authority_template: AuthorityEnvelope;
  scope: string;
}

export interface Blueprint extends BlueprintBody {
  blueprint_id: string;
  created_at: number;
  created_by: string;
}

export interface ContractRule {
  name: string;
  expr: string;
}

export interface Contract {
  contract_id: string;
  name: string;
  description: string | null;
  rules: ContractRule[];
  created_at: number;
  created_by: string;
}

export interface AgentBody {
  source: 'blueprint' | 'scratch';
  blueprint_id: string | null;
  role_label: string;
  provider_id: string | null;
  model_preference: string | null;
  system_prompt: string | null;
  authority: AuthorityEnvelope;
}

export interface Agent extends AgentBody {
  agent_id: string;
  name: string;
  created_at: number;
  created_by: string;
}

export interface Ledger {
  agent_id: string;
  budget_limit: number;
  reserved: number;
  /** What devices hold of it (the outstanding holds: resources/holds.ts), out of what is left. */
  held: number;
  spent: number;
  created_at: number;
  updated_at: number;
  updated_by: string;
}
