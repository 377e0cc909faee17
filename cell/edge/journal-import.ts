/**
 * Importing a journal carried back from a device (`POST /admin/edge/journals`). The device signs
 * whatever it writes, so the cell believes a journal only as far as it can check it:
 *   0. the signing device is registered (404) and active (409 `device_disabled`, `device_deleted`);
 *   1. the envelope and every record verify against the registered device key, the chain holds,
 *      every value matches its hash, and the run id is the device's (bundles/journal-export.ts);
 *   2. a format 1 export (run id bound to no device) is refused (`run_unbound`);
 *   3. the run ended, and its outcome is the one its records end with (`outcome_mismatch`);
 *   4. a fork's claimed parent is a journal imported here, and the lineage verifies against it
 *      (`parent_unknown`, `journal_invalid`);
 *   4b. every approval it records is one the device was entitled to take (import-approvals.ts);
 *   4c. every resolution of a lost outcome it records names an operator its key bundle let resolve (same file);
 *   5. every MCP tool call names a tool the crew bundle carried, under its pin (judge-mcp-calls.ts), and
 *      every built-in tool call it records was one its seat was entitled to under the bundle the device
 *      held (journal-acts.ts: 403 `journal_act_not_entitled`, naming the record);
 *   6. a `completed` journal replays to completion on the graph a crew bundle of this cell carried
 *      under its graph hash (core/engine/replay.ts): one cut short and ended by hand does not;
 *   7. the same export again is idempotent; a longer journal of the same run that extends the stored
 *      one (same chain, more records: an older edge exported a run still waiting) replaces it; any
 *      other journal for the run is 409 `journal_exists`. A run stored (or completed) here joins the
 *      group's run log (cell/receipts), and its model spending is charged to the agents' ledgers (out of what
 *      the device holds: teams `chargeDevice`): once, the records a longer journal adds only, a fork's own
 *      records only (core/journal/usage.ts).
 * Every refusal is on the audit trail (`edge.journal.import`, outcome refused, its reason).
 */
import { ServiceError, conflict, notFound } from '../../core/errors.ts';
import type { Reason } from '../../core/reasons.ts';
import type { Graph } from '../../core/engine/types.ts';
import { replaysToCompletion } from '../../core/engine/replay.ts';
import { refuseUnentitledActs } from './journal-acts.ts';
import { recordHash } from '../../core/journal/hash.ts';
import { forkPointOf, type ParentJournal } from '../../core/journal/lineage.ts';
import type { JournalRecord } from '../../core/journal/record.ts';
import { verifyJournal } from '../../core/journal/verify.ts';
import { modelUsageByAgent } from '../../core/journal/usage.ts';
import { splitEnvelope } from '../../bundles/envelope.ts';
import { openJournalExport, outcomeProblem, type JournalExport } from '../../bundles/journal-export.ts';
import type { AuthContext } from '../context.ts';
import type { EdgeContext } from './context.ts';
import { beyondAllotment } from '../teams/api.ts';
import type { DeviceRow } from './devices.ts';
import * as repo from './repository.ts';
import { judgeMcpCalls } from './judge-mcp-calls.ts';
import { checkApprovals, checkResolutions } from './import-approvals.ts';

/** Forks of forks followed at most this deep to a journal that is not a fork. */
const MAX_LINEAGE_DEPTH = 16;

/** What the import answers with: the stored row but the export itself. */
export type ImportedJournal = Omit<repo.JournalRow, 'hash' | 'export' | 'charged_records'>;

/** The records of a stored export. */
function recordsOf(row: repo.JournalRow): JournalRecord[] {
  return (JSON.parse(splitEnvelope(row.export)!.payload) as { records: JournalRecord[] }).records;
}

