/**
 * Journal export: a run's signed journal carried back from a device.
 *
 * Payload (type `journal`): issuer = device id, kid = device key id,
 * audience = the cell the device trusts, version = 1, and
 *   run: { run_id, run_nonce, crew_id, graph_hash, outcome }
 *                                 run_nonce (format 2): the run id is derived from the
 *                                 device id and this nonce (bundles/run-id.ts)
 *   records: JournalRecord[]      (core/journal v1, each signed by the device key)
 *   values: { [content hash]: JSON value }   the step inputs/outputs by hash
 * The envelope is signed by the same device key. The importing cell checks
 * the envelope against the registered device key, then every record's
 * signature and the hash chain with core's verifyJournal, that every
 * carried value hashes to its name, and (format 2) that the run id is the
 * signing device's id for the carried nonce (`run_not_of_device`). A format 1
 * export (no nonce) still verifies; its run id is bound to nothing, and the
 * cell refuses to import it (cell/edge/journal-import.ts).
 *
 * Only a run that ended is exported, and its outcome is the one its records
 * end with (`outcomeProblem`: the device's `edge journal export` and the
 * cell's import ask the same question).
 *
 * Format 3 adds `log`: the run's place in the device's own run log (edge/run-log.ts;
 * origin `agent-cell-edge/<device id>`), its RFC 9162 inclusion proof and a
 * checkpoint signed by the device key; the verifier checks the checkpoint and
 * that the run's head (its id, the journal's last record hash, its graph hash)
 * is included (`device_log_invalid`). Format 2 exports still verify, without it.
 */
import { contentHash } from '../core/canonical.ts';
import type { JournalRecord } from '../core/journal/record.ts';
import { verifyJournal } from '../core/journal/verify.ts';
import { JOURNAL_FORMAT_VERSION } from './format.ts';
import { edgeRunId, RUN_NONCE } from './run-id.ts';
import { isObject, openEnvelope, refused, sealEnvelope, type OpenedEnvelope, type PayloadHeader } from './envelope.ts';
import type { Signer, TrustedKey } from './codec.ts';
import { recordHash } from '../core/journal/hash.ts';
import { checkLogProof, type LogProof } from '../core/transparency/checkpoint.ts';
import { runLeafHash } from '../core/transparency/run-leaf.ts';

/** The origin of a device's own run log: its checkpoints are signed by the device key under this name. */
export function deviceLogOrigin(deviceId: string): string {
  return `agent-cell-edge/${deviceId}`;
}

export interface RunSummary {
  run_id: string;
  /** Format 2: the nonce the run id is derived from with the device id (bundles/run-id.ts). */
  run_nonce?: string;
  crew_id: string;
  graph_hash: string;
  outcome: string;
}

export interface JournalExport extends PayloadHeader {
  type: 'journal';
  run: RunSummary;
  records: JournalRecord[];
  values: Record<string, unknown>;
  /** Format 3: the run's place in the device's run log. */
  log?: LogProof;
}

/** The outcomes of a run that ended: the only runs a journal export carries (a running or waiting run has more to record). */
export const EXPORTABLE_OUTCOMES: readonly string[] = ['completed', 'failed', 'refused', 'cancelled'];

/**
 * Why an export's outcome does not match its records, or null: the run ended (its outcome is one of
 * EXPORTABLE_OUTCOMES), its last record is the run's end (`run_finished`, step `run/end`) recording that
 * outcome, and no record follows an earlier end. Whether a `completed` journal holds every step its graph
 * runs is asked by replaying it (core/engine/replay.ts), where the graph is known.
 */
export function outcomeProblem(run: Pick<RunSummary, 'outcome'>, records: readonly JournalRecord[]): string | null {
  if (!EXPORTABLE_OUTCOMES.includes(run.outcome)) return `the run is ${JSON.stringify(run.outcome).slice(0, 40)}: it has not ended`;
  const last = records.at(-1);
  if (last?.kind !== 'run_finished' || last.step_id !== 'run/end') return "the journal does not end with the run's end";
  if (last.data?.['outcome'] !== run.outcome) return "the run's end records another outcome";
  if (records.some((r, i) => r.kind === 'run_finished' && i < records.length - 1)) return 'the journal goes on after the run ended';
  return null;
}

