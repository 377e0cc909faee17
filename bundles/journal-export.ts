/**
 * Journal export: a run's signed journal carried back from a device.
 *
 * Payload (type `journal`): issuer = device id, kid = device key id,
 * audience = the cell the device trusts, version = 1, and
 *   run: { run_id, crew_id, graph_hash, outcome }
 *   records: JournalRecord[]      (core/journal v1, each signed by the device key)
 *   values: { [content hash]: JSON value }   the step inputs/outputs by hash
 * The envelope is signed by the same device key. The importing cell checks
 * the envelope against the registered device key, then every record's
 * signature and the hash chain with core's verifyJournal, and that every
 * carried value hashes to its name.
 */
import { contentHash } from '../core/canonical.ts';
import type { JournalRecord } from '../core/journal/record.ts';
import { verifyJournal } from '../core/journal/verify.ts';
import { PAYLOAD_FORMAT_VERSION } from './format.ts';
import { isObject, openEnvelope, refused, sealEnvelope, type OpenedEnvelope, type PayloadHeader } from './envelope.ts';
import type { Signer, TrustedKey } from './codec.ts';

export interface RunSummary {
  run_id: string;
  crew_id: string;
  graph_hash: string;
  outcome: string;
}

export interface JournalExport extends PayloadHeader {
  type: 'journal';
  run: RunSummary;
  records: JournalRecord[];
  values: Record<string, unknown>;
}

export async function buildJournalExport(opts: {
  deviceId: string;
  signer: Signer;
  audience: string;
  exportedAt: number;
  run: RunSummary;
  records: JournalRecord[];
  values: Record<string, unknown>;
}): Promise<string> {
  const payload: JournalExport = {
    format_version: PAYLOAD_FORMAT_VERSION,
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
