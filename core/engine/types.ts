/**
 * Types of the run engine: the execution graph the compiler produces, the
 * fourteen executor kinds and their configs, and the ports through which the
 * engine touches the world (model, tools, approvals, budget, contracts,
 * journal, clock, cancellation, recorded outputs). The cell and the edge
 * implement the ports; the engine itself is pure and deterministic: given the
 * same graph, input, port answers and clock readings, it takes the same steps
 * with the same step ids in the same order and writes the same journal.
 *
 * Step ids (stable, derived from node ids; `<n>` is a graph node id):
 *   `run`                 the run_started record
 *   `<n>`                 node n completed (kind `step`, or `decision` for gate,
 *                         human_approval, delegate, consensus)
 *   `<n>/model/<r>`       the r-th model call of agent node n (r from 0)
 *   `<n>/tool/<r>.<i>`    the i-th tool call requested in model round r
 *   `<n>/since`, `<n>/due` the first-seen time of an approval / due time of a timer
 *   `<n>[<i>]`            the i-th item of map node n (sub-steps nest: `<n>[<i>]/model/0`)
 *   `<n>#<k>`             the k-th iteration of loop node n
 * Every one of these is "memoized": before running it the engine asks
 * `ports.recorded(stepId)`; a recorded output is reused and nothing is called
 * again (recovery never re-executes a completed step, never calls a model twice).
 * With `ports.intents`, each model and tool call is preceded by an `intent`
 * record under the call's step id (a model call's is its budget reservation
 * instead when the budget port counts them: BudgetPort.reserve `issued`),
 * so a call that was in flight when a drive
 * stopped is known, re-issued at most once, and flagged (`data.reissued`) —
 * unless it is a side-effecting tool call not declared idempotent: that one is
 * not issued blindly again, the run waits `outcome_unknown` until an operator
 * resolves it (`ports.outcomes`; internal/effects.ts).
 */
import type { JournalKind, JsonObject } from '../journal/record.ts';
import type { StepPolicy } from './policy.ts';
import type { ToolChoice } from './tool-choice.ts';
import type { WireReason } from '../reasons.ts';

// ---------------------------------------------------------------- graph

/** Version of the graph format (part of the graph hash). */
export const GRAPH_FORMAT_VERSION = 1;

/** The fourteen registered executors. */
export const EXECUTOR_KINDS = [
  'agent',
  'tool',
  'skill',
  'conditional',
  'parallel',
  'join',
  'consensus',
  'human_approval',
  'gate',
  'delegate',
  'map',
  'loop',
  'transform',
  'timer',
] as const;
export type ExecutorKind = (typeof EXECUTOR_KINDS)[number];

export type CoordinationPolicy = 'sequential' | 'parallel' | 'consensus' | 'manager-delegates';

/**
 * Authority envelope of a seat (spec: authority envelope). The graph carries the
 * effective authority: the agent's blueprint authority intersected with the billet cap.
 */
export interface SeatAuthority {
  allowed_tools: string[];
  clearance_level: number;
  /**
   * Least to most autonomous (core/authority/envelope.ts): `plan` no tool runs (refused:
   * tool_forbidden_by_mode); `ask` (default) every tool call waits for a human approval;
   * `auto-read` read-only tools run, side-effecting ones wait; `auto` granted tools run.
   * The floor (grant, value gate, egress, clearance, budget) applies in every mode.
   */
  permission_mode: PermissionMode;
  data_grant_ids: string[];
  egress_allowlist: string[];
  compartments: string[];
  /** Contracts every tool call is evaluated against (the value gate); sorted, usually zero or one. */
  governing_contract_ids: string[];
  /** Ceiling in budget units (tokens: input + output) for this seat in one run; null = no seat ceiling (the ledger still applies). */
  budget_ceiling: number | null;
}
export type PermissionMode = 'plan' | 'ask' | 'auto-read' | 'auto';

/** A seat (billet) of the graph and the agent bound to it (null when compiled without a crew). */
export interface SeatSpec {
  billet_id: string;
  role_label: string;
  required_skills: string[];
  reports_to: string | null;
  agent_id: string | null;
  /** Model identifier preferred for this seat (agent / blueprint model_preference), or null for the provider default. */
  model: string | null;
  system_prompt: string | null;
  authority: SeatAuthority;
}

