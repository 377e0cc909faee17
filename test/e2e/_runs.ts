/**
 * Shared by the end-to-end run tests (run-restart, group-runs): the admin API
 * of a real cell over HTTP, a poll helper, a Prometheus sample reader, and the
 * verification of a run's journal against the group's published keys.
 */
import { verifyJournal, type JournalVerdict } from '../../core/journal/verify.ts';
import type { JournalRecord } from '../../core/journal/record.ts';
import type { CellProcess } from '../helpers/cell-process.ts';
import { httpApi, type Api } from '../helpers/teams.ts';

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
