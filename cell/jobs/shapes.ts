/**
 * The Jobs API's shapes (zod, published in the OpenAPI document): the `spec`
 * of each job type, the run request and record, definitions and endpoints.
 * Every default and bound here is documented in docs/jobs.md.
 */
import { z } from '@hono/zod-openapi';
import { MAX_STEP_TIMEOUT_MS } from '../../core/engine/policy.ts';
import { IsoTime } from '../http/openapi.ts';
import { PendingApprovalSchema, RUN_STATES, RunDecisionSchema, UnknownOutcomeSchema, type RunState } from '../runs/api.ts';

/** The step policy's `timeout_ms` of a job's steps (core/engine/policy.ts): the engine's deadline on each step. */
const stepTimeout = {
  timeout_ms: z
    .number()
    .int()
    .min(1)
    .max(MAX_STEP_TIMEOUT_MS)
    .optional()
    .openapi({
      description: `Deadline of each step of the job (a notebook: of each cell), ms (1 to ${MAX_STEP_TIMEOUT_MS}), counted from the step's start, waiting for a sandbox or the workspace included; past it the work is stopped and the run fails \`step_timeout\``,
    }),
};

// ------------------------------------------------------------ caps and defaults

export const JOB_LIMITS = {
  sql: { rowLimitDefault: 1_000, rowLimitMax: 100_000, timeDefaultMs: 5_000, timeMaxMs: 60_000, statementsMax: 100 },
  compute: {
    timeDefaultMs: 2_000,
    timeMaxMs: 60_000,
    memoryDefaultBytes: 32 * 1024 * 1024,
    memoryMinBytes: 1024 * 1024,
    memoryMaxBytes: 256 * 1024 * 1024,
    outputDefaultBytes: 64 * 1024,
    outputMaxBytes: 1024 * 1024,
    codeMaxChars: 100_000,
  },
  notebook: { cellsMax: 100 },
} as const;

export const WORKSPACE_ID = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, 'workspace_id: 1 to 64 of A-Z a-z 0-9 _ . -, starting with a letter or digit')
  .openapi({ example: 'ws-analytics', description: 'Workspace: a namespace with its own SQLite database and kv storage' });

const SqlParam = z.union([z.string().max(100_000), z.number(), z.boolean(), z.null()]);

export const SqlStatementSchema = z
  .object({
    sql: z.string().min(1).max(100_000).openapi({ description: 'One SQL statement', example: 'SELECT * FROM t WHERE x > :min' }),
    params: z
      .union([z.array(SqlParam).max(1_000), z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/), SqlParam)])
      .optional()
      .openapi({ description: 'Positional (`?`) values as an array, or named (`:name`) values as an object' }),
  })
  .strict()
  .openapi('SqlStatement');

const sqlCaps = {
  row_limit: z
    .number()
    .int()
    .min(1)
    .max(JOB_LIMITS.sql.rowLimitMax)
    .default(JOB_LIMITS.sql.rowLimitDefault)
    .openapi({
      description: `Rows returned per statement (1 to ${JOB_LIMITS.sql.rowLimitMax}); more are dropped and the result says truncated`,
    }),
  time_limit_ms: z
    .number()
    .int()
    .min(1)
    .max(JOB_LIMITS.sql.timeMaxMs)
    .default(JOB_LIMITS.sql.timeDefaultMs)
    .openapi({ description: `Time cap of the whole transaction, ms (1 to ${JOB_LIMITS.sql.timeMaxMs})` }),
};

/** sql: one statement (`sql` + `params`) or several (`statements`), run as one transaction on the workspace database. */
export const SqlSpecSchema = z
  .object({
    sql: z.string().min(1).max(100_000).optional(),
    params: SqlStatementSchema.shape.params,
    statements: z.array(SqlStatementSchema).min(1).max(JOB_LIMITS.sql.statementsMax).optional(),
    ...sqlCaps,
    ...stepTimeout,
  })
  .strict()
  .refine((s) => (s.sql === undefined) !== (s.statements === undefined), {
    message: 'give either sql (with optional params) or statements, not both',
  })
  .refine((s) => s.sql !== undefined || s.params === undefined, {
    message: 'params go with sql; inside statements each has its own params',
  })
  .openapi('SqlJobSpec');

