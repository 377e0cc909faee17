/**
 * A cell run's attestation (docs/receipts.md): the evidence gathered from the
 * runs module (the row, the whole journal, the values when asked and
 * allowed), Agent Teams (the crew run's executed graph and formation version)
 * or Jobs (a job run's graph), turned into the run's in-toto Statement
 * (core/attestation/statement.ts), signed with this cell's identity key as a
 * DSSE envelope beside the run's log proof (the attestation file), or as a
 * SCITT signed statement (COSE_Sign1).
 */
import { buildAttestation, statementBytes, type AttestationBundle } from '../../core/attestation/bundle.ts';
import { signStatement } from '../../core/attestation/cose-sign1.ts';
import { IN_TOTO_PAYLOAD_TYPE } from '../../core/attestation/dsse.ts';
import { runStatement, type RunEvidence } from '../../core/attestation/statement.ts';
import type { Graph } from '../../core/engine/types.ts';
import { ServiceError } from '../../core/errors.ts';
import { jobGraph } from '../jobs/api.ts';
import { isTerminal, requesterOf, type Run } from '../runs/api.ts';
import type { ReceiptsContext } from './context.ts';
import { integrateAll, logOrigin, proofFor, queueTx } from './log.ts';
import { recordHash } from '../../core/journal/hash.ts';

/** The most records an attestation carries (the engine's hard step limit, with room for the records around steps). */
const MAX_RECORDS = 1_000_000;

function graphOfJob(run: Run): Graph | null {
  try {
    return run.job_type ? jobGraph(run.job_type, run.spec) : null;
  } catch {
    return null;
  }
}

/** The evidence of a finished run as this cell holds it. */
export async function runEvidence(ctx: ReceiptsContext, run: Run, withValues: boolean): Promise<RunEvidence> {
  if (!isTerminal(run.state)) {
    throw new ServiceError('conflict', `the run is ${run.state}: its attestation exists once it ends`, {
      details: { reason: 'run_not_finished', state: run.state },
    });
  }
  const [records, executed] = await Promise.all([
    ctx.runs.readJournal(run.run_id, 0, MAX_RECORDS),
    run.kind === 'crew' ? ctx.teams.executedGraph(run) : Promise.resolve(undefined),
  ]);
  const spec = (typeof run.spec === 'object' && run.spec !== null ? run.spec : {}) as { formation_id?: unknown };
  const graph = run.kind === 'crew' ? ((executed?.graph as Graph | undefined) ?? null) : graphOfJob(run);
  let values: Record<string, unknown> | undefined;
  if (withValues) {
    values = {};
    const hashes = new Set<string>();
    for (const r of records) {
      hashes.add(r.input_hash);
      hashes.add(r.output_hash);
    }
    for (const h of [...hashes].sort()) {
      const v = await ctx.runs.getBlob(h);
      values[h] = v === undefined ? null : v;
    }
  }
  // The actors of the token the run was requested with (RFC 8693 `act`, current first), as the run records them.
  const actors = requesterOf(run).actors ?? [];
  return {
    run: {
      run_id: run.run_id,
      kind: run.kind,
      state: run.state,
      reason: run.error?.reason ?? null,
      requester: run.requester,
      ...(actors.length ? { act: [...actors] } : {}),
      job_type: run.job_type,
      workspace_id: run.workspace_id,
      source: run.source ?? null,
      created_at: run.created_at,
      finished_at: run.finished_at,
    },
    crew:
      run.kind === 'crew'
        ? {
            crew_id: run.crew_id,
            formation_id: typeof spec.formation_id === 'string' ? spec.formation_id : null,
            formation_version: executed?.formationVersion ?? null,
          }
        : null,
    graph_hash: run.graph_hash ?? records[0]?.graph_hash ?? '',
    graph,
    records,
    issuer: { id: ctx.core.config.cellId, kind: 'cell' },
    ...(values !== undefined ? { values } : {}),
  };
}

/** The attestation file of a finished run: the signed statement and its place in the run log. */
export async function attestationOf(ctx: ReceiptsContext, run: Run, withValues: boolean): Promise<AttestationBundle> {
  const evidence = await runEvidence(ctx, run, withValues);
  const statement = runStatement(evidence);
  let log = await proofFor(ctx, run.run_id);
  if (log === undefined) {
    // A run that ended before the run log existed joins it when it is first attested, with its journal as it is.
    const head = { run_id: run.run_id, journal_head: recordHash(evidence.records.at(-1)!), graph_hash: evidence.graph_hash };
    await ctx.core.store.write((tx) => queueTx(ctx, tx, head, `cell:${ctx.core.config.cellId}`));
    await integrateAll(ctx);
    log = await proofFor(ctx, run.run_id);
  }
  return buildAttestation(statement, ctx.iam.signer(), log ?? null);
}

/** The SCITT signed statement (COSE_Sign1) of a finished run: issuer the group's log origin, subject the run id. */
export async function signedStatementOf(ctx: ReceiptsContext, run: Run, withValues: boolean): Promise<Uint8Array> {
  const statement = runStatement(await runEvidence(ctx, run, withValues));
  return signStatement(
    statementBytes(statement),
    { contentType: IN_TOTO_PAYLOAD_TYPE, iss: logOrigin(ctx), sub: run.run_id, iat: Math.floor(ctx.core.clock.now() / 1000) },
    ctx.iam.signer(),
  );
}
