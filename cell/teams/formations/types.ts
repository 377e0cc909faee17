/**
 * The shapes of formations (and the coordination policies), billets and crews.
 */
import type { AuthorityEnvelope } from '../../../core/authority/envelope.ts';
import type { RetryPolicy } from '../../../core/engine/policy.ts';
import type { ToolChoice } from '../../../core/engine/tool-choice.ts';

export const POLICIES = ['sequential', 'parallel', 'consensus', 'manager-delegates'] as const;

export type Policy = (typeof POLICIES)[number];

/** What the operator authored (mirrors core/compiler FormationInput). */
export interface FormationBody {
  name: string;
  coordination_policy: Policy;
  consensus_mode?: 'majority' | 'unanimity';
  limits?: Record<string, number>;
  topology?: Record<string, string>;
  pre?: unknown[];
  post?: unknown[];
  prompt?: string;
  /** Workspace whose storage the crew's tools use by default. */
  workspace_id?: string;
  /** What the team is for, in a sentence or two: the description of its crews' MCP tools (cell/mcp). */
  purpose?: string;
  /**
   * The input its crews' runs take (core/input-schema: a JSON Schema subset), checked when a run starts
   * (400 invalid_input) and published as the crews' MCP tool input schema. Not part of the graph.
   */
  input_schema?: Record<string, unknown>;
}

export interface Formation extends FormationBody {
  formation_id: string;
  /** The version this object shows (the latest, unless read at a version). */
  version: number;
  created_at: number;
  created_by: string;
  updated_at: number;
}

export interface BilletBody {
  role_label: string;
  required_skills: string[];
  reports_to: string | null;
  authority_cap: AuthorityEnvelope;
  /** Step policy of the seat's calls (core/engine/policy.ts); absent when not authored. */
  timeout_ms?: number;
  retry?: RetryPolicy;
  /** Whether the seat's first model call may, must or must not call a tool (core/engine/tool-choice.ts); absent: auto. */
  tool_choice?: Exclude<ToolChoice, 'auto'>;
}

export interface Billet extends BilletBody {
  billet_id: string;
  formation_id: string;
  position: number;
  created_at: number;
  created_by: string;
  /** When and by whom this billet was last changed (its creation, until then). */
  updated_at: number;
  updated_by: string;
}

export interface CrewBody {
  name: string;
  assignments: Record<string, string>;
  workspace_id: string;
}

export interface Crew extends CrewBody {
  crew_id: string;
  formation_id: string;
  /** The version of the formation the crew runs (upgrading is explicit). */
  formation_version: number;
  created_at: number;
  created_by: string;
}