const computeCaps = {
  time_limit_ms: z
    .number()
    .int()
    .min(1)
    .max(JOB_LIMITS.compute.timeMaxMs)
    .default(JOB_LIMITS.compute.timeDefaultMs)
    .openapi({ description: `Time cap, ms (1 to ${JOB_LIMITS.compute.timeMaxMs})` }),
  memory_limit_bytes: z
    .number()
    .int()
    .min(JOB_LIMITS.compute.memoryMinBytes)
    .max(JOB_LIMITS.compute.memoryMaxBytes)
    .default(JOB_LIMITS.compute.memoryDefaultBytes)
    .openapi({ description: 'QuickJS heap cap, bytes (1 MiB to 256 MiB)' }),
  output_limit_bytes: z
    .number()
    .int()
    .min(1)
    .max(JOB_LIMITS.compute.outputMaxBytes)
    .default(JOB_LIMITS.compute.outputDefaultBytes)
    .openapi({ description: 'Cap on the JSON output, bytes (1 to 1 MiB)' }),
};

/** compute: the body of a function `(input) => output`, run in QuickJS/WebAssembly. */
export const ComputeSpecSchema = z
  .object({
    code: z.string().min(1).max(JOB_LIMITS.compute.codeMaxChars).openapi({
      description: 'JavaScript function body; `input` is in scope; the returned value (JSON) is the output',
      example: 'return input.values.reduce((a, b) => a + b, 0);',
    }),
    input: z.unknown().optional().openapi({ description: 'The only data the code sees (JSON)' }),
    ...computeCaps,
    ...stepTimeout,
  })
  .strict()
  .openapi('ComputeJobSpec');

export const NotebookCellSchema = z
  .discriminatedUnion('type', [
    z.object({ type: z.literal('sql'), sql: z.string().min(1).max(100_000), params: SqlStatementSchema.shape.params, ...sqlCaps }).strict(),
    z
      .object({
        type: z.literal('compute'),
        code: ComputeSpecSchema.shape.code,
        input: z
          .unknown()
          .optional()
          .openapi({ description: 'When absent the cell gets `{ input: <notebook input>, cells: [<outputs of earlier cells>] }`' }),
        ...computeCaps,
      })
      .strict(),
    z.object({ type: z.literal('markdown'), source: z.string().max(100_000) }).strict(),
  ])
  .openapi('NotebookCell');

/** notebook: cells run in order, each a journal step; the output collects every cell's output. */
export const NotebookSpecSchema = z
  .object({
    cells: z.array(NotebookCellSchema).min(1).max(JOB_LIMITS.notebook.cellsMax),
    input: z.unknown().optional().openapi({ description: 'Notebook input, visible to compute cells' }),
    ...stepTimeout,
  })
  .strict()
  .openapi('NotebookJobSpec');

/** single: one tool of the governed catalog, called once. */
export const SingleSpecSchema = z
  .object({
    tool: z
      .string()
      .min(1)
      .max(100)
      .openapi({ example: 'calc', description: 'A tool name from GET /api/public/v1/admin/ai/tool-registry' }),
    args: z.record(z.string(), z.unknown()).default({}).openapi({ description: "The tool's arguments" }),
    authority: z
      .object({
        egress_allowlist: z.array(z.string().min(1).max(500)).max(100).optional(),
        data_grant_ids: z.array(z.string().min(1).max(200)).max(100).optional(),
        clearance_level: z.number().int().min(0).max(100).optional(),
        compartments: z.array(z.string().min(1).max(64)).max(16).optional(),
      })
      .strict()
      .optional()
      .openapi({
        description:
          "What the tool may reach. Default: the run's workspace only (data grant and egress `kv:<workspace_id>`), clearance 0, no compartments",
      }),
    ...stepTimeout,
  })
  .strict()
  .openapi('SingleJobSpec');

export const RUN_JOB_TYPES = ['notebook', 'compute', 'sql', 'single'] as const;
export type RunJobType = (typeof RUN_JOB_TYPES)[number];

