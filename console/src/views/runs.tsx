/**
 * Runs: crew runs and job runs in one list (one run id space), newest first,
 * filtered by state, kind, crew, requester, source, start time and a search
 * (the filters and the page live in the URL
 * fragment). Live: the list is fetched again every few seconds, and the runs
 * still in flight on screen are followed over their SSE event streams (a few
 * at a time: a browser keeps only six connections per origin), so a state
 * change shows at once.
 *
 * Reads `GET /admin/jobs/runs?kind=all` (system.orchestration.admin.read); a
 * session with only agent_teams.read gets the crew runs of
 * `GET /admin/agent-teams/runs`.
 */
import { useEffect, useMemo, useState } from 'preact/hooks';
import { ADMIN, ApiError, call, TEAMS, seg } from '../api.ts';
import { can, type Session } from '../auth/session.ts';
import { href } from '../router.ts';
import { follow } from '../sse.ts';
import { ago, useLiveness } from '../liveness.ts';
import { formatDuration } from '../run-model.ts';
import { ErrorNote, isolated, StateBadge, Time, useApp, useLoad, Who } from '../ui.tsx';
import { REASONS, type Reason } from '../../../core/reasons.ts';
import { RUN_ID_PATTERN } from '../../../core/run-id.ts';

export interface RunRow {
  run_id: string;
  kind: string;
  job_type: string | null;
  crew_id: string | null;
  requester: string;
  state: string;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
  error?: { code: string; message?: string; reason?: string } | null;
  /** `api`, `schedule:<id>`, `endpoint:<id>` (job runs). */
  source?: string;
  stalled?: boolean;
  /** `fired_by` and `manual`: a schedule's run started on demand ("Run now"). */
  flags?: Record<string, unknown>;
}

/** Where a run came from, for people: "API", "schedule sch_…", "endpoint …". */
export function sourceLabel(source: string | undefined): { kind: string; id: string | null } {
  if (!source) return { kind: 'api', id: null };
  const i = source.indexOf(':');
  return i < 0 ? { kind: source, id: null } : { kind: source.slice(0, i), id: source.slice(i + 1) };
}

const STATES = ['queued', 'running', 'waiting', 'outcome_unknown', 'completed', 'failed', 'refused', 'cancelled'];
/** The reasons a run can end badly with (the registry's, core/reasons.ts): the reason filter's choices. */
const RUN_REASONS: readonly Reason[] = (Object.keys(REASONS) as Reason[]).filter((r) => (REASONS[r] as { runs?: unknown }).runs).sort();
const ACTIVE = new Set(['queued', 'running', 'waiting', 'outcome_unknown']);
/** SSE streams the list keeps open at once. */
const MAX_STREAMS = 3;
const PAGE = 200;

/** The list filters the cell applies (so they span every run, not one page): the API's names. */
export interface RunFilters {
  state?: string;
  /** Why it ended badly (`error.reason`, else `error.code`). */
  reason?: string;
  kind?: string;
  crew_id?: string;
  source?: string;
  created_after?: string;
}

function filterQuery(f: RunFilters, crewOnly: boolean): string {
  let q = '';
  for (const [k, v] of Object.entries(f)) {
    if (!v || (crewOnly && k === 'kind')) continue;
    q += `&${k}=${encodeURIComponent(v)}`;
  }
  return q;
}

/**
 * A page of runs, newest first: page 0 is the newest 200, page 1 the 200
 * before them, and so on (the API lists oldest first with limit, offset and
 * total), narrowed by the cell with `filters`. Every run with
 * system.orchestration.admin.read, else the crew runs (their newest 200).
 * Rows come oldest first, as the API answers. A search that is a whole run id
 * (`search`) loads that run, wherever it is in the list.
 */
export async function loadNewestRuns(
  session: Session,
  signal: AbortSignal,
  page = 0,
  filters: RunFilters = {},
  search = '',
): Promise<{ rows: RunRow[]; total: number; crewOnly: boolean; page: number; pages: number }> {
  if (!can(session, 'system.orchestration.admin.read') && can(session, 'agent_teams.read')) {
    const r = await call<{ runs: RunRow[]; total: number }>(session, 'GET', `${TEAMS}/runs?limit=${PAGE}${filterQuery(filters, true)}`, {
      signal,
    });
    return { rows: r.runs, total: r.total, crewOnly: true, page: 0, pages: 1 };
  }
  if (RUN_ID_PATTERN.test(search.trim())) {
    const one = await call<RunRow>(session, 'GET', `${ADMIN}/jobs/runs/${seg(search.trim())}`, { signal }).catch((e: unknown) => {
      if (e instanceof ApiError && e.status === 404) return null;
      throw e;
    });
    return { rows: one ? [one] : [], total: one ? 1 : 0, crewOnly: false, page: 0, pages: 1 };
  }
  const base = `${ADMIN}/jobs/runs?kind=${encodeURIComponent(filters.kind || 'all')}${filterQuery({ ...filters, kind: '' }, false)}`;
  const first = await call<{ items: RunRow[]; total: number }>(session, 'GET', `${base}&limit=${PAGE}`, { signal });
  const pages = Math.max(1, Math.ceil(first.total / PAGE));
  const p = Math.min(Math.max(0, page), pages - 1);
  const end = first.total - p * PAGE;
  const offset = Math.max(0, end - PAGE);
  // Oldest first on the wire: page p ends `p * PAGE` runs before the newest.
  const items =
    offset === 0 && end >= Math.min(first.total, PAGE) && end === first.items.length
      ? first.items
      : (await call<{ items: RunRow[] }>(session, 'GET', `${base}&limit=${end - offset}&offset=${offset}`, { signal })).items;
  return { rows: items, total: first.total, crewOnly: false, page: p, pages };
}