/** A leaf executor usable as the body of `map` and `loop`. */
export type LeafSpec =
  | { kind: 'agent'; seat: string; config: AgentConfig }
  | { kind: 'tool'; seat?: string; config: ToolConfig }
  | { kind: 'skill'; seat?: string; config: SkillConfig }
  | { kind: 'transform'; config: TransformConfig };

/** Agent, tool and skill steps take a step policy (timeout_ms, retry: policy.ts). */
export interface AgentConfig extends StepPolicy {
  /** Instruction placed before the input in the user message. */
  prompt?: string;
  /** Tokens reserved per model call (default limits.default_max_tokens). */
  max_tokens?: number;
  /** Bound on model rounds that request tools (default limits.max_tool_rounds). */
  max_tool_rounds?: number;
  /** Whether the step's first model call may, must or must not call a tool (tool-choice.ts); absent: auto. */
  tool_choice?: Exclude<ToolChoice, 'auto'>;
}
export interface ToolConfig extends StepPolicy {
  tool: string;
  /** Static arguments; when absent and `args_expr` is absent, an object input is the arguments. */
  args?: JsonObject;
  /** CEL over `input`, `context` producing a map of arguments. */
  args_expr?: string;
}
export type SkillKind = 'prompt' | 'tool' | 'chain' | 'model' | 'evaluator' | 'transformer' | 'classifier' | 'extractor';
export interface SkillSpec {
  name: string;
  skill_kind: SkillKind;
  model_preference?: string | null;
  /**
   * prompt/model/evaluator/classifier/extractor: `{ prompt?: string, labels?: string[] }` (model call by the seat's agent; classifier answers one of labels);
   * tool: `{ tool: string, args?: object }`; transformer: `{ expr: string }` (CEL);
   * chain: `{ steps: SkillSpec[] }` run in order, each output feeding the next.
   */
  definition?: JsonObject;
}
export interface SkillConfig extends StepPolicy {
  skill: SkillSpec;
}
export interface ConditionalConfig {
  /** CEL bool over `input`, `context`. true routes the edges with when 'then' (or no when), false those with when 'else'. */
  expr: string;
}
export interface JoinConfig {
  /** `object` (default): { [pred node id]: output }; `list`: outputs in predecessor order. Skipped predecessors are absent. */
  mode?: 'object' | 'list';
}
export interface ConsensusConfig {
  /** majority: strictly more than half agree; unanimity: all agree. A tie or no majority is a refusal. */
  mode: 'majority' | 'unanimity';
  /** How answers are compared: `normalized` (default: trimmed, lower-cased, inner whitespace collapsed) or `exact`. */
  compare?: 'normalized' | 'exact';
}
export interface HumanApprovalConfig {
  /** `quorum`: k distinct approvers from `approvers` (any principal when the list is empty); `two_person`: two distinct principals, neither the run's requester. */
  rule: 'quorum' | 'two_person';
  approvers?: string[];
  quorum?: number;
  /** The step fails closed (refused, approval_timeout) this long after it was first reached. */
  timeout_ms: number;
  prompt?: string;
}
export interface GateRule {
  name: string;
  /** CEL bool; over `input`, `context` for the gate executor, over `tool`, `args`, `authority`, `context` for the value gate. */
  expr: string;
}
export interface GateConfig {
  rules: GateRule[];
  /** A governing contract whose rules are evaluated too (through ports.contracts). */
  contract_id?: string | null;
}
export interface DelegateConfig {
  /** The manager's seat; its agent chooses. */
  seat: string;
  /** Choice keys (report billet ids); the out-edge whose `when` equals the choice is taken. */
  reports: string[];
}
export interface MapConfig {
  /** CEL over `input`, `context` producing a list. */
  over: string;
  /** A longer list is refused (map_too_large), never truncated. */
  max_items: number;
  body: LeafSpec;
}
export interface LoopConfig {
  body: LeafSpec;
  /** CEL bool over `input` (the iteration's input), `output` (its output), `iteration` (0-based, double), `context`. */
  until: string;
  max_iterations: number;
  /** What happens when max_iterations pass without `until`: refuse (default, loop_limit_exceeded) or complete with the last output. */
  on_limit?: 'refuse' | 'complete';
}
export interface TransformConfig {
  /** CEL over `input`, `context`; its value (as JSON) is the output. */
  expr: string;
}
export interface TimerConfig {
  delay_ms: number;
}