export async function importJournal(ctx: EdgeContext, auth: AuthContext, text: string): Promise<ImportedJournal> {
  const { core, iam, devices } = ctx;
  const parts = splitEnvelope(text);
  if (!parts || typeof parts.header['kid'] !== 'string')
    throw new ServiceError('invalid_request', 'the body is not a signed journal export', { details: { reason: 'malformed' } });
  const device = await devices.get(parts.header['kid']);
  if (!device) throw notFound('device');
  const refuse = async (
    reason: Reason,
    message: string,
    code: 'forbidden' | 'conflict' | 'invalid_request',
    extra: Record<string, unknown> = {},
  ): Promise<never> => {
    await iam.auditNow({
      actor: auth.principal.id,
      action: 'edge.journal.import',
      target: device.device_id,
      outcome: 'refused',
      details: { reason, ...extra },
    });
    throw new ServiceError(code, message, { details: { reason, ...extra } });
  };
  if (device.status !== 'active') {
    const reason = device.status === 'disabled' ? 'device_disabled' : 'device_deleted';
    await refuse(reason, `the device that signed the journal is ${device.status}`, 'conflict', { device_id: device.device_id });
  }
  let opened;
  try {
    opened = await openJournalExport(
      text,
      { kid: device.device_id, jwk: JSON.parse(device.public_jwk) as JsonWebKey },
      core.config.groupId,
    );
  } catch (e) {
    await iam.auditNow({
      actor: auth.principal.id,
      action: 'edge.journal.import',
      target: device.device_id,
      outcome: 'refused',
      details: { reason: (e as ServiceError).details?.['reason'] ?? 'invalid' },
    });
    throw e;
  }
  const p = opened.payload;
  const runId = p.run.run_id;
  if (p.format_version === 1) {
    // A format 1 export carries no run nonce: its run id is bound to no device, and importing it would
    // let any registered device take another device's run id first (issue 20, finding 17).
    await refuse(
      'run_unbound',
      'a format 1 journal export does not bind its run id to the device that ran it; runs made by an edge of this release are importable',
      'forbidden',
      { run_id: runId },
    );
  }
  const problem = outcomeProblem(p.run, p.records);
  if (problem !== null)
    await refuse('outcome_mismatch', `the journal's outcome does not match its records: ${problem}`, 'forbidden', { run_id: runId });
  await checkLineage(ctx, device, p, refuse);
  await judgeMcpCalls(runId, p.records, () => graphOf(ctx, p.run.graph_hash), refuse);
  await checkApprovals(ctx, device.device_id, p, () => graphOf(ctx, p.run.graph_hash), refuse);
  await checkResolutions(ctx, device.device_id, p, refuse);
  await refuseUnentitledActs(
    p,
    () => graphOf(ctx, p.run.graph_hash),
    (id) => ctx.teams.crew(id),
    refuse,
  );
  if (p.run.outcome === 'completed') {
    const graph = await graphOf(ctx, p.run.graph_hash);
    if (graph === undefined) {
      await refuse(
        'unknown_graph',
        'no crew bundle of this cell carried the graph this run says it completed, so its journal cannot be checked',
        'invalid_request',
        { run_id: runId, graph_hash: p.run.graph_hash },
      );
    }
    const values = new Map(Object.entries(p.values));
    const replay = await replaysToCompletion(graph!, p.records, (h) => (values.has(h) ? values.get(h) : undefined));
    if (!replay.ok) await refuse('outcome_mismatch', `the journal says completed, but ${replay.problem}`, 'forbidden', { run_id: runId });
  }
  // Whose ledger each seat's spending is charged to: the seat's agent in the graph a bundle carried (not the agent a
  // record names: the device's word could name any agent of the cell), and only for a graph issued to this device.
  // A journal of any other graph (another device's, a crew's no bundle carried, one issued before the cell kept
  // who got which) charges nobody: the device holds no budget of it.
  const issued = await repo.crewIssued(core.store, device.device_id, p.run.graph_hash);
  const seats = issued ? ((await graphOf(ctx, p.run.graph_hash))?.seats ?? {}) : {};
  // The spending of the records a stored journal of the run has not charged (all of them when there is none).
  const unchargedUsage = (stored: repo.JournalRow | undefined) =>
    modelUsageByAgent(
      p.records.slice(stored?.charged_records ?? 0),
      (seat) => (Object.hasOwn(seats, seat) ? (seats[seat]?.agent_id ?? null) : null),
      (h) => p.values[h],
    );
  // What a device spent never passes what it was handed (its bundles' ceilings never do): a journal that says
  // otherwise is not believed, and nothing of it is stored or charged. (Checked again where it is charged.)
  const stored = await repo.journalByRun(core.store, runId);
  if (stored?.hash !== opened.hash) {
    const over = beyondAllotment(await ctx.teams.deviceHolds(device.device_id), unchargedUsage(stored));
    if (over !== null)
      await refuse(
        'usage_beyond_allotment',
        `the journal records more model spending for ${over.agent_id} than the device was ever handed of its budget`,
        'forbidden',
        { run_id: runId, ...over },
      );
  }
  const now = core.clock.now();
  const row = {
    run_id: runId,
    device_id: device.device_id,
    crew_id: p.run.crew_id,
    graph_hash: p.run.graph_hash,
    outcome: p.run.outcome,
    record_count: p.records.length,
    hash: opened.hash,
    export: text,
    imported_at: now,
    imported_by: auth.principal.id,
    charged_records: p.records.length,
  };
  await core.store.write(async (tx) => {
    const existing = await repo.journalByRun(tx, runId);
    let extended = false;
    if (existing && existing.hash !== opened.hash) {
      if (!extends_(existing, device, p.records)) {
        throw conflict('a different journal for this run was already imported', { reason: 'journal_exists' });
      }
      await repo.replaceJournal(tx, existing.hash, row);
      extended = true;
    }
    if (!existing) await repo.insertJournal(tx, row);
    // The device's spending, charged once: all of a new journal's; of a longer one, the records the stored one had
    // not charged (all of them when it was stored before imports charged). The same export again charges nothing.
    const charged = !existing || extended ? await ctx.teams.chargeDevice(tx, device.device_id, unchargedUsage(existing)) : {};
    // The device's run joins the run log, as a run of the group does when it ends (once: an extended prefix
    // was not a finished run, so it is logged now).
    if (!existing || extended) {
      await ctx.runLog.queueTx(
        tx,
        { run_id: runId, journal_head: recordHash(p.records.at(-1)!), graph_hash: p.run.graph_hash },
        `edge:${device.device_id}`,
      );
    }
    await iam.audit(tx, {
      at: now,
      actor: auth.principal.id,
      action: 'edge.journal.import',
      target: device.device_id,
      outcome: 'ok',
      details: {
        run_id: runId,
        ...(extended ? { extends: existing!.record_count } : {}),
        ...(Object.keys(charged).length > 0 ? { charged } : {}),
      },
    });
  });
  const { hash: _hash, export: _export, imported_by: _by, charged_records: _charged, ...view } = row;
  return view;
}

