/**
 * Schedules: the job definitions the cell fires on a cron
 * (`GET /admin/jobs/definitions`, system.orchestration.admin.read), searched
 * by name, id, job type, cron or author: cron and time zone, the next fires,
 * the last runs it started with their outcome (runs whose `source` is
 * `schedule:<id>`, among the newest runs; one started on demand says who fired
 * it), running or why it is paused (its author archived, lacking a
 * permission…), and Run now / Pause / Resume / Delete for a session with
 * system.orchestration.admin.write (hidden otherwise; the cell decides anyway).
 */
import { useState } from 'preact/hooks';
import { ADMIN, ApiError, call, describeError, seg } from '../api.ts';
import { can } from '../auth/session.ts';
import { href } from '../router.ts';
import { Confirm, ErrorNote, isolated, StateBadge, Time, useApp, useLoad, Who } from '../ui.tsx';
import { loadNewestRuns, type RunRow } from './runs.tsx';

export interface Definition {
  schedule_id: string;
  name: string;
  job_type: string;
  workspace_id: string;
  cron: string;
  timezone: string;
  catch_up: string;
  enabled: boolean;
  deleted: boolean;
  next_fire_at: string | null;
  /** The next fire times, next_fire_at first (absent from a cell older than this console). */
  next_fires?: string[];
  last_fire_at: string | null;
  last_run_id: string | null;
  fire_count: number;
  disabled_reason: string | null;
  author_id: string;
  created_at: string;
}

const DISABLED: Record<string, string> = {
  requested: 'paused by an operator',
  author_archived: 'its author was archived',
  author_deleted: 'its author was deleted',
  author_purged: 'its author was purged',
  author_inactive: 'its author is no longer active',
  author_lacks_permission: 'its author lost a permission it needs',
  author_authority_unknown: "its author's authority is unknown",
};

/** Words for why a definition is disabled. */
export function disabledText(reason: string | null): string {
  if (!reason) return 'disabled';
  return DISABLED[reason] ?? reason;
}

function Relative({ at }: { at: string | null }) {
  if (!at) return null;
  const ms = Date.parse(at) - Date.now();
  const s = Math.round(Math.abs(ms) / 1000);
  const text =
    s < 90 ? `${s} s` : s < 5400 ? `${Math.round(s / 60)} min` : s < 172_800 ? `${Math.round(s / 3600)} h` : `${Math.round(s / 86_400)} d`;
  return <span class="muted"> ({ms >= 0 ? `in ${text}` : `${text} ago`})</span>;
}

function Actions({ d, onDone }: { d: Definition; onDone(): void }) {
  const { session } = useApp();
  const [ask, setAsk] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [started, setStarted] = useState<string | null>(null);
  if (!can(session, 'system.orchestration.admin.write') || d.deleted) return null;
  const act = async (method: string, path: string) => {
    setBusy(true);
    setError(null);
    try {
      const r = await call<{ run_id?: string }>(session, method, path);
      if (path.endsWith('/run') && r?.run_id) setStarted(r.run_id);
      setAsk(false);
      onDone();
    } catch (e) {
      // A crew run refused before its first step is still a run: link it.
      if (e instanceof ApiError && typeof e.details?.['run_id'] === 'string') setStarted(e.details['run_id']);
      setError(describeError(e));
    } finally {
      setBusy(false);
    }
  };
  const base = `${ADMIN}/jobs/definitions/${seg(d.schedule_id)}`;
  const named = isolated(d.name, 40);
  return (
    <div class="buttons">
      <button
        type="button"
        class="primary run-now"
        disabled={busy}
        onClick={() => act('POST', `${base}/run`)}
        aria-label={`Run now: ${named}`}
      >
        Run now
      </button>{' '}
      {d.enabled ? (
        <button type="button" class="disable" disabled={busy} onClick={() => act('POST', `${base}/disable`)} aria-label={`Pause ${named}`}>
          Pause
        </button>
      ) : (
        <button type="button" class="enable" disabled={busy} onClick={() => act('POST', `${base}/enable`)} aria-label={`Resume ${named}`}>
          Resume
        </button>
      )}{' '}
      {ask ? (
        <Confirm
          question={
            <>
              Delete <bdi>{d.name}</bdi>?
            </>
          }
          act="Confirm delete"
          cls="danger"
          keep="Keep it"
          busy={busy}
          onConfirm={() => act('DELETE', base)}
          onKeep={() => setAsk(false)}
        />
      ) : (
        <button type="button" class="delete" disabled={busy} onClick={() => setAsk(true)} aria-label={`Delete ${named}`}>
          Delete
        </button>
      )}
      {started ? (
        <p role="status" class="started">
          Started run{' '}
          <a href={href('runs', started)}>
            <code>{started}</code>
          </a>{' '}
          as you.
        </p>
      ) : null}
      {error ? (
        <p class="error" role="alert">
          {error}
        </p>
      ) : null}
    </div>
  );
}