/** A node of the execution graph. Configs by kind are the interfaces above. */
export type GraphNode =
  | { id: string; kind: 'agent'; seat: string; config: AgentConfig }
  | { id: string; kind: 'tool'; seat?: string; config: ToolConfig }
  | { id: string; kind: 'skill'; seat?: string; config: SkillConfig }
  | { id: string; kind: 'conditional'; config: ConditionalConfig }
  | { id: string; kind: 'parallel'; config: Record<string, never> }
  | { id: string; kind: 'join'; config: JoinConfig }
  | { id: string; kind: 'consensus'; config: ConsensusConfig }
  | { id: string; kind: 'human_approval'; config: HumanApprovalConfig }
  | { id: string; kind: 'gate'; config: GateConfig }
  | { id: string; kind: 'delegate'; seat: string; config: DelegateConfig }
  | { id: string; kind: 'map'; config: MapConfig }
  | { id: string; kind: 'loop'; config: LoopConfig }
  | { id: string; kind: 'transform'; config: TransformConfig }
  | { id: string; kind: 'timer'; config: TimerConfig };

/**
 * A data edge. A node runs once every predecessor has settled; it is skipped when
 * no incoming edge is live. An edge is live when its source ran and either has no
 * `when` or its `when` equals the source's route (conditional: 'then' | 'else';
 * delegate: the chosen report).
 */
export interface GraphEdge {
  from: string;
  to: string;
  when?: string;
}

export interface GraphLimits {
  /** Steps (memoized step executions, replayed ones included) per run. */
  max_steps: number;
  /** Steps attributed to one seat (its model calls, tool calls and nodes) per run. */
  max_steps_per_seat: number;
  max_tool_rounds: number;
  default_max_tokens: number;
}

/** The execution graph. Nodes are listed in the engine's execution order (a stable topological order). */
export interface Graph {
  v: 1;
  formation_hash: string;
  policy: CoordinationPolicy;
  entry: string;
  exit: string;
  nodes: GraphNode[];
  edges: GraphEdge[];
  seats: Record<string, SeatSpec>;
  limits: GraphLimits;
  /** Hard placement constraints (core/placement.ts): the highest seat clearance and the formation's topology labels. */
  placement: { clearance: number; topology: Record<string, string> };
  /**
   * The pin (content hash of the reviewed definition, core/catalog/pin.ts) of every imported tool the
   * graph can call, by tool name; absent when it calls none (every graph of built-in tools). The tools
   * port refuses a call whose tool's live definition is not this one (`tool_definition_changed`).
   */
  tool_pins?: Record<string, string>;
}

// ---------------------------------------------------------------- ports