/**
 * Whether `records` extend the stored journal: the same device's, longer, and its record at the stored
 * journal's last seq is the stored last record (records are hash-chained, so the whole prefix is the same).
 */
function extends_(stored: repo.JournalRow, device: DeviceRow, records: readonly JournalRecord[]): boolean {
  if (stored.device_id !== device.device_id || records.length <= stored.record_count) return false;
  const mine = recordsOf(stored);
  const at = records[mine.length - 1];
  return at !== undefined && mine.length > 0 && recordHash(at) === recordHash(mine.at(-1)!);
}

/** The graph a run of `graphHash` ran: the one a crew bundle of this cell carried, else a crew's current one. */
async function graphOf(ctx: EdgeContext, graphHash: string): Promise<Graph | undefined> {
  const kept = await repo.crewGraphByHash(ctx.core.store, graphHash);
  if (kept !== undefined) return JSON.parse(kept) as Graph;
  return (await ctx.teams.crewByGraph(graphHash))?.graph;
}

/**
 * A fork's claimed parent must be a journal imported here, and the fork's lineage must verify against it
 * (and against its own parent when it is a fork too): every ancestor's records, signed by the devices that
 * ran them, the fork point's hash and every reused record.
 */
async function checkLineage(
  ctx: EdgeContext,
  device: DeviceRow,
  p: JournalExport,
  refuse: (reason: Reason, message: string, code: 'forbidden' | 'conflict', extra?: Record<string, unknown>) => Promise<never>,
): Promise<void> {
  let from = forkPointOf(p.records);
  if (from === null) return;
  const keys = new Map<string, JsonWebKey>([[device.device_id, JSON.parse(device.public_jwk) as JsonWebKey]]);
  const chain: JournalRecord[][] = [];
  for (let depth = 0; from !== null; depth++) {
    if (depth >= MAX_LINEAGE_DEPTH)
      await refuse('journal_invalid', `forks are followed at most ${MAX_LINEAGE_DEPTH} deep`, 'forbidden', { run_id: p.run.run_id });
    const row = await repo.journalByRun(ctx.core.store, from.run_id);
    if (row === undefined) {
      await refuse('parent_unknown', `the run this journal was forked from (${from.run_id}) has not been imported here`, 'conflict', {
        run_id: p.run.run_id,
        parent_run_id: from.run_id,
      });
    }
    const signer = await ctx.devices.get(row!.device_id);
    if (signer) keys.set(signer.device_id, JSON.parse(signer.public_jwk) as JsonWebKey);
    const records = recordsOf(row!);
    chain.push(records);
    from = forkPointOf(records);
  }
  let parent: ParentJournal | undefined;
  for (let i = chain.length - 1; i >= 0; i--) parent = parent === undefined ? { records: chain[i]! } : { records: chain[i]!, parent };
  const v = await verifyJournal(p.records, (kid) => keys.get(kid), { parent: parent! });
  if (!v.ok)
    await refuse('journal_invalid', `the journal's lineage does not verify at seq ${v.seq}: ${v.reason}`, 'forbidden', { seq: v.seq });
}
