/**
 * The catalog's sources (issue 43 §5, docs/tools.md): each MCP server the catalog imports tools from, how
 * the cell presents itself to it, and its pinned tools (pin, side effects, who pinned it when). **Review**
 * reads the server's tools as it lists them now beside the pins (`GET …/{id}/review`: pinned, changed with
 * the diff at each JSON Pointer, missing, new, refused); a session with `catalog.sources.write` re-pins a
 * changed tool to what it reviewed, imports a new one, or removes a missing one (`POST …/{id}/pins`, each
 * pin the live hash as reviewed: the cell refuses one that moved since). Reads need `catalog.read`.
 */
import { useState } from 'preact/hooks';
import { ADMIN, call, describeError, seg } from '../api.ts';
import { can, knowsPermissions } from '../auth/session.ts';
import { ErrorNote, Json, Section, Time, useApp, useLoad, Who } from '../ui.tsx';

const SOURCES = `${ADMIN}/catalog/sources`;

interface Pin {
  name: string;
  tool: string;
  pin: string;
  description: string;
  side_effects: boolean;
  pinned_at: string;
  pinned_by: string;
}
interface Source {
  source_id: string;
  name: string;
  transport: string;
  url: string | null;
  auth: { type: string; audience?: string; client_id?: string; token_endpoint?: string };
  origin: string;
  description: string;
  definition_max_age_ms: number;
  timeout_ms: number;
  created_at: string;
  created_by: string;
  tools: Pin[];
}
interface Reviewed {
  tool: string;
  name: string | null;
  status: 'pinned' | 'changed' | 'missing' | 'new' | 'refused';
  pin: string | null;
  live_pin: string | null;
  diff: { path: string; pinned?: unknown; live?: unknown }[];
  reason?: string;
  problem?: string;
}

const AUTH: Record<string, string> = {
  none: 'no credential',
  cell: "the cell's per-call token (sub the requester, act the agent, DPoP-bound)",
  client_credentials: "the source's own client credentials",
};

/** What a re-pin asks for a reviewed tool, and the button's words: none when it is pinned as listed. */
function repinOf(t: Reviewed): { pin: string | null; words: string } | null {
  if (t.status === 'changed' && t.live_pin) return { pin: t.live_pin, words: 'Pin the live definition' };
  if (t.status === 'new' && t.live_pin) return { pin: t.live_pin, words: 'Import' };
  if (t.status === 'missing') return { pin: null, words: 'Remove from the catalog' };
  return null;
}

/** The colour of a review status (its word is always written too). */
const STATUS_CLASS: Record<Reviewed['status'], string> = {
  pinned: 'state-completed',
  changed: 'state-failed',
  missing: 'state-failed',
  new: 'state-waiting',
  refused: 'state-cancelled',
};

const short = (h: string | null) => (h ? `${h.slice(0, 15)}…` : '-');