export const SPEC_BY_TYPE = {
  sql: SqlSpecSchema,
  compute: ComputeSpecSchema,
  notebook: NotebookSpecSchema,
  single: SingleSpecSchema,
} as const;

export type SqlSpec = z.infer<typeof SqlSpecSchema>;
export type ComputeSpec = z.infer<typeof ComputeSpecSchema>;
export type NotebookSpec = z.infer<typeof NotebookSpecSchema>;
export type NotebookCell = z.infer<typeof NotebookCellSchema>;
export type SingleSpec = z.infer<typeof SingleSpecSchema>;

const requesterRefused = z
  .unknown()
  .optional()
  .openapi({ description: 'Refused when present: the requester is always the authenticated session' });

/** The run request: one shape per job_type, so each spec is documented and checked against its type. */
export const CreateRunSchema = z
  .discriminatedUnion('job_type', [
    z
      .object({ job_type: z.literal('sql'), workspace_id: WORKSPACE_ID, spec: SqlSpecSchema, requester: requesterRefused })
      .strict()
      .openapi('CreateSqlJobRun'),
    z
      .object({ job_type: z.literal('compute'), workspace_id: WORKSPACE_ID, spec: ComputeSpecSchema, requester: requesterRefused })
      .strict()
      .openapi('CreateComputeJobRun'),
    z
      .object({ job_type: z.literal('notebook'), workspace_id: WORKSPACE_ID, spec: NotebookSpecSchema, requester: requesterRefused })
      .strict()
      .openapi('CreateNotebookJobRun'),
    z
      .object({ job_type: z.literal('single'), workspace_id: WORKSPACE_ID, spec: SingleSpecSchema, requester: requesterRefused })
      .strict()
      .openapi('CreateSingleJobRun'),
  ])
  .openapi('CreateJobRun');

export const RunErrorSchema = z
  .object({
    code: z.string(),
    message: z.string(),
    reason: z.string().optional(),
    details: z.record(z.string(), z.unknown()).optional(),
  })
  .openapi('RunError');

export const JobRunSchema = z
  .object({
    run_id: z.string().openapi({ description: 'The orchestration run id (also the journal and event stream key)' }),
    job_id: z.string().openapi({ description: 'Same as run_id' }),
    kind: z.enum(['job', 'crew']),
    job_type: z.string().nullable(),
    crew_id: z.string().nullable(),
    workspace_id: z.string().nullable(),
    spec: z.unknown(),
    requester: z.string().openapi({ description: 'Principal id from the authenticated session' }),
    state: z.enum(RUN_STATES as [RunState, ...RunState[]]),
    stalled: z.boolean().openapi({
      description: 'True when the run is queued or running and its journal has not grown for 10 leases (docs/multi-cell.md)',
    }),
    output: z.unknown().nullable(),
    error: RunErrorSchema.nullable(),
    flags: z.record(z.string(), z.unknown()),
    source: z.string().openapi({ description: 'api | schedule:<schedule_id> | endpoint:<endpoint_id>' }),
    graph_hash: z.string().nullable(),
    coordinator: z.string().nullable(),
    created_at: IsoTime,
    updated_at: IsoTime,
    finished_at: IsoTime.nullable(),
    checked_cell_id: z.string().openapi({ description: 'The cell that answered' }),
    forked_from: z
      .object({ run_id: z.string(), seq: z.number().int(), record_hash: z.string() })
      .nullable()
      .optional()
      .openapi({ description: "A rerun: the run it reruns, the seq of the record it was forked at and that record's hash" }),
    forks: z
      .array(z.object({ run_id: z.string(), seq: z.number().int(), by: z.string(), at: IsoTime }))
      .optional()
      .openapi({ description: 'Reruns (and forks) of this run, oldest first' }),
    pending_approvals: z.array(PendingApprovalSchema).optional().openapi({
      description: 'Agent job runs only: steps waiting on a human decision (decide with POST .../runs/{run_id}/approvals/{step_id})',
    }),
    decisions: z.array(RunDecisionSchema).optional().openapi({
      description:
        'Agent job runs and crew runs: every human decision, decided steps included, oldest first (who, through which chain, approve or reject, the comment, the input digest approved, when)',
    }),
    unknown_outcome: UnknownOutcomeSchema.nullable().openapi({
      description:
        'For a run in state `outcome_unknown`: the side-effecting call whose outcome was lost (resolve with POST .../runs/{run_id}/outcomes/{step_id})',
    }),
  })
  .openapi('JobRun');