export interface ToolCall {
  id: string;
  name: string;
  arguments: JsonObject;
}
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  tool_call_id?: string;
  tool_calls?: ToolCall[];
}
/** A condition on one string argument of a call: its value is one of `values` (compared exactly). */
export interface ArgumentIn {
  argument: string;
  values: string[];
}
export interface ToolDescriptor {
  name: string;
  description: string;
  /**
   * True when the tool changes something outside the run (kv.put, http.request): `auto-read` mode waits
   * for approval, and each call gets an effect key (ToolCallContext.effect_key, effect-key.ts).
   */
  side_effects: boolean;
  /**
   * Whether a side-effecting call may be issued again with its effect key when its outcome was lost
   * (a crash between its dispatch and its result) and have the effect of one call: every call
   * (`true`: kv.put writes its key), the calls whose argument is one of the values (http.request:
   * its method is GET, HEAD, PUT or DELETE, RFC 9110 §9.2.2), or none (absent, `false`): such a
   * call is never issued blindly again; the run waits `outcome_unknown` for an operator.
   */
  idempotent?: boolean | ArgumentIn;
  /** JSON Schema of the arguments. */
  parameters: JsonObject;
}
export interface ModelRequest {
  agent: { id: string; seat: string; model: string | null };
  messages: ChatMessage[];
  tools: ToolDescriptor[];
  max_tokens: number;
  /** The step's timeout: the port cancels the call after it and throws StepTimeout (core/engine/timeout.ts). */
  timeout_ms?: number;
  /**
   * Whether the model may (absent: auto), must (`required`, or one named tool: a catalog name of `tools`) or must
   * not (`none`) answer with a tool call (tool-choice.ts). A port that cannot make its model honour it refuses.
   */
  tool_choice?: Exclude<ToolChoice, 'auto'>;
}
/** Tokens a model call consumed: the prompt's (input) and the answer's (output). */
export interface ModelUsage {
  input_tokens: number;
  output_tokens: number;
}
export interface ModelResponse {
  content: string;
  tool_calls?: ToolCall[];
  usage: ModelUsage;
  /**
   * Tokens the port's own failed attempts consumed before this answer (a provider retried after part of
   * an answer had streamed): charged to the budget beside `usage`, which is this answer's alone.
   */
  failed_usage?: ModelUsage;
}
/**
 * A fragment of a model's answer as the provider produces it (live tokens; never journaled).
 * Without `tool_call` it continues the answer's text; with it, the arguments (JSON text) of
 * the answer's tool call at `tool_call.index`. `restart`: the provider began the answer over
 * (a retried request), so what streamed before is void.
 */
export interface ModelDelta {
  text: string;
  tool_call?: { index: number; id?: string; name?: string };
  restart?: boolean;
}
/** Options of one model call: `onDelta` receives the answer as it streams (a port that cannot stream never calls it). */
export interface ModelCallOptions {
  onDelta?: (d: ModelDelta) => void;
}
export interface ModelPort {
  /**
   * One chat completion. Throw EngineRefusal to refuse (e.g. posture), anything else fails the run (model_error).
   * A call that fails after the provider consumed tokens says so on the error it throws (`withConsumed`,
   * core/engine/budget.ts): the budget is charged them; otherwise the engine charges what streamed.
   */
  complete(req: ModelRequest, opts?: ModelCallOptions): Promise<ModelResponse>;
}

/**
 * A live fragment of a model step's answer, as the engine hands it to `ports.delta`: the step id
 * of the model call (its step record later carries the whole answer), the seat and its role label,
 * `index` = where `text` starts in the answer so far (UTF-16 code units: a reader keeps
 * `answer.slice(0, index) + text`; 0 again means the answer started over), and for tool-call
 * arguments the call's position, id and name.
 */
export interface StepDelta {
  step_id: string;
  seat: string;
  role_label: string;
  index: number;
  text: string;
  tool_call?: { index: number; id?: string; name?: string };
}

export interface ToolCallContext {
  run_id: string;
  step_id: string;
  seat: string | null;
  agent_id: string | null;
  /** The seat's effective authority (egress_allowlist, data_grant_ids, clearance are enforced by the tool port). */
  authority: SeatAuthority | null;
  /** The step's timeout: the port stops the call after it and throws StepTimeout. */
  timeout_ms?: number;
  /**
   * The call's effect key (effect-key.ts), for a side-effecting tool: the same on every issue of
   * this call, written in its `intent` record before it leaves. A tool that acts on another system
   * passes it on (http.request: `Idempotency-Key`; an MCP call: `_meta["dev.agent-cell/effect-key"]`).
   */
  effect_key?: string;
  /** The graph's pin of the tool (`Graph.tool_pins`), when it has one: the port refuses a live definition that differs. */
  tool_pin?: string;
}
export interface ToolsPort {
  /** The catalog entry, or undefined when the tool does not exist (refused: tool_unknown). */
  describe(name: string): ToolDescriptor | undefined;
  /** Runs the tool. Throw EngineRefusal (e.g. reason egress_denied) to refuse; any other throw fails the run (tool_error). Result must be JSON. */
  call(name: string, args: JsonObject, ctx: ToolCallContext): Promise<unknown>;
}

