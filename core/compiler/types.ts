/**
 * Inputs and result of the formation compiler (core/compiler/compile.ts).
 *
 * The teams resources map onto these: a formation row, its billets, and (for a
 * crew) the agent bound to each billet. Everything here is plain JSON.
 */
import type { CoordinationPolicy, Graph, GraphLimits, LeafSpec } from '../engine/types.ts';
import type { JsonObject } from '../journal/record.ts';
import type { AuthorityEnvelope } from '../authority/envelope.ts';
import type { RetryPolicy } from '../engine/policy.ts';
import type { ToolChoice } from '../engine/tool-choice.ts';

/** Authority envelope as authored (blueprint authority_template, billet authority_cap): core/authority/envelope.ts. */
export type AuthorityInput = AuthorityEnvelope;

/**
 * Optional extra stages around the team (before its entry: `pre`; after its exit: `post`),
 * so a formation can use the other executors: gate, human_approval, transform, timer,
 * conditional (false skips everything after it), tool, skill, map, loop.
 */
export type StageSpec =
  | { kind: 'gate'; config: JsonObject }
  | { kind: 'human_approval'; config: JsonObject }
  | { kind: 'transform'; config: JsonObject }
  | { kind: 'timer'; config: JsonObject }
  | { kind: 'conditional'; config: JsonObject }
  | { kind: 'tool'; seat?: string; config: JsonObject }
  | { kind: 'skill'; seat?: string; config: JsonObject }
  | { kind: 'map'; config: JsonObject & { body?: LeafSpec } }
  | { kind: 'loop'; config: JsonObject & { body?: LeafSpec } };

export interface FormationInput {
  name: string;
  /** Default sequential. */
  coordination_policy?: CoordinationPolicy;
  /** For consensus: majority (default) or unanimity. */
  consensus_mode?: 'majority' | 'unanimity';
  /** Per-run and per-seat step limits and model defaults (defaults in DEFAULT_LIMITS). */
  limits?: Partial<GraphLimits>;
  /** Topology labels the executing cell must carry (placement hard constraints). */
  topology?: Record<string, string>;
  pre?: StageSpec[];
  post?: StageSpec[];
  /** Instruction given to every seat's agent (AgentConfig.prompt). */
  prompt?: string;
}

export interface BilletInput {
  id: string;
  role_label: string;
  required_skills?: string[];
  reports_to?: string | null;
  authority_cap: AuthorityInput;
  /**
   * Order of the seat in a sequential pipeline (and in fan-outs): billets are ordered by
   * (position, id). The cell sets it to the billet's insertion index. Part of the hash.
   */
  position?: number;
  /** Each model and tool call of the seat's steps is cancelled after this (core/engine/policy.ts). Part of the hash when present. */
  timeout_ms?: number;
  /** Retry policy of the seat's calls (core/engine/policy.ts). Part of the hash when present. */
  retry?: RetryPolicy;
  /**
   * Whether the first model call of the seat's agent step may, must or must not call a tool
   * (core/engine/tool-choice.ts). Part of the hash when present and not `auto`.
   */
  tool_choice?: ToolChoice;
}

/** The agent a crew binds to a billet. */
export interface SeatBinding {
  agent_id: string;
  /** The agent's (blueprint's) authority_template; the seat's authority is this ∩ the billet cap. Absent = the cap itself. */
  authority?: AuthorityInput;
  model?: string | null;
  system_prompt?: string | null;
}

/** Compile error codes (values, never thrown). The cell maps them to invalid_request with details.reason = code. */
export type CompileErrorCode =
  | 'invalid_formation'
  | 'empty_formation'
  | 'too_many_billets'
  | 'duplicate_billet'
  | 'unknown_reports_to'
  | 'reports_to_cycle'
  | 'root_count'
  | 'over_authority'
  | 'unbound_seat';

export type CompileResult =
  | { ok: true; graph: Graph; graphHash: string; formationHash: string }
  | { ok: false; code: CompileErrorCode; message: string; details: JsonObject };
