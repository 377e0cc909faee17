/**
 * Shared by the end-to-end run tests (run-restart, group-runs, the effects
 * crash tests): the admin API of a real cell over HTTP, a poll helper, a
 * Prometheus sample reader, the verification of a run's journal against the
 * group's published keys, and a run's lost outcome: the wait for it, an
 * operator's resolution, and the journal's proof that it was lost in a crash.
 */
import assert from 'node:assert/strict';
import { verifyJournal, type JournalVerdict } from '../../core/journal/verify.ts';
import type { JournalRecord } from '../../core/journal/record.ts';
import type { CellProcess } from '../helpers/cell-process.ts';
import { httpApi, ok, type Api } from '../helpers/teams.ts';

export { httpApi };

/** Polls `fn` until it returns something other than undefined; fails after `ms`. */
export async function until<T>(what: string, fn: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const v = await fn();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** The states a run ends in. */
export const TERMINAL = ['completed', 'failed', 'refused', 'cancelled'];

/** The run at `path` once it has ended, as the API answers it. */
function ended(api: Api, path: string, runId: string, ms: number): Promise<any> {
  return until(
    `run ${runId} to end`,
    async () => {
      const s = await api.request('GET', path);
      if (s.status !== 200) throw new Error(`run ${runId}: ${s.status} ${s.text}`);
      return TERMINAL.includes(s.body.state) ? s.body : undefined;
    },
    ms,
  );
}

/** A crew run once it has ended (completed, failed, refused or cancelled), as the API answers it. */
export function crewRunEnded(api: Api, crewId: string, runId: string, ms = 60_000): Promise<any> {
  return ended(api, `/api/public/v1/admin/agent-teams/crews/${crewId}/runs/${runId}`, runId, ms);
}

/** A run (job or crew) once it has ended, as the jobs API answers it. */
export function jobRunEnded(api: Api, runId: string, ms = 90_000): Promise<any> {
  return ended(api, `/api/public/v1/admin/jobs/runs/${runId}`, runId, ms);
}

/** The metrics URL a cell started with `--metrics-port 0` printed. */
export function metricsUrl(cell: CellProcess): string {
  const m = /metrics on (http:\/\/127\.0\.0\.1:\d+\/metrics)/.exec(cell.output());
  if (!m) throw new Error(`the cell printed no metrics URL:\n${cell.output()}`);
  return m[1]!;
}

/** The sum of the samples of `name` whose labels include `labels` (0 when none). */
export async function metric(url: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(url)).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = new Map([...(m[3] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1]!, x[2]!]));
    if (Object.entries(labels).every(([k, v]) => have.get(k) === v)) sum += Number(m[4]);
  }
  return sum;
}

/** A run's journal over HTTP, verified against the group's published identity keys. */
export async function verifiedJournal(
  api: Api,
  cellUrl: string,
  runId: string,
): Promise<{ records: JournalRecord[]; verdict: JournalVerdict }> {
  const j = await api.request('GET', `/api/public/v1/admin/jobs/runs/${runId}/journal?limit=10000`);
  if (j.status !== 200) throw new Error(`journal of ${runId}: ${j.status} ${j.text}`);
  const records = j.body.records as JournalRecord[];
  const pub = (await (await fetch(`${cellUrl}/.well-known/cell-keys.json`)).json()) as { keys: { kid: string; jwk: JsonWebKey }[] };
  const keys = new Map(pub.keys.map((k) => [k.kid, k.jwk]));
  return { records, verdict: await verifyJournal(records, (kid) => keys.get(kid)) };
}

const JOB_RUNS = '/api/public/v1/admin/jobs/runs';

/** A run (job or crew) as the jobs API shows it. */
export const runView = (api: Api, runId: string): Promise<any> => ok(api, 'GET', `${JOB_RUNS}/${runId}`);

/** The run's view once it waits `outcome_unknown` (a side-effecting call whose outcome was lost). */
export const waitingOnOutcome = (api: Api, runId: string): Promise<any> =>
  until(`run ${runId} to wait outcome_unknown`, async () => {
    const v = await runView(api, runId);
    return v.state === 'outcome_unknown' ? v : undefined;
  });

/** An operator's resolution of the lost outcome of step `stepId` (`{ resolution: retry | record | fail, result? }`). */
export const resolveOutcome = (api: Api, runId: string, stepId: string, body: unknown): Promise<any> =>
  ok(api, 'POST', `${JOB_RUNS}/${runId}/outcomes/${encodeURIComponent(stepId)}`, body);

/**
 * The crash path, from the run's verified journal: the call's one intent (naming `key` before the call
 * left), then the run taken back by a cell after the crash, then the wait on an operator naming `key`.
 */
export async function assertLostInTheCrash(api: Api, url: string, runId: string, key: string): Promise<void> {
  const { records, verdict } = await verifiedJournal(api, url, runId);
  assert.deepEqual(verdict, { ok: true });
  const kinds = records.map((r) => r.kind);
  const intent = records.findIndex((r) => r.kind === 'intent' && r.data?.['effect_key'] !== undefined);
  const taken = kinds.indexOf('taken_over');
  const wait = records.findIndex((r) => r.kind === 'waiting' && r.data?.['reason'] === 'outcome_unknown');
  assert.ok(intent >= 0 && taken > intent && wait > taken, `intent, then taken_over, then the wait: ${kinds.join(',')}`);
  assert.equal(records[intent]!.data?.['effect_key'], key, 'the key was in the intent, before the call left');
  assert.equal((records[wait]!.data?.['effect'] as { effect_key?: string } | undefined)?.effect_key, key);
}
