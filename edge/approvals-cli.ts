/**
 * `edge approvals list --data DIR [--run RUN_ID]`: the approvals the device's runs wait on, read from its
 * data directory (as `edge journal export` reads it), whether `edge serve` runs or not. One JSON object:
 * `{ approvals: [{ run_id, crew_id, requester, state, ...pending approval }] }`, each pending approval in
 * the cell's shape (the run view's `pending_approvals`, with its decisions so far), oldest run first.
 * Deciding goes through `edge serve` (an approver authenticates there).
 */
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { readDevice } from './files.ts';
import { interruptedRuns, readRun } from './runs.ts';
import { approvalsView } from './approvals.ts';
import { Refusal, UsageError, type CommandHelp } from '../runtime/cli.ts';

/** The help of `approvals list` (edge/main.ts's command table). */
export const APPROVALS_HELP: Record<'list', CommandHelp> = {
  list: {
    summary: "the approvals the device's waiting runs wait on (JSON; decide them at edge serve)",
    usage: '--data DIR [--run RUN_ID]',
  },
};

/** `approvals list`: argv[0] is the subcommand (the dispatcher checked it), then the options. */
export async function approvalsCommand(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  if (sub !== 'list') throw new UsageError('approvals takes list');
  const { values } = parseArgs({ args: rest, options: { data: { type: 'string' }, run: { type: 'string' } }, strict: true });
  if (!values.data) throw new UsageError('approvals list needs --data DIR');
  const dir = resolve(values.data);
  readDevice(dir);
  const ids = values.run !== undefined ? [values.run] : interruptedRuns(dir);
  const approvals: Record<string, unknown>[] = [];
  for (const id of ids) {
    const r = readRun(dir, id);
    if (!r) throw new Refusal(`no run ${id} on this device`);
    for (const p of approvalsView(dir, r.run, r.journal).pending_approvals)
      approvals.push({ run_id: r.run.run_id, crew_id: r.run.crew_id, requester: r.run.requester, state: r.run.state, ...p });
  }
  process.stdout.write(JSON.stringify({ approvals }) + '\n');
}