export const UnknownRunSchema = z
  .object({
    run_id: z.string(),
    job_id: z.string(),
    state: z.literal('unknown'),
    checked_cell_id: z.string(),
  })
  .openapi('UnknownJobRun');

// ------------------------------------------------------------ definitions

export const DEFINITION_JOB_TYPES = ['compute', 'notebook', 'sql', 'agent', 'team'] as const;
export type DefinitionJobType = (typeof DEFINITION_JOB_TYPES)[number];

export const AgentTemplateSchema = z
  .object({
    graph_id: z
      .string()
      .min(1)
      .max(200)
      .openapi({ description: 'An agent graph the cell knows (a compiled formation id); never a formation_id' }),
    input: z.unknown().optional(),
  })
  .strict()
  .openapi('AgentJobTemplate');

export const TeamTemplateSchema = z
  .object({
    crew_id: z.string().min(1).max(200).openapi({ description: 'The crew to launch (its members are bound)' }),
    input: z.unknown().optional(),
  })
  .strict()
  .openapi('TeamJobTemplate');

const CronSchema = z.string().min(1).max(200).openapi({
  description:
    "5 fields (minute hour day month weekday), 6 with seconds first, or a macro (@yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly); parsed by croner. Crons firing more often than the cell's minimum interval (default 60 s) are refused (cron_too_frequent)",
  example: '*/5 * * * *',
});
const TimezoneSchema = z.string().min(1).max(64).openapi({ description: 'IANA time zone the cron is read in', example: 'UTC' });

const definitionCommon = {
  name: z.string().min(1).max(200),
  workspace_id: WORKSPACE_ID.default('default'),
  cron: CronSchema,
  timezone: TimezoneSchema.default('UTC'),
  catch_up: z.enum(['once', 'skip']).default('once').openapi({
    description:
      'A fire missed while no cell ran: `once` runs it once at start (however many were missed), `skip` goes on to the next fire time',
  }),
  enabled: z.boolean().default(true),
};

/** Agent and team templates as the route reads them: the template rules (graph_id known, formation_id refused) are checked with named reasons after parsing. */
const AgentTemplateInput = AgentTemplateSchema.partial().extend({
  formation_id: z.unknown().optional().openapi({ description: 'Refused: a formation is a crew; schedule it as team' }),
});
const TeamTemplateInput = TeamTemplateSchema.partial().extend({
  formation_id: z.unknown().optional().openapi({ description: 'Refused without crew_id: a template without members' }),
});

/** The definition request: one shape per job_type (the spec of that type). */
export const CreateDefinitionSchema = z
  .discriminatedUnion('job_type', [
    z
      .object({ job_type: z.literal('compute'), spec: ComputeSpecSchema, ...definitionCommon })
      .strict()
      .openapi('CreateComputeJobDefinition'),
    z
      .object({ job_type: z.literal('sql'), spec: SqlSpecSchema, ...definitionCommon })
      .strict()
      .openapi('CreateSqlJobDefinition'),
    z
      .object({ job_type: z.literal('notebook'), spec: NotebookSpecSchema, ...definitionCommon })
      .strict()
      .openapi('CreateNotebookJobDefinition'),
    z
      .object({ job_type: z.literal('agent'), spec: AgentTemplateInput, ...definitionCommon })
      .strict()
      .openapi('CreateAgentJobDefinition'),
    z
      .object({ job_type: z.literal('team'), spec: TeamTemplateInput, ...definitionCommon })
      .strict()
      .openapi('CreateTeamJobDefinition'),
  ])
  .openapi('CreateJobDefinition');

