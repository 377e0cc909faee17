/**
 * A job run as an engine graph (core/engine types), so job runs execute on
 * the same engine as crews, with the same signed journal:
 *
 * | job_type | graph |
 * |----------|-------|
 * | sql      | one `tool` node `sql` calling `job.sql` |
 * | compute  | one `tool` node `compute` calling `job.compute` |
 * | single   | one `tool` node `tool` calling the named catalog tool with the spec's args |
 * | notebook | `tool` nodes `cell-0` ... `cell-<n-1>` calling `job.notebook` with `{ index }`, a pipeline of data edges |
 *
 * A spec's `timeout_ms` rides on every node as its step policy (a spec without
 * one gives the graph it always gave).
 *
 * The graph's formation_hash is the content hash of `{ job_type, spec }`, so the
 * graph hash pins the exact job a journal belongs to.
 */
import { contentHash } from '../../core/canonical.ts';
import type { Graph, GraphNode } from '../../core/engine/types.ts';
import type { JsonObject } from '../../core/journal/record.ts';
import type { NotebookSpec, SingleSpec } from './shapes.ts';

export const JOB_TOOLS = {
  sql: 'job.sql',
  compute: 'job.compute',
  notebook: 'job.notebook',
} as const;

export function notebookNodeId(i: number): string {
  return `cell-${i}`;
}

export function jobGraph(jobType: string, spec: unknown): Graph {
  // The spec's `timeout_ms` is each step's policy (core/engine/policy.ts): the tools port stops the call at it.
  const timeout = (spec as { timeout_ms?: unknown } | null)?.timeout_ms;
  const policy = typeof timeout === 'number' ? { timeout_ms: timeout } : {};
  let nodes: GraphNode[];
  switch (jobType) {
    case 'sql':
      nodes = [{ id: 'sql', kind: 'tool', config: { tool: JOB_TOOLS.sql, args: {}, ...policy } }];
      break;
    case 'compute':
      nodes = [{ id: 'compute', kind: 'tool', config: { tool: JOB_TOOLS.compute, args: {}, ...policy } }];
      break;
    case 'single': {
      const s = spec as SingleSpec;
      nodes = [{ id: 'tool', kind: 'tool', config: { tool: s.tool, args: s.args as JsonObject, ...policy } }];
      break;
    }
    case 'notebook': {
      const nb = spec as NotebookSpec;
      nodes = nb.cells.map((_, i) => ({
        id: notebookNodeId(i),
        kind: 'tool' as const,
        config: { tool: JOB_TOOLS.notebook, args: { index: i }, ...policy },
      }));
      break;
    }
    default:
      throw new TypeError(`no graph for job type ${jobType}`);
  }
  const edges = nodes.slice(1).map((n, i) => ({ from: nodes[i]!.id, to: n.id }));
  return {
    v: 1,
    formation_hash: contentHash({ job_type: jobType, spec }),
    policy: 'sequential',
    entry: nodes[0]!.id,
    exit: nodes[nodes.length - 1]!.id,
    nodes,
    edges,
    seats: {},
    limits: { max_steps: nodes.length + 8, max_steps_per_seat: nodes.length + 8, max_tool_rounds: 0, default_max_tokens: 1 },
    placement: { clearance: 0, topology: {} },
  };
}

/**
 * The hash of the graph a job run is driven with, known when the run is
 * recorded (an agent job's pinned graph is named by its hash): stored on the
 * run, so records written before its first claim (a rerun's lineage) carry
 * the same graph hash as the drive's.
 */
export function jobGraphHash(jobType: string, spec: unknown): string {
  return jobType === 'agent' ? String((spec as { graph_id?: unknown } | null)?.graph_id ?? '') : contentHash(jobGraph(jobType, spec));
}