const SINCE: Record<string, number> = { '1h': 3_600_000, '24h': 86_400_000, '7d': 7 * 86_400_000 };

export function RunsView({ query }: { query: URLSearchParams }) {
  const { session, names } = useApp();
  const liveness = useLiveness();
  const filter = {
    state: query.get('state') ?? '',
    reason: query.get('reason') ?? '',
    kind: query.get('kind') ?? '',
    crew: query.get('crew') ?? '',
    requester: query.get('requester') ?? '',
    source: query.get('source') ?? '',
    since: query.get('since') ?? '',
    q: query.get('q') ?? '',
  };
  const page = Math.max(0, Number.parseInt(query.get('page') ?? '0', 10) || 0);
  // State, kind, crew, source and time are the cell's filters (over every run); requester and a
  // search by name within the page loaded; a search that is a run id finds that run.
  const list = useLoad(
    (signal) =>
      loadNewestRuns(
        session,
        signal,
        page,
        {
          state: filter.state,
          reason: filter.reason,
          kind: filter.kind,
          crew_id: filter.crew,
          source: filter.source,
          created_after: SINCE[filter.since] ? new Date(Date.now() - SINCE[filter.since]!).toISOString() : '',
        },
        filter.q,
      ),
    [
      session,
      page,
      filter.state,
      filter.reason,
      filter.kind,
      filter.crew,
      filter.source,
      filter.since,
      RUN_ID_PATTERN.test(filter.q.trim()) ? filter.q : '',
    ],
    5000,
  );

  // Crew names instead of ids, where the session may read crews.
  const crewList = useLoad(
    async (signal) =>
      can(session, 'agent_teams.read')
        ? (await call<{ crews: { crew_id: string; name: string | null }[] }>(session, 'GET', `${TEAMS}/crews?limit=1000`, { signal })).crews
        : [],
    [session],
    60_000,
  );
  const crewNames = useMemo(
    () => new Map((crewList.data ?? []).filter((c) => c.name).map((c) => [c.crew_id, c.name as string])),
    [crewList.data],
  );
  const [live, setLive] = useState<Record<string, string>>({});
  const rows = useMemo(() => {
    const all = [...(list.data?.rows ?? [])]
      .reverse()
      .map((r) => ({ ...r, state: ACTIVE.has(r.state) ? (live[r.run_id] ?? r.state) : r.state }));
    const needle = filter.q.trim().toLowerCase();
    const since = SINCE[filter.since];
    const now = Date.now();
    return all.filter(
      (r) =>
        (!filter.state || r.state === filter.state) &&
        (!filter.reason || r.error?.reason === filter.reason || (!r.error?.reason && r.error?.code === filter.reason)) &&
        (!filter.kind || r.kind === filter.kind) &&
        (!filter.crew || r.crew_id === filter.crew) &&
        (!filter.requester || r.requester === filter.requester) &&
        (!filter.source || sourceLabel(r.source).kind === filter.source) &&
        (!since || now - Date.parse(r.created_at) <= since) &&
        (!needle ||
          [
            r.run_id,
            r.crew_id ?? '',
            crewNames.get(r.crew_id ?? '') ?? '',
            names.get(r.requester) ?? '',
            r.requester,
            r.job_type ?? '',
            r.source ?? '',
            r.error?.reason ?? '',
            r.error?.code ?? '',
            r.error?.message ?? '',
          ]
            .join(' ')
            .toLowerCase()
            .includes(needle)),
    );
  }, [
    list.data,
    live,
    filter.state,
    filter.reason,
    filter.kind,
    filter.crew,
    filter.requester,
    filter.source,
    filter.since,
    filter.q,
    crewNames,
    names,
  ]);

  // Follow the newest runs in flight over SSE: state changes show without waiting for the next fetch.
  const followed = rows
    .filter((r) => ACTIVE.has(r.state))
    .slice(0, MAX_STREAMS)
    .map((r) => r.run_id);
  const followKey = followed.join(',');
  useEffect(() => {
    const ac = new AbortController();
    for (const id of followed) {
      void follow({
        signal: ac.signal,
        open: (last, signal) =>
          session.request('GET', `${ADMIN}/jobs/runs/${seg(id)}/events/sse`, {
            headers: { accept: 'text/event-stream', ...(last ? { 'last-event-id': last } : {}) },
            signal,
          }),
        onEvent(ev) {
          let state: string | null = null;
          if (ev.event === 'run_finished') {
            try {
              state = String((JSON.parse(ev.data) as { data?: { outcome?: string } }).data?.outcome ?? 'completed');
            } catch {
              state = 'completed';
            }
          } else if (ev.event === 'waiting') state = 'waiting';
          else state = 'running';
          setLive((m) => (m[id] === state ? m : { ...m, [id]: state! }));
          return ev.event === 'run_finished' ? 'stop' : undefined;
        },
      });
    }
    return () => ac.abort();
  }, [followKey, session]);

  const all = list.data?.rows ?? [];
  // Every crew the session may read (the list is filtered by the cell), else those of the page loaded.
  const crews = [
    ...new Set([...(crewList.data ?? []).map((c) => c.crew_id), ...all.map((r) => r.crew_id).filter((c): c is string => !!c)]),
  ].sort();
  const requesters = [...new Set(all.map((r) => r.requester))].sort();
  const setFilter = (k: string, v: string) => {
    // A new filter starts from the newest page.
    window.location.hash = href('runs', null, { ...filter, [k]: v });
  };
  // What is typed in the search, held here: the list re-renders every few seconds, and a controlled
  // input would otherwise lose what is typed before it is committed (Enter or leaving the field).
  const [typed, setTyped] = useState(filter.q);
  useEffect(() => setTyped(filter.q), [filter.q]);
  const goPage = (p: number) => {
    window.location.hash = href('runs', null, { ...filter, page: p > 0 ? String(p) : '' });
  };

  return (
    <>
      <h1>Runs</h1>
      <form class="filters" aria-label="Filter runs" onSubmit={(e) => e.preventDefault()}>
        <label>
          State
          <select id="filter-state" value={filter.state} onChange={(e) => setFilter('state', (e.target as HTMLSelectElement).value)}>
            <option value="">any</option>
            {STATES.map((s) => (
              <option value={s}>{s}</option>
            ))}
          </select>
        </label>
        <label>
          Reason
          <select id="filter-reason" value={filter.reason} onChange={(e) => setFilter('reason', (e.target as HTMLSelectElement).value)}>
            <option value="">any</option>
            {RUN_REASONS.map((r) => (
              <option value={r} title={REASONS[r].sentence}>
                {r}
              </option>
            ))}
            {filter.reason && !(RUN_REASONS as readonly string[]).includes(filter.reason) ? (
              <option value={filter.reason}>{filter.reason}</option>
            ) : null}
          </select>
        </label>
        <label>
          Kind
          <select id="filter-kind" value={filter.kind} onChange={(e) => setFilter('kind', (e.target as HTMLSelectElement).value)}>
            <option value="">any</option>
            <option value="crew">crew</option>
            <option value="job">job</option>
          </select>
        </label>
        <label>
          Crew
          <select id="filter-crew" value={filter.crew} onChange={(e) => setFilter('crew', (e.target as HTMLSelectElement).value)}>
            <option value="">any</option>
            {crews.map((c) => (
              <option value={c}>{isolated(crewNames.get(c) ?? c)}</option>
            ))}
          </select>
        </label>
        <label>
          Requester
          <select
            id="filter-requester"
            value={filter.requester}
            onChange={(e) => setFilter('requester', (e.target as HTMLSelectElement).value)}
          >
            <option value="">anyone</option>
            {requesters.map((r) => (
              <option value={r}>
                {isolated(names.get(r) ?? r)}
                {r === session.principal.id ? ' (you)' : ''}
              </option>
            ))}
          </select>
        </label>
        <label>
          Source
          <select id="filter-source" value={filter.source} onChange={(e) => setFilter('source', (e.target as HTMLSelectElement).value)}>
            <option value="">any</option>
            <option value="api">API</option>
            <option value="schedule">schedule</option>
            <option value="endpoint">endpoint</option>
          </select>
        </label>
        <label>
          Started
          <select id="filter-since" value={filter.since} onChange={(e) => setFilter('since', (e.target as HTMLSelectElement).value)}>
            <option value="">any time</option>
            <option value="1h">last hour</option>
            <option value="24h">last 24 h</option>
            <option value="7d">last 7 days</option>
          </select>
        </label>
        <label>
          Search
          <input
            id="filter-q"
            type="search"
            value={typed}
            placeholder="run id, crew, requester, reason"
            onInput={(e) => setTyped((e.target as HTMLInputElement).value)}
            onChange={(e) => setFilter('q', (e.target as HTMLInputElement).value)}
          />
        </label>
        <span class="muted" role="status" id="runs-status">
          {list.data
            ? `${rows.length} shown of ${list.data.total} runs${list.data.pages > 1 ? ` (page ${list.data.page + 1} of ${list.data.pages}, ${PAGE} a page, newest first)` : ''}${liveness.connected && !list.error ? ' · live' : ` · not live: last update ${ago(liveness.lastOk)}`}`
            : ''}
        </span>
      </form>
      {list.data && list.data.pages > 1 ? (
        <nav class="buttons pager" aria-label="Pages of runs">
          <button type="button" id="runs-newer" disabled={list.data.page === 0} onClick={() => goPage(list.data!.page - 1)}>
            Newer runs
          </button>{' '}
          <button
            type="button"
            id="runs-older"
            disabled={list.data.page >= list.data.pages - 1}
            onClick={() => goPage(list.data!.page + 1)}
          >
            Older runs
          </button>
        </nav>
      ) : null}
      {list.data?.crewOnly ? (
        <p class="muted">Crew runs only: this session cannot read job runs (system.orchestration.admin.read).</p>
      ) : null}
      <ErrorNote
        error={list.error instanceof ApiError || list.error instanceof Error ? list.error : null}
        prefix="Runs could not be loaded"
      />
      {!list.data && list.loading ? <p role="status">Loading runs…</p> : null}
      {list.data ? (
        <div class="table-wrap">
          <table id="runs-table">
            <caption class="sr-only">Runs, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Run</th>
                <th scope="col">Kind</th>
                <th scope="col">Crew</th>
                <th scope="col">State</th>
                <th scope="col">Reason</th>
                <th scope="col">Source</th>
                <th scope="col">Requester</th>
                <th scope="col">Started</th>
                <th scope="col">Duration</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((r) => (
                <tr key={r.run_id} data-run={r.run_id} data-state={r.state}>
                  <td data-label="Run">
                    <a href={href('runs', r.run_id)}>
                      <code>{r.run_id}</code>
                    </a>
                  </td>
                  <td data-label="Kind">
                    {r.kind}
                    {r.job_type ? ` · ${r.job_type}` : ''}
                  </td>
                  <td data-label="Crew">
                    {r.crew_id ? (
                      crewNames.get(r.crew_id) ? (
                        <bdi title={r.crew_id}>{crewNames.get(r.crew_id)}</bdi>
                      ) : (
                        <code>{r.crew_id}</code>
                      )
                    ) : (
                      <span class="muted">-</span>
                    )}
                  </td>
                  <td class="state-cell">
                    <StateBadge state={r.state} />
                    {r.stalled ? <span class="state state-stalled">stalled</span> : null}
                  </td>
                  <td class="reason" data-label="Reason">
                    {r.error ? (
                      <button
                        type="button"
                        class="link reason-link"
                        title={`Only runs that ended with ${r.error.reason ?? r.error.code}`}
                        onClick={() => setFilter('reason', r.error?.reason ?? r.error?.code ?? '')}
                      >
                        <code>{r.error.reason ?? r.error.code}</code>
                      </button>
                    ) : (
                      <span class="muted">-</span>
                    )}
                  </td>
                  <td class="source" data-label="Source">
                    <SourceCell source={r.source} />
                  </td>
                  <td data-label="Requester">
                    <Who id={r.requester} />
                  </td>
                  <td data-label="Started">
                    <Time at={r.created_at} />
                  </td>
                  <td class="duration" data-label="Duration">
                    {formatDuration((r.finished_at ? Date.parse(r.finished_at) : Date.now()) - Date.parse(r.created_at))}
                    {r.finished_at ? '' : ' so far'}
                  </td>
                </tr>
              ))}
              {rows.length === 0 ? (
                <tr>
                  <td colSpan={9} class="muted">
                    No run matches.
                  </td>
                </tr>
              ) : null}
            </tbody>
          </table>
        </div>
      ) : null}
    </>
  );
}

function SourceCell({ source }: { source: string | undefined }) {
  const s = sourceLabel(source);
  if (s.kind === 'schedule' && s.id)
    return (
      <a href={href('schedules', s.id)} data-source="schedule">
        schedule <code>{s.id}</code>
      </a>
    );
  if (s.id)
    return (
      <span data-source={s.kind}>
        {s.kind} <code>{s.id}</code>
      </span>
    );
  return <span data-source={s.kind}>{s.kind === 'api' ? 'API' : s.kind}</span>;
}