export interface ApprovalDecision {
  principal: string;
  decision: 'approve' | 'reject';
  at: number;
  /** The deciding chain: the principal, then the actors of the token it decided with (core/engine/approval-rule.ts). */
  chain?: string[];
  /** The digest of the step input the decision approved (absent: it approves nothing). */
  input_hash?: string | null;
  /** The decider's comment, kept with the decision. */
  comment?: string | null;
}
export interface ApprovalsPort {
  /** Decisions recorded so far for a step (human_approval node id, or a tool-call step id in `ask` mode). */
  decisions(stepId: string): Promise<ApprovalDecision[]>;
  /** Called each time the engine starts waiting on a step, so the cell can list it as pending (idempotent). */
  request?(
    stepId: string,
    ask: {
      kind: 'human_approval' | 'tool_call';
      rule: string;
      approvers: string[];
      quorum: number;
      prompt: string | null;
      due: number | null;
      /** The digest of the step input a decision approves (the journal's input hash for the step). */
      input_hash: string;
    },
  ): Promise<void>;
}

/**
 * An operator's resolution of a side-effecting call whose outcome was lost (the run waits
 * `outcome_unknown`): `retry` issues it again with the same effect key, `record` makes `result`
 * the call's result (the call is not issued), `fail` fails the run.
 */
export interface OutcomeResolution {
  resolution: 'retry' | 'record' | 'fail';
  /** The attempt whose outcome it resolves: the number of issues of the call found in flight. */
  attempt: number;
  /** The principal that resolved it. */
  by: string;
  at: number;
  /** `record`: the call's result (JSON). */
  result?: unknown;
}

export interface BudgetPort {
  /** True when a budget ledger is registered for the agent. Checked for every bound agent before the run's first step. */
  hasLedger(agentId: string): Promise<boolean>;
  /**
   * Reserves budget units before a model call: `amount`, or (given `minimum`) as much as is left
   * when that is at least `minimum` (core/engine/budget.ts grantTokens); `amount` in the answer is
   * what was reserved (absent: all of it). `ok: false` stops the agent with a refusal (budget_exceeded).
   *
   * `issued` (optional): how many reservations of this run's `ref.step_id` the port had made before
   * this one, in every drive so far, each made durable before its call could leave (a crash cannot
   * lose one). A port that answers it makes the reservation the model call's intent: the engine writes
   * no `intent` record before the call, and takes the call's earlier issues without a result
   * (`issued` minus the step's `attempt` records) as the calls found in flight (re-issued once and
   * flagged, never a third time, as with an intent). Absent: an `intent` record precedes the call.
   */
  reserve(
    agentId: string,
    amount: number,
    ref: { run_id: string; step_id: string },
    minimum?: number,
  ): Promise<{ ok: true; reservation_id: string; amount?: number; issued?: number } | { ok: false; reason: string }>;
  /**
   * Commits the actual usage of a reservation, releasing the rest: the answer's usage, or what a failed
   * call consumed (0 when it consumed nothing: core/engine/budget.ts `failedCallTokens`).
   */
  commit(reservationId: string, actual: number): Promise<void>;
}

export interface GoverningContract {
  id: string;
  rules: GateRule[];
}
export interface ContractsPort {
  get(id: string): Promise<GoverningContract | undefined>;
}

/** Fields the engine hands to the journal port; the port adds run_id, seq, prev_hash, signs (sealRecord) and persists. */
export interface JournalAppend {
  step_id: string;
  kind: JournalKind;
  graph_hash: string;
  input_hash: string;
  output_hash: string;
  at: number;
  data?: JsonObject;
}
export interface JournalPort {
  /**
   * Appends one record durably; resolves only when it is committed (the engine awaits it
   * before the next step). `payload` holds the step's input/output values: store them
   * beside the journal under `input_hash` / `output_hash` (content-addressed).
   */
  append(fields: JournalAppend, payload: { input: unknown; output: unknown }): Promise<void>;
}

/** A completed step as recorded in the journal (kind step or decision): its output and data. */
export interface RecordedStep {
  output: unknown;
  data?: JsonObject;
  /** The record's input hash (a reused approval stands only for the same input). */
  input_hash?: string;
}

export interface Clock {
  now(): number;
}