function Review({ source }: { source: Source }) {
  const { session } = useApp();
  const [tick, setTick] = useState(0);
  const [error, setError] = useState<string | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const r = useLoad(
    (signal) => call<{ tools: Reviewed[] }>(session, 'GET', `${SOURCES}/${seg(source.source_id)}/review`, { signal }),
    [source.source_id, session, tick],
  );
  const mayPin = can(session, 'catalog.sources.write');
  const repin = async (t: Reviewed, pin: string | null) => {
    setError(null);
    setDone(null);
    try {
      await call(session, 'POST', `${SOURCES}/${seg(source.source_id)}/pins`, { body: { pins: { [t.tool]: pin } } });
      setDone(pin === null ? `Removed ${t.tool}.` : `Pinned ${t.tool} to ${short(pin)}.`);
      setTick((n) => n + 1);
    } catch (e) {
      setError(describeError(e));
    }
  };
  if (r.error) return <ErrorNote error={r.error} prefix="The server could not be reviewed" />;
  if (!r.data)
    return (
      <p role="status" class="muted">
        Reading the server's tools…
      </p>
    );
  return (
    <div class="review" data-source={source.name}>
      <ul class="plain reviewed">
        {r.data.tools.map((t) => {
          const action = mayPin ? repinOf(t) : null;
          return (
            <li key={t.tool} data-tool={t.tool} data-status={t.status}>
              <span class={`state review-status ${STATUS_CLASS[t.status]}`}>{t.status}</span> <code>{t.name ?? t.tool}</code>
              <span class="muted small">
                {' '}
                pinned {short(t.pin)}, live {short(t.live_pin)}
              </span>
              {t.reason ? (
                <span class="muted">
                  {' '}
                  · <code>{t.reason}</code> <bdi>{t.problem ?? ''}</bdi>
                </span>
              ) : null}
              {t.diff.length > 0 ? (
                <div class="table-wrap">
                  <table class="diff">
                    <caption>
                      What changed in <code>{t.tool}</code> since it was pinned
                    </caption>
                    <thead>
                      <tr>
                        <th scope="col">Where (JSON Pointer)</th>
                        <th scope="col">Pinned</th>
                        <th scope="col">Live</th>
                      </tr>
                    </thead>
                    <tbody>
                      {t.diff.map((d) => (
                        <tr key={d.path}>
                          <th scope="row" data-label="Where">
                            <code>{d.path}</code>
                          </th>
                          <td data-label="Pinned" class="diff-pinned">
                            {'pinned' in d ? <code>{JSON.stringify(d.pinned)}</code> : <span class="muted">absent</span>}
                          </td>
                          <td data-label="Live" class="diff-live">
                            {'live' in d ? <code>{JSON.stringify(d.live)}</code> : <span class="muted">absent</span>}
                          </td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                </div>
              ) : null}
              {action ? (
                <div class="buttons">
                  <button type="button" class="repin" onClick={() => void repin(t, action.pin)}>
                    {action.words}: {t.tool}
                  </button>
                </div>
              ) : null}
            </li>
          );
        })}
      </ul>
      {done ? (
        <p role="status" class="ok">
          {done}
        </p>
      ) : null}
      {error ? (
        <p role="alert" class="error">
          {error}
        </p>
      ) : null}
    </div>
  );
}

function SourceCard({ s }: { s: Source }) {
  const [reviewing, setReviewing] = useState(false);
  const hid = `src-${s.source_id}`;
  return (
    <article class="panel source" data-source={s.name} aria-labelledby={hid}>
      <h2 id={hid}>
        <code>{s.name}</code> <span class="muted small">{s.transport}</span>{' '}
        {s.origin === 'config' ? <span class="muted small">from the cell's configuration</span> : null}
      </h2>
      {s.description ? (
        <p>
          <bdi>{s.description}</bdi>
        </p>
      ) : null}
      <dl class="facts">
        {s.url ? (
          <>
            <dt>Server</dt>
            <dd>
              <code>{s.url}</code>
            </dd>
          </>
        ) : null}
        <dt>Presents</dt>
        <dd class="source-auth">
          {AUTH[s.auth.type] ?? s.auth.type}
          {s.auth.audience ? (
            <>
              {' '}
              · audience <code>{s.auth.audience}</code>
            </>
          ) : null}
          {s.auth.client_id ? (
            <>
              {' '}
              · client <code>{s.auth.client_id}</code>
            </>
          ) : null}
        </dd>
        <dt>Checks</dt>
        <dd>
          definitions read at most {s.definition_max_age_ms} ms before a call; {s.timeout_ms} ms per request
        </dd>
        <dt>Registered</dt>
        <dd>
          <Time at={s.created_at} /> by <Who id={s.created_by} />
        </dd>
      </dl>
      <div class="table-wrap">
        <table class="pins">
          <caption class="sr-only">Pinned tools of {s.name}</caption>
          <thead>
            <tr>
              <th scope="col">Tool</th>
              <th scope="col">Side effects</th>
              <th scope="col">Pin</th>
              <th scope="col">Pinned</th>
            </tr>
          </thead>
          <tbody>
            {s.tools.map((t) => (
              <tr key={t.name} data-tool={t.name}>
                <th scope="row" data-label="Tool">
                  <code>{t.name}</code>
                  {t.description ? (
                    <div class="muted small">
                      <bdi>{t.description}</bdi>
                    </div>
                  ) : null}
                </th>
                <td data-label="Side effects">{t.side_effects ? 'yes (held for approval under ask and auto-read)' : 'no (read-only)'}</td>
                <td data-label="Pin">
                  <code class="hash" title={t.pin}>
                    {short(t.pin)}
                  </code>
                </td>
                <td data-label="Pinned">
                  <Time at={t.pinned_at} /> by <Who id={t.pinned_by} />
                </td>
              </tr>
            ))}
            {s.tools.length === 0 ? (
              <tr>
                <td colSpan={4} class="muted">
                  No tool pinned.
                </td>
              </tr>
            ) : null}
          </tbody>
        </table>
      </div>
      <div class="buttons">
        <button type="button" class="review-button" onClick={() => setReviewing((v) => !v)} aria-expanded={reviewing}>
          {reviewing ? 'Hide the review' : 'Review against the server'}
        </button>
      </div>
      {reviewing ? <Review source={s} /> : null}
    </article>
  );
}

export function CatalogView() {
  const { session } = useApp();
  const list = useLoad(
    (signal) => call<{ sources: Source[]; total: number }>(session, 'GET', `${SOURCES}?limit=100`, { signal }),
    [session],
    30_000,
  );
  const registry = useLoad(
    (signal) => call<{ tools?: { name: string; source?: string }[] }>(session, 'GET', `${ADMIN}/ai/tool-registry`, { signal }),
    [session],
  );
  if (knowsPermissions(session) && !can(session, 'catalog.read')) {
    return (
      <>
        <h1>Catalog</h1>
        <p class="notice">
          Your credential lacks the permission <code>catalog.read</code>.
        </p>
      </>
    );
  }
  const builtIn = (registry.data?.tools ?? []).filter((t) => !t.source).map((t) => t.name);
  return (
    <>
      <h1>Catalog</h1>
      <p class="muted">
        The tools agents may be granted: built in ({builtIn.length ? builtIn.join(', ') : '…'}), and imported from the sources below, each
        definition pinned by its content hash. A call whose server lists another definition than the pin is refused
        (tool_definition_changed) until it is reviewed and pinned again.
      </p>
      <ErrorNote error={list.error} prefix="The catalog's sources could not be loaded" />
      {!list.data && list.loading ? <p role="status">Loading sources…</p> : null}
      {list.data && list.data.sources.length === 0 ? <p class="muted">No source: the catalog holds the built-in tools only.</p> : null}
      <Section title={`Sources (${list.data?.total ?? '…'})`} id="catalog-sources">
        <div class="cards">
          {(list.data?.sources ?? []).map((s) => (
            <SourceCard key={s.source_id} s={s} />
          ))}
        </div>
      </Section>
      {registry.data ? (
        <details>
          <summary>The whole registry as the cell lists it</summary>
          <Json value={registry.data} label="Tool registry" />
        </details>
      ) : null}
    </>
  );
}
