/**
 * The tools `/mcp` offers a caller (`tools/list`), decided by the same checks
 * as the HTTP routes they stand for, so a caller is never shown a tool it
 * could not call:
 *
 * - `crew_<crew_id>`: a crew the caller may run (Teams.runnableCrews: the
 *   run route's permission and seat containment). Title: the crew's name;
 *   description: its formation's name and purpose; input: the formation's
 *   `input_schema`.
 * - `endpoint_<endpoint_id>`: a published job endpoint the caller may call
 *   (JobEndpoints.callable: the invoke route's checks); input: its
 *   `input_schema`.
 * - `run_status` (agent_teams.read or system.orchestration.admin.read: the
 *   run routes' read), `journal_verify` (system.orchestration.admin.read: the
 *   journal route's), `approval_decide` (agent_teams.approve: the approval
 *   route's).
 *
 * An input schema of type object is the tool's input schema as it is (the
 * arguments are the input); any other (or none) is wrapped as the one
 * argument `input`.
 */
import type { Tool } from '../../runtime/mcp/types.ts';
import { RUN_RESULT_SCHEMA } from '../../runtime/mcp/results.ts';
import { grants } from '../../core/authority/scopes.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import type { AuthContext } from '../context.ts';
import type { McpContext } from './context.ts';
import { MCP } from './settings.ts';

export const CREW_TOOL = 'crew_';
export const ENDPOINT_TOOL = 'endpoint_';
export const RUN_STATUS = 'run_status';
export const JOURNAL_VERIFY = 'journal_verify';
export const APPROVAL_DECIDE = 'approval_decide';

/** A tool's input schema for an input described by `schema` (or nothing), and how its arguments give the input. */
export function toolInput(schema: Record<string, unknown> | null | undefined): {
  inputSchema: Tool['inputSchema'];
  input(args: Record<string, unknown>): unknown;
} {
  if (schema?.['type'] === 'object') return { inputSchema: schema as Tool['inputSchema'], input: (args) => args };
  return {
    inputSchema: {
      type: 'object',
      properties: { input: schema ?? { description: 'The input of the run (any JSON)' } },
      ...(schema ? { required: ['input'] } : {}),
      additionalProperties: false,
    },
    input: (args) => args['input'] ?? null,
  };
}

const RUN_ID_INPUT = {
  type: 'object' as const,
  properties: { run_id: { type: 'string', description: 'A run id (run_...)', maxLength: 100 } },
  required: ['run_id'],
  additionalProperties: false,
};

/** May the caller read runs (the run routes' permission, either one)? */
export const readsRuns = (auth: AuthContext) =>
  grants(auth.effective, PERMISSIONS.teamsRead) || grants(auth.effective, PERMISSIONS.jobsRead);

/** The tools `auth` may call now. */
export async function toolsFor(ctx: McpContext, auth: AuthContext): Promise<Tool[]> {
  const tools: Tool[] = [];
  for (const { crew, formation } of await ctx.teams.runnableCrews(auth, MCP.maxToolsPerKind)) {
    const purpose = formation.purpose ?? `Runs the crew ${crew.name} (formation ${formation.name}, ${formation.coordination_policy}).`;
    tools.push({
      name: `${CREW_TOOL}${crew.crew_id}`,
      title: crew.name,
      description: `${formation.name}: ${purpose} Runs as you; answers the output with a signed receipt. A step that needs your approval is asked (elicitation) or answered as waiting.`,
      inputSchema: toolInput(formation.input_schema).inputSchema,
      outputSchema: RUN_RESULT_SCHEMA as unknown as Tool['outputSchema'],
      annotations: { title: crew.name, readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    });
  }
  for (const e of await ctx.endpoints.callable(auth, MCP.maxToolsPerKind)) {
    tools.push({
      name: `${ENDPOINT_TOOL}${e.endpoint_id}`,
      title: e.name,
      description: `Published ${e.job_type} endpoint ${e.name}: runs it as you and answers its output with a signed receipt.`,
      inputSchema: toolInput(e.input_schema).inputSchema,
      outputSchema: RUN_RESULT_SCHEMA as unknown as Tool['outputSchema'],
      annotations: { title: e.name, readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    });
  }
  if (readsRuns(auth)) {
    tools.push({
      name: RUN_STATUS,
      title: 'Run status',
      description: "A run's state, output or error, pending approvals, and a signed receipt over its journal's head now.",
      inputSchema: RUN_ID_INPUT,
      outputSchema: RUN_RESULT_SCHEMA as unknown as Tool['outputSchema'],
      annotations: { title: 'Run status', readOnlyHint: true, openWorldHint: false },
    });
  }
  if (grants(auth.effective, PERMISSIONS.jobsRead)) {
    tools.push({
      name: JOURNAL_VERIFY,
      title: 'Verify a journal',
      description: "Verifies a run's signed journal against the cell's published identity keys: chain, signatures, one run, one graph.",
      inputSchema: RUN_ID_INPUT,
      outputSchema: {
        type: 'object',
        properties: {
          run_id: { type: 'string' },
          ok: { type: 'boolean' },
          records: { type: 'integer' },
          journal_seq: { type: ['integer', 'null'] },
          journal_head: { type: ['string', 'null'] },
          graph_hash: { type: ['string', 'null'] },
          problem: { type: ['object', 'null'] },
        },
        required: ['run_id', 'ok', 'records'],
      },
      annotations: { title: 'Verify a journal', readOnlyHint: true, openWorldHint: false },
    });
  }
  if (grants(auth.effective, PERMISSIONS.teamsApprove)) {
    tools.push({
      name: APPROVAL_DECIDE,
      title: 'Approve or reject a step',
      description:
        "Approves or rejects a crew run's step waiting for a human approval, as you (the approval route's rules: a requester never approves its own two-person step).",
      inputSchema: {
        type: 'object',
        properties: {
          run_id: { type: 'string', maxLength: 100 },
          step_id: { type: 'string', maxLength: 300 },
          decision: { type: 'string', enum: ['approve', 'reject'] },
          comment: { type: 'string', maxLength: 1000 },
        },
        required: ['run_id', 'step_id', 'decision'],
        additionalProperties: false,
      },
      outputSchema: RUN_RESULT_SCHEMA as unknown as Tool['outputSchema'],
      annotations: { title: 'Approve or reject a step', readOnlyHint: false, destructiveHint: false, openWorldHint: false },
    });
  }
  return tools;
}