export function SchedulesView({ scheduleId }: { scheduleId: string | null }) {
  const { session, names } = useApp();
  const [q, setQ] = useState('');
  const data = useLoad(
    async (signal) => {
      const defs = await call<{ items: Definition[]; total: number }>(session, 'GET', `${ADMIN}/jobs/definitions?limit=1000`, { signal });
      let runs: RunRow[] = [];
      try {
        runs = (await loadNewestRuns(session, signal, 0, { source: 'schedule' })).rows;
      } catch {
        // the last runs are a bonus: the definitions still show
      }
      return { defs: defs.items, total: defs.total, runs };
    },
    [session],
    10_000,
  );
  const bySchedule = new Map<string, RunRow[]>();
  for (const r of [...(data.data?.runs ?? [])].reverse()) {
    if (!r.source?.startsWith('schedule:')) continue;
    const id = r.source.slice('schedule:'.length);
    bySchedule.set(id, [...(bySchedule.get(id) ?? []), r]);
  }
  const needle = q.trim().toLowerCase();
  const shown = (data.data?.defs ?? []).filter(
    (d) =>
      !needle ||
      [d.name, d.schedule_id, d.job_type, d.cron, d.timezone, d.author_id, names.get(d.author_id) ?? '', d.enabled ? 'running' : 'paused']
        .join(' ')
        .toLowerCase()
        .includes(needle),
  );
  return (
    <>
      <h1>Schedules</h1>
      <p class="muted">Job definitions the cell starts on a cron. Times are shown in this browser's time zone; hover a time for UTC.</p>
      <form class="filters" aria-label="Search schedules" onSubmit={(e) => e.preventDefault()}>
        <label>
          Search
          <input
            id="schedules-search"
            type="search"
            value={q}
            onInput={(e) => setQ((e.target as HTMLInputElement).value)}
            placeholder="name, id, job type, cron, author"
          />
        </label>
        <span class="muted" role="status" id="schedules-status">
          {data.data ? `${shown.length} of ${data.data.defs.length} schedules` : ''}
        </span>
      </form>
      <ErrorNote error={data.error} prefix="Schedules could not be loaded" />
      {!data.data && data.loading ? <p role="status">Loading schedules…</p> : null}
      {data.data && data.data.defs.length === 0 ? <p class="muted">No schedule.</p> : null}
      <div class="cards" id="schedules">
        {shown.map((d) => {
          const last = (bySchedule.get(d.schedule_id) ?? []).slice(0, 5);
          const hid = `sch-${d.schedule_id}`;
          return (
            <article
              class={`panel schedule${d.schedule_id === scheduleId ? ' selected' : ''}`}
              key={d.schedule_id}
              data-schedule={d.schedule_id}
              data-enabled={String(d.enabled)}
              aria-labelledby={hid}
            >
              <h2 id={hid}>
                <bdi>{d.name}</bdi> <span class="muted small">{d.job_type}</span>{' '}
                {d.enabled ? <span class="state state-active">running</span> : <span class="state state-cancelled">paused</span>}
              </h2>
              <dl class="facts">
                <dt>Cron</dt>
                <dd>
                  <code class="cron">{d.cron}</code> in <span class="tz">{d.timezone}</span>
                </dd>
                <dt>Next fire</dt>
                <dd class="next-fire">
                  {d.next_fire_at ? (
                    <>
                      <Time at={d.next_fire_at} />
                      <Relative at={d.next_fire_at} />
                    </>
                  ) : (
                    <span class="muted">none: {d.enabled ? 'no fire time ahead' : disabledText(d.disabled_reason)}</span>
                  )}
                </dd>
                {(d.next_fires ?? []).length > 1 ? (
                  <>
                    <dt>Then</dt>
                    <dd>
                      <ol class="next-fires">
                        {(d.next_fires ?? []).slice(1).map((t) => (
                          <li key={t}>
                            <Time at={t} />
                          </li>
                        ))}
                      </ol>
                    </dd>
                  </>
                ) : null}
                {!d.enabled ? (
                  <>
                    <dt>Why paused</dt>
                    <dd class="disabled-reason">{disabledText(d.disabled_reason)}</dd>
                  </>
                ) : null}
                <dt>Acts as</dt>
                <dd>
                  <Who id={d.author_id} />
                </dd>
                <dt>Fired</dt>
                <dd>
                  {d.fire_count} time{d.fire_count === 1 ? '' : 's'}
                  {d.last_fire_at ? (
                    <>
                      , last <Time at={d.last_fire_at} />
                      <Relative at={d.last_fire_at} />
                    </>
                  ) : null}
                </dd>
                <dt>Last runs</dt>
                <dd class="last-runs">
                  {last.length === 0 ? (
                    d.last_run_id ? (
                      <a href={href('runs', d.last_run_id)}>
                        <code>{d.last_run_id}</code>
                      </a>
                    ) : (
                      <span class="muted">none yet</span>
                    )
                  ) : (
                    <ul class="plain">
                      {last.map((r) => (
                        <li key={r.run_id} data-run={r.run_id}>
                          <a href={href('runs', r.run_id)}>
                            <code>{r.run_id}</code>
                          </a>{' '}
                          <StateBadge state={r.state} /> <Time at={r.created_at} />
                          {r.error ? <code class="muted"> {r.error.reason ?? r.error.code}</code> : null}
                          {r.flags?.['manual'] === true ? (
                            <span class="fired-by">
                              {' '}
                              · run now by <Who id={typeof r.flags['fired_by'] === 'string' ? r.flags['fired_by'] : r.requester} />
                            </span>
                          ) : null}
                        </li>
                      ))}
                    </ul>
                  )}
                </dd>
              </dl>
              <Actions d={d} onDone={data.reload} />
            </article>
          );
        })}
      </div>
    </>
  );
}
