/**
 * The journal side of a fork (crew runs: cell/teams/crew-runs/fork.ts; job reruns:
 * cell/jobs/rerun.ts). `forkPoint` picks, from the parent's journal, the
 * records the fork reuses: the step and decision records before the fork
 * point, except the step forked at and its sub-steps (which run again).
 * `openFork` writes the fork's first records: `forked` (the parent run, the
 * seq forked at and that record's hash), then a copy of every reused record
 * naming the parent record it copies (core/journal/lineage.ts), values kept
 * by hash for the fork too. The engine reuses the copies as recorded steps,
 * so no model or tool is called again for the shared prefix.
 */
import { recordHash } from '../../core/journal/hash.ts';
import { approvalReusable, leadsTo, recordedRequester, type RunRequester } from '../../core/engine/approval-rule.ts';
import type { JournalRecord, JsonObject } from '../../core/journal/record.ts';
import type { RunsContext } from './context.ts';
import { appendJournal, appendJournalBatch, getBlob, type AppendEntry } from './journal.ts';

/** Where a fork starts: the parent record, its hash, and the records reused before it. */
export interface ForkPoint {
  from: { run_id: string; seq: number; record_hash: string };
  /** The parent record's step id (it and its sub-steps run again). */
  step_id: string;
  copies: JournalRecord[];
}

/** Kinds of record a fork may start at: where a step ran, waited, failed or the run ended. */
export const FORK_KINDS = new Set(['step', 'decision', 'intent', 'attempt', 'refusal', 'waiting', 'run_finished']);

/** True when `id` is `stepId` or one of its sub-steps. */
export function withinStep(id: string, stepId: string): boolean {
  return id === stepId || id.startsWith(`${stepId}/`) || id.startsWith(`${stepId}[`) || id.startsWith(`${stepId}#`);
}

/** The fork point at `at` of a parent journal (records from seq 1), or null when `at` names no record a fork may start at. */
export function forkPoint(records: readonly JournalRecord[], at: number): ForkPoint | null {
  const rec = records[at - 1];
  if (rec?.seq !== at || !FORK_KINDS.has(rec.kind)) return null;
  const copies = records.filter((r) => r.seq < at && (r.kind === 'step' || r.kind === 'decision') && !withinStep(r.step_id, rec.step_id));
  return { from: { run_id: rec.run_id, seq: at, record_hash: recordHash(rec) }, step_id: rec.step_id, copies };
}

/** Who a fork or rerun runs for, and what it changes: the approvals of its parent it may reuse follow from it. */
export interface ForkFor {
  /** The new run's requester and the actors of the token it forked with. */
  requester: RunRequester;
  /** The graph's edges and the node whose input the fork replaces, if any. */
  edges?: readonly { from: string; to: string }[];
  replaced?: string | undefined;
}

/** The graph node a step id belongs to (`agent:a/model/0` -> `agent:a`). */
export function nodeOfStep(stepId: string): string {
  const i = stepId.search(/[/[#]/);
  return i < 0 ? stepId : stepId.slice(0, i);
}

/**
 * The fork point without the parent's approvals that do not stand for the new run
 * (core/engine/approval-rule.ts approvalReusable: the same input, the same requester through the
 * same chain, no replaced input after it): those approval steps, and their sub-steps (the time they
 * were first reached), are not copied, so the fork asks them again. `asked_again` names them.
 */
export function standingApprovals(point: ForkPoint, o: ForkFor): { point: ForkPoint; asked_again: string[] } {
  const stale = point.copies.filter((r) => {
    if (r.kind !== 'decision' || r.data?.['executor'] !== 'human_approval') return false;
    const node = nodeOfStep(r.step_id);
    const replacedAfter = o.replaced !== undefined && o.replaced !== node && leadsTo(o.edges ?? [], node, o.replaced);
    const recorded = { input_hash: r.input_hash, requester: recordedRequester(r.data) };
    return !approvalReusable(recorded, { input_hash: r.input_hash, requester: o.requester, replacedAfter });
  });
  if (stale.length === 0) return { point, asked_again: [] };
  const asked = stale.map((r) => r.step_id);
  const copies = point.copies.filter((c) => !asked.some((a) => withinStep(c.step_id, a)));
  return { point: { ...point, copies }, asked_again: asked };
}

/** Writes a fork's lineage (`forked`, with `extra` in its data) and its reused records: call right after creating the run. */
export async function openFork(ctx: RunsContext, runId: string, point: ForkPoint, extra: JsonObject = {}): Promise<void> {
  await appendJournal(ctx, runId, { step_id: 'run', kind: 'forked', data: { ...extra, from: point.from, step_id: point.step_id } });
}

/**
 * Copies the reused records into the fork's journal (after its opening records), in one batch: one
 * transaction whatever the prefix's length (appendJournalBatch), so a fork of a long run costs one commit.
 */
export async function copyReused(ctx: RunsContext, runId: string, point: ForkPoint): Promise<void> {
  if (point.copies.length === 0) return;
  const entries: AppendEntry[] = await Promise.all(
    point.copies.map(async (r) => {
      const values = await Promise.all([r.input_hash, r.output_hash].map((h) => getBlob(ctx, h)));
      const blobs = values.filter((v) => v !== undefined);
      return {
        fields: {
          step_id: r.step_id,
          kind: r.kind,
          input_hash: r.input_hash,
          output_hash: r.output_hash,
          data: { ...(r.data ?? {}), reused: { run_id: point.from.run_id, seq: r.seq, record_hash: recordHash(r) } },
        },
        blobs,
      };
    }),
  );
  await appendJournalBatch(ctx, runId, entries);
}