export const PatchDefinitionSchema = z
  .object({
    name: z.string().min(1).max(200).optional(),
    workspace_id: WORKSPACE_ID.optional(),
    spec: z.record(z.string(), z.unknown()).optional(),
    cron: CronSchema.optional(),
    timezone: TimezoneSchema.optional(),
    catch_up: z.enum(['once', 'skip']).optional(),
  })
  .strict()
  .openapi('PatchJobDefinition');

export const DefinitionSchema = z
  .object({
    schedule_id: z.string(),
    name: z.string(),
    job_type: z.enum(DEFINITION_JOB_TYPES),
    workspace_id: z.string(),
    spec: z.unknown(),
    cron: z.string(),
    timezone: z.string(),
    catch_up: z.enum(['once', 'skip']),
    enabled: z.boolean(),
    deleted: z.boolean(),
    next_fire_at: IsoTime.nullable().openapi({ description: 'Next fire time (null when disabled or deleted)' }),
    next_fires: z
      .array(IsoTime)
      .openapi({ description: "The next 5 fire times, next_fire_at first, in the cron's time zone (empty when disabled or deleted)" }),
    last_fire_at: IsoTime.nullable(),
    last_run_id: z.string().nullable(),
    fire_count: z.number().int(),
    disabled_reason: z.string().nullable().openapi({
      description:
        'Why a disabled definition is disabled (null when enabled): requested, author_archived, author_deleted, author_purged, author_inactive, author_lacks_permission, author_authority_unknown, author_lacks_authority, root_revoked, root_expired, root_lacks_permission, root_lacks_authority (the API key it was authored through stopped or no longer holds it)',
    }),
    created_by: z.string(),
    author_id: z.string().openapi({
      description:
        "The principal the definition acts as (its runs' requester): whoever last created, changed or enabled it, within the authority they held then",
    }),
    author_root: z.string().nullable().openapi({
      description:
        'The API key the author acted through (`api_key:<id>`), when its credential derives from one: the definition stops when that key is revoked, expires or no longer holds what it needs. Null for a console session',
    }),
    created_at: IsoTime,
    updated_at: IsoTime,
    deleted_at: IsoTime.nullable(),
  })
  .openapi('JobDefinition');

// ------------------------------------------------------------ endpoints

export const CreateEndpointSchema = z
  .object({
    name: z.string().min(1).max(200),
    job_type: z.enum(['compute', 'notebook']),
    workspace_id: WORKSPACE_ID.default('default'),
    spec: z
      .record(z.string(), z.unknown())
      .openapi({ description: "The compute or notebook template; the caller's JSON body becomes its `input`" }),
    rate_limit_rpm: z.number().int().min(1).max(100_000).default(60).openapi({
      description: 'Invocations per minute for this endpoint (all callers together), separate from the gateway and per-key budgets',
    }),
    required_scopes: z.array(z.string().min(1).max(200)).min(1).max(50).default(['system.orchestration.admin.read']).openapi({
      description: "Permissions a caller's credential must grant (all of them); at least one; default system.orchestration.admin.read",
    }),
    input_schema: z
      .record(z.string(), z.unknown())
      .optional()
      .openapi({ description: 'JSON Schema subset (type, properties, required, items, enum, min/max) the input must satisfy' }),
    mode: z.enum(['sync', 'async']).default('sync').openapi({
      description:
        'sync: the invocation waits for the result (within sync_timeout_ms, else 202 with the run id); async: 202 with the run id',
    }),
    sync_timeout_ms: z.number().int().min(100).max(60_000).default(10_000),
  })
  .strict()
  .openapi('CreateJobEndpoint');

export const EndpointSchema = z
  .object({
    endpoint_id: z.string(),
    name: z.string(),
    job_type: z.enum(['compute', 'notebook']),
    workspace_id: z.string(),
    spec: z.unknown(),
    rate_limit_rpm: z.number().int(),
    required_scopes: z.array(z.string()),
    input_schema: z.unknown().nullable(),
    mode: z.enum(['sync', 'async']),
    sync_timeout_ms: z.number().int(),
    invoke_path: z.string(),
    created_by: z.string(),
    created_at: IsoTime,
  })
  .openapi('JobEndpoint');
