/**
 * A crew run as the API shows it: its response shape (`CrewRun` in the
 * OpenAPI document) and the view that builds it from the run's row, typed by
 * that shape so every route answers it without a cast.
 */
import { z } from '@hono/zod-openapi';
import { IsoTime } from '../../http/openapi.ts';
import {
  PendingApprovalSchema,
  RUN_STATES,
  RunDecisionSchema,
  UnknownOutcomeSchema,
  forksView,
  type Run,
  type RunState,
} from '../../runs/api.ts';
import type { TeamsContext } from '../context.ts';
import { DEFAULT_MAX_DURATION_MS, crewSpec, runTokens } from './runs.ts';
import { iso } from '../schema.ts';

export const RunOut = z
  .object({
    run_id: z.string(),
    kind: z.string(),
    crew_id: z.string().nullable(),
    formation_id: z.string().nullable(),
    formation_version: z
      .number()
      .int()
      .nullable()
      .openapi({ description: 'The formation version the run executes (null: a run from before versions)' }),
    workspace_id: z.string().nullable(),
    requester: z.string(),
    state: z.enum(RUN_STATES as [RunState, ...RunState[]]),
    stalled: z.boolean().openapi({
      description: 'True when the run is queued or running and its journal has not grown for 10 leases (docs/multi-cell.md)',
    }),
    graph_hash: z.string().nullable(),
    input: z.unknown(),
    output: z.unknown(),
    error: z
      .object({
        code: z.string(),
        message: z.string(),
        reason: z.string().optional(),
        details: z.record(z.string(), z.unknown()).optional(),
      })
      .nullable(),
    investigate: z.unknown(),
    flags: z.record(z.string(), z.unknown()),
    coordinator: z.string().nullable(),
    checked_cell_id: z.string(),
    max_duration_ms: z.number(),
    max_tokens: z.number().nullable(),
    tokens_used: z.number(),
    pending_approvals: z.array(PendingApprovalSchema),
    decisions: z.array(RunDecisionSchema).openapi({
      description:
        'Every human decision of the run, decided steps included, oldest first: who (and the chain it decided through), approve or reject, the comment, the input digest it approved, when',
    }),
    unknown_outcome: UnknownOutcomeSchema.nullable().openapi({
      description: 'For a run in state `outcome_unknown`: the side-effecting call whose outcome was lost, for an operator to resolve',
    }),
    forked_from: z
      .object({ run_id: z.string(), seq: z.number().int(), record_hash: z.string() })
      .nullable()
      .openapi({ description: "The run this one was forked from: its id, the seq of the step record forked at and that record's hash" }),
    forks: z
      .array(z.object({ run_id: z.string(), seq: z.number().int(), by: z.string(), at: IsoTime }))
      .openapi({ description: 'Runs forked from this one (and reruns), oldest first' }),
    created_at: IsoTime,
    updated_at: IsoTime,
    finished_at: IsoTime.nullable(),
  })
  .openapi('CrewRun');

/** A crew run as the API shows it. */
export type CrewRunView = z.infer<typeof RunOut>;

/**
 * A run as the API shows it. `started`: the answer of the request that recorded it, built from the row its
 * committing transaction read (a new run has used no tokens and waits on no approval), so no read after the
 * commit can turn the answer into a refusal (issue 22).
 */
export async function runView(ctx: TeamsContext, r: Run, o: { started?: boolean } = {}): Promise<CrewRunView> {
  const spec = crewSpec(r);
  // Read together (one round trip on PostgreSQL's pool); none for the answer of the request that recorded it.
  const [tokensUsed, pendingApprovals, decisions, unknownOutcome] = o.started
    ? [0, [], [], null]
    : await Promise.all([
        runTokens(ctx, r.run_id),
        ctx.runs.pendingApprovalsView(r),
        ctx.runs.runDecisions(r.run_id),
        ctx.runs.lostOutcomeView(r),
      ]);
  return {
    run_id: r.run_id,
    kind: r.kind,
    crew_id: r.crew_id,
    formation_id: spec.formation_id ?? null,
    formation_version: spec.formation_version ?? null,
    workspace_id: r.workspace_id,
    requester: r.requester,
    state: r.state,
    stalled: ctx.runs.isStalled(r),
    graph_hash: r.graph_hash,
    input: spec.input ?? null,
    output: r.output,
    error: r.error,
    investigate: r.flags['investigate'] ?? null,
    flags: r.flags,
    coordinator: r.coordinator,
    checked_cell_id: ctx.core.config.cellId,
    max_duration_ms: spec.max_duration_ms ?? DEFAULT_MAX_DURATION_MS,
    max_tokens: spec.max_tokens ?? null,
    tokens_used: tokensUsed,
    pending_approvals: pendingApprovals,
    decisions,
    unknown_outcome: unknownOutcome,
    forked_from: spec.forked_from ?? null,
    forks: forksView(r),
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
    finished_at: r.finished_at === null ? null : iso(r.finished_at),
  };
}