export async function buildJournalExport(opts: {
  deviceId: string;
  signer: Signer;
  audience: string;
  exportedAt: number;
  run: RunSummary & { run_nonce: string };
  records: JournalRecord[];
  values: Record<string, unknown>;
  /** The run's place in the device's run log: format 3 with it (the edge always gives it), format 2 without. */
  log?: LogProof;
}): Promise<string> {
  const payload: JournalExport = {
    format_version: opts.log !== undefined ? JOURNAL_FORMAT_VERSION : 2,
    type: 'journal',
    issuer: opts.deviceId,
    kid: opts.signer.kid,
    audience: opts.audience,
    version: 1,
    issued_at: opts.exportedAt,
    expires_at: null,
    run: opts.run,
    records: opts.records,
    values: opts.values,
    ...(opts.log !== undefined ? { log: opts.log } : {}),
  };
  return sealEnvelope(payload as unknown as JournalExport & Record<string, unknown>, opts.signer);
}

/** Verifies an exported journal: envelope signature, every record signature, the chain, the values. */
export async function openJournalExport(
  text: string | Uint8Array,
  device: TrustedKey,
  audience: string,
): Promise<OpenedEnvelope<JournalExport>> {
  const opened = await openEnvelope(text, [device], 'journal');
  const p = opened.payload as Partial<JournalExport>;
  if (p.audience !== audience) throw refused('wrong_audience', 'the journal was exported for another cell', 'forbidden');
  if (!isObject(p.run) || typeof p.run.run_id !== 'string' || !Array.isArray(p.records) || p.records.length === 0 || !isObject(p.values)) {
    throw refused('malformed', 'the journal export is malformed', 'invalid_request');
  }
  const verdict = await verifyJournal(p.records, (kid) => (kid === device.kid ? device.jwk : undefined));
  if (!verdict.ok) {
    throw refused('journal_invalid', `the journal does not verify at seq ${verdict.seq}: ${verdict.reason}`, 'forbidden', {
      seq: verdict.seq,
    });
  }
  const first = p.records[0]!;
  if (first.run_id !== p.run.run_id || first.graph_hash !== p.run.graph_hash) {
    throw refused('journal_invalid', 'the journal records do not belong to the named run', 'forbidden');
  }
  if (p.format_version !== 1) {
    const nonce = p.run.run_nonce;
    if (typeof nonce !== 'string' || !RUN_NONCE.test(nonce))
      throw refused('malformed', 'the journal export is malformed', 'invalid_request');
    if ((await edgeRunId(device.kid, nonce)) !== p.run.run_id) {
      throw refused('run_not_of_device', 'the run id is not one the signing device derives: another device ran it', 'forbidden');
    }
  } else if (p.run.run_nonce !== undefined) {
    throw refused('malformed', 'a format 1 journal export has no run nonce', 'invalid_request');
  }
  if ((p.format_version ?? 0) >= 3) {
    const head = { run_id: p.run.run_id, journal_head: recordHash(p.records.at(-1)!), graph_hash: p.run.graph_hash };
    const log = p.log;
    const v =
      isObject(log) && log['origin'] === deviceLogOrigin(device.kid)
        ? await checkLogProof(log as unknown as LogProof, runLeafHash(head), [device])
        : { ok: false as const, reason: "the log is not the device's own" };
    if (!v.ok) throw refused('device_log_invalid', `the device's run log does not hold this journal: ${v.reason}`, 'forbidden');
  } else if (p.log !== undefined) {
    throw refused('malformed', 'a journal export before format 3 carries no run log', 'invalid_request');
  }
  for (const [h, v] of Object.entries(p.values)) {
    let actual: string;
    try {
      actual = contentHash(v);
    } catch {
      throw refused('malformed', 'a journal value is not plain JSON', 'invalid_request');
    }
    if (actual !== h) throw refused('journal_invalid', 'a journal value does not match its hash', 'forbidden');
  }
  return opened as OpenedEnvelope<JournalExport>;
}