/** A span the engine's work runs in, as the tracer port hands it over. */
export interface TraceSpan {
  set(attributes: Record<string, string | number | boolean>): void;
  /** The step ended refused or failed, for this reason. */
  fail(reason: string): void;
  /** The step stopped without failing (it waits), whatever it threw. */
  ok(): void;
}
/**
 * Tracing of the run's steps (the cell: OpenTelemetry spans, docs/operations.md
 * "Traces"). Absent: the engine opens no span and pays nothing. The port
 * never changes what a step does or records.
 */
export interface TracerPort {
  /** Runs `fn` in a new span, child of the span the caller runs in, and ends it when `fn` settles. */
  span<T>(name: string, attributes: Record<string, string | number | boolean>, fn: (s: TraceSpan) => Promise<T>): Promise<T>;
}

export interface EnginePorts {
  model?: ModelPort;
  tools?: ToolsPort;
  approvals?: ApprovalsPort;
  /** Absent = no ledger for anyone: a run with a bound agent refuses (no_budget_ledger). */
  budget?: BudgetPort;
  contracts?: ContractsPort;
  /** Absent = journaling off (benchmarks, dry runs). */
  journal?: JournalPort;
  /** Live fragments of model answers (not journal records; core/engine/internal/delta.ts). Absent: none are produced. */
  delta?(d: StepDelta): void;
  clock: Clock;
  isCancelled?(): boolean | Promise<boolean>;
  /** The recorded output of a completed step, from the run's journal (see core/journal/recorded.ts). */
  recorded?(stepId: string): Promise<RecordedStep | undefined>;
  /**
   * How many calls of a step were started (an `intent` record) and never finished, from the
   * run's journal (core/journal/recorded.ts `intentsFrom`). When present, the engine journals an
   * `intent` before every model and tool call, re-issues a call that was in flight at most once
   * (flagged `reissued` on its step record), and refuses to issue it a third time
   * (failed, `call_interrupted`). Absent: no intent records are written.
   */
  intents?(stepId: string): Promise<number>;
  /**
   * The `attempt` records of a call's step id so far (a step with a retry policy): how many
   * attempts were made and the due time of the next one (`retry_at` of the last, or null).
   * Absent: retries restart from the first attempt on every drive.
   */
  attempts?(stepId: string): Promise<{ count: number; retry_at: number | null }>;
  /**
   * The operator's resolution of a call of `stepId` whose outcome was lost, if any (the latest).
   * Absent: a side-effecting call not declared idempotent found in flight waits `outcome_unknown`
   * for good (nothing can resolve it).
   */
  outcomes?(stepId: string): Promise<OutcomeResolution | undefined>;
  /** Spans around each executed step (replayed steps open none). */
  tracer?: TracerPort;
}

export interface RunOptions {
  run_id: string;
  /** The compiler's graph hash (computed from the graph when absent). */
  graph_hash?: string;
  /** The principal that started the run (from the session); two-person approvals exclude it. */
  requester: string;
  /** The actors of the token the run was requested with (RFC 8693 `act`, current first): two-person approvals exclude them too. */
  requester_actors?: string[];
  /** Extra values visible to CEL as `context` (JSON). run_id and requester are always present. */
  context?: JsonObject;
  /** A fork's replacement input of one graph node (the step it was forked at). */
  replace?: { step_id: string; input: unknown };
}

/**
 * What a waiting run holds on: an approval, a timer (wake_at), or the outcome of a call lost in a crash
 * (`outcome`: reason outcome_unknown, until an operator resolves it).
 */
export interface RunWait {
  step_id: string;
  for: 'approval' | 'timer' | 'outcome';
  wake_at: number | null;
}

export type RunOutcome = 'completed' | 'failed' | 'refused' | 'cancelled' | 'waiting';

export interface RunResult {
  outcome: RunOutcome;
  /** completed: the exit node's output (or the last node that ran when the exit was skipped); otherwise null. */
  output: unknown;
  /** Machine reason for failed/refused/cancelled/waiting, e.g. no_budget_ledger, tool_not_granted, gate_declined (core/reasons.ts). */
  reason?: WireReason;
  details?: JsonObject;
  /** For `waiting`: what the run holds on, and when to drive it again (timer due, approval timeout). */
  waiting?: RunWait;
  /** Steps taken in this drive (replayed ones included). */
  steps: number;
  /** For `failed` by a port exception: the exception, for the caller's log only (never on the wire). */
  cause?: unknown;
}
