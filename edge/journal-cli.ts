/**
 * `edge journal export RUN --data DIR --out FILE`: the run's device-signed
 * journal, its step values and outcome, in a signed envelope addressed to the
 * pinned cell, for `POST /api/public/v1/admin/edge/journals`.
 */
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { buildJournalExport, outcomeProblem } from '../bundles/journal-export.ts';
import { signerFromJwk } from '../bundles/codec.ts';
import { readDevice, readTrust, writeFileDurable } from './files.ts';
import { readRun } from './runs.ts';
import { appendRunHead, deviceLogProof } from './run-log.ts';
import { Refusal, UsageError, type CommandHelp } from '../runtime/cli.ts';

/** The help of `journal export` (edge/main.ts's command table). */
export const JOURNAL_HELP: Record<'export', CommandHelp> = {
  export: {
    summary: "write a run's signed journal for the cell (POST /edge/journals)",
    usage: 'RUN_ID --data DIR --out FILE',
  },
};

/** `journal export`: argv[0] is the subcommand (the dispatcher checked it), then the run id and the options. */
export async function journalCommand(argv: string[]): Promise<void> {
  const [sub, runId, ...rest] = argv;
  if (sub !== 'export') throw new UsageError('journal takes export');
  if (!runId || runId.startsWith('-')) throw new UsageError('journal export needs the RUN_ID first');
  const { values } = parseArgs({ args: rest, options: { data: { type: 'string' }, out: { type: 'string' } }, strict: true });
  if (!values.data || !values.out) throw new UsageError('journal export needs --data DIR and --out FILE');
  const dir = resolve(values.data);
  const device = readDevice(dir);
  const trust = readTrust(dir);
  const r = readRun(dir, runId);
  if (!r) throw new Refusal(`no run ${runId} on this device`);
  if (r.run.state === 'running') throw new Refusal(`run ${runId} is still running`);
  // A waiting run (a retry's backoff, a timer) has more to record: the cell keeps what it imports as final.
  if (r.run.state === 'waiting') throw new Refusal(`run ${runId} is waiting (it resumes by itself): export it once it has ended`);
  if (r.journal.records.length === 0) throw new Refusal(`run ${runId} has no journal records`);
  const problem = outcomeProblem({ outcome: r.run.state }, r.journal.records);
  if (problem !== null) throw new Refusal(`run ${runId} cannot be exported: ${problem}`);
  if (r.run.run_nonce === undefined)
    throw new Refusal(`run ${runId} was made by an older edge: its run id is not bound to this device, and the cell refuses its journal`);
  // The run's place in the device's own log (a run finished by an older release joins it now).
  appendRunHead(dir, device.device_id, r.run.run_id, r.journal.records, r.run.graph_hash);
  const log = await deviceLogProof(dir, device, r.run.run_id);
  if (!log) throw new Error(`run ${runId} is not in the device's run log`);
  const text = await buildJournalExport({
    deviceId: device.device_id,
    signer: signerFromJwk(device.device_id, device.private_jwk),
    audience: trust.cell_id,
    exportedAt: Date.now(),
    run: { run_id: r.run.run_id, run_nonce: r.run.run_nonce, crew_id: r.run.crew_id, graph_hash: r.run.graph_hash, outcome: r.run.state },
    records: r.journal.records,
    values: r.journal.values,
    log,
  });
  writeFileDurable(values.out, text);
  process.stdout.write(`exported ${r.journal.records.length} records of ${runId} (${r.run.state}) to ${values.out}\n`);
}
