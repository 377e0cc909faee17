/**
 * Formations and crews: the formations of the cell; for one, its billets, its
 * compiled graph before anything runs (`GET .../formations/{id}/graph`, bound
 * to a crew when one is chosen), its versions when the cell keeps them, and
 * its crews, each with a Run button that takes an input (JSON, or plain
 * text) and opens the new run.
 */
import { useState } from 'preact/hooks';
import { ApiError, call, describeError, seg, TEAMS } from '../api.ts';
import { can } from '../auth/session.ts';
import { GraphView } from '../graph/GraphView.tsx';
import type { GraphLike } from '../run-model.ts';
import { href } from '../router.ts';
import { ErrorNote, isolated, Section, Time, useApp, useLoad, Who } from '../ui.tsx';

interface Formation {
  formation_id: string;
  name: string;
  coordination_policy: string;
  created_at: string;
  created_by: string;
  pre?: unknown[];
  post?: unknown[];
}
interface Billet {
  billet_id: string;
  role_label: string;
  reports_to: string | null;
  required_skills: string[];
  authority_cap: Record<string, unknown>;
}
interface Crew {
  crew_id: string;
  formation_id: string;
  name: string;
  assignments: Record<string, string>;
  workspace_id: string;
  graph_hash?: string;
}

function parseInput(text: string): unknown {
  const t = text.trim();
  if (t === '') return null;
  try {
    return JSON.parse(t) as unknown;
  } catch {
    return text;
  }
}

function RunForm({ crew }: { crew: Crew }) {
  const { session } = useApp();
  const [input, setInput] = useState('');
  const [maxTokens, setMaxTokens] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const id = `run-${crew.crew_id}`;
  const start = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const body: Record<string, unknown> = { input: parseInput(input) };
      if (maxTokens.trim()) body['max_tokens'] = Number(maxTokens);
      const run = await call<{ run_id: string }>(session, 'POST', `${TEAMS}/crews/${seg(crew.crew_id)}/runs`, { body });
      window.location.hash = href('runs', run.run_id);
    } catch (err) {
      // A run refused before its first step is still a run (409 with details.run_id): show it.
      if (err instanceof ApiError && typeof err.details?.['run_id'] === 'string') {
        window.location.hash = href('runs', err.details['run_id']);
        return;
      }
      setError(describeError(err));
    } finally {
      setBusy(false);
    }
  };
  if (!can(session, 'agent_teams.write')) return <p class="muted">Your credential lacks agent_teams.write: you cannot start runs.</p>;
  return (
    <form class="run-form" onSubmit={start} aria-label={`Run crew ${crew.name}`}>
      <label for={`${id}-input`}>Input (JSON, or plain text)</label>
      <textarea
        id={`${id}-input`}
        class="run-input"
        rows={3}
        value={input}
        onInput={(e) => setInput((e.target as HTMLTextAreaElement).value)}
      />
      <label for={`${id}-max`}>Token budget for the run (optional)</label>
      <input
        id={`${id}-max`}
        type="number"
        min={1}
        inputMode="numeric"
        value={maxTokens}
        onInput={(e) => setMaxTokens((e.target as HTMLInputElement).value)}
      />
      <button type="submit" class="primary run-button" disabled={busy}>
        Run
      </button>
      {error ? (
        <p class="error" role="alert">
          {error}
        </p>
      ) : null}
    </form>
  );
}

function FormationDetail({ formationId }: { formationId: string }) {
  const { session } = useApp();
  const [crewId, setCrewId] = useState<string>('');
  const f = useLoad(
    (signal) => call<Formation>(session, 'GET', `${TEAMS}/formations/${seg(formationId)}`, { signal }),
    [formationId, session],
  );
  const billets = useLoad(
    (signal) => call<{ billets: Billet[] }>(session, 'GET', `${TEAMS}/formations/${seg(formationId)}/billets`, { signal }),
    [formationId, session],
  );
  const crews = useLoad(
    async (signal) =>
      (await call<{ crews: Crew[] }>(session, 'GET', `${TEAMS}/crews?limit=1000`, { signal })).crews.filter(
        (c) => c.formation_id === formationId,
      ),
    [formationId, session],
  );
  const graph = useLoad(
    (signal) =>
      call<{ graph: GraphLike; graph_hash: string; formation_hash: string }>(
        session,
        'GET',
        `${TEAMS}/formations/${seg(formationId)}/graph${crewId ? `?crew_id=${encodeURIComponent(crewId)}` : ''}`,
        { signal },
      ),
    [formationId, crewId, session],
  );
  // Formation versions are kept only by cells that have them; a 404 means "not on this cell".
  const versions = useLoad(
    async (signal) => {
      try {
        const r = await call<{ versions?: { version?: number; formation_hash?: string; created_at?: string }[] }>(
          session,
          'GET',
          `${TEAMS}/formations/${seg(formationId)}/versions`,
          { signal },
        );
        return r.versions ?? [];
      } catch (e) {
        if (e instanceof ApiError && e.status === 404) return null;
        throw e;
      }
    },
    [formationId, session],
  );

  return (
    <>
      <h2 id="formation-title">
        <bdi>{f.data?.name ?? formationId}</bdi> <span class="muted">({f.data?.coordination_policy ?? '…'})</span>
      </h2>
      <ErrorNote error={f.error} prefix="The formation could not be loaded" />
      {f.data ? (
        <p class="muted">
          Created <Time at={f.data.created_at} /> by <Who id={f.data.created_by} /> · <code>{formationId}</code>
        </p>
      ) : null}

      <Section
        title="Compiled graph"
        id="formation-graph"
        actions={
          crews.data?.length ? (
            <label>
              Bound to crew{' '}
              <select id="graph-crew" value={crewId} onChange={(e) => setCrewId((e.target as HTMLSelectElement).value)}>
                <option value="">none (seats unbound)</option>
                {crews.data.map((c) => (
                  <option value={c.crew_id}>{isolated(c.name)}</option>
                ))}
              </select>
            </label>
          ) : null
        }
      >
        <ErrorNote error={graph.error} prefix="The formation does not compile" />
        {graph.data ? (
          <>
            <p class="muted">
              Graph hash <code class="hash">{graph.data.graph_hash}</code> · formation hash{' '}
              <code class="hash">{graph.data.formation_hash}</code>
            </p>
            <GraphView
              graph={graph.data.graph}
              label={`Compiled graph of formation ${f.data?.name ?? formationId}: ${graph.data.graph.nodes.length} steps`}
            />
          </>
        ) : graph.loading ? (
          <p role="status">Compiling…</p>
        ) : null}
      </Section>

      <Section title="Versions" id="formation-versions">
        {versions.data === null ? (
          <p class="muted">
            This cell does not keep formation versions (no <code>GET …/formations/{'{id}'}/versions</code>); the graph hash above names the
            current one.
          </p>
        ) : versions.data ? (
          <ul>
            {versions.data.map((v) => (
              <li>
                {v.version !== undefined ? `v${v.version}` : ''} <code class="hash">{v.formation_hash ?? ''}</code>{' '}
                <Time at={v.created_at ?? null} />
              </li>
            ))}
          </ul>
        ) : null}
        <ErrorNote error={versions.error} />
      </Section>

      <Section title="Billets" id="formation-billets">
        <ErrorNote error={billets.error} />
        {billets.data ? (
          <div class="table-wrap">
            <table>
              <caption class="sr-only">Billets of the formation</caption>
              <thead>
                <tr>
                  <th scope="col">Role</th>
                  <th scope="col">Billet</th>
                  <th scope="col">Reports to</th>
                  <th scope="col">Tools</th>
                  <th scope="col">Budget ceiling</th>
                </tr>
              </thead>
              <tbody>
                {billets.data.billets.map((b) => (
                  <tr>
                    <th scope="row" data-label="Role">
                      <bdi>{b.role_label}</bdi>
                    </th>
                    <td data-label="Billet">
                      <code>{b.billet_id}</code>
                    </td>
                    <td data-label="Reports to">{b.reports_to ? <code>{b.reports_to}</code> : '-'}</td>
                    <td data-label="Tools">
                      {Array.isArray(b.authority_cap['allowed_tools']) ? (
                        <code>{(b.authority_cap['allowed_tools'] as string[]).join(', ')}</code>
                      ) : (
                        '-'
                      )}
                    </td>
                    <td data-label="Budget ceiling">
                      {typeof b.authority_cap['budget_ceiling'] === 'number' ? String(b.authority_cap['budget_ceiling']) : 'none'}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ) : null}
      </Section>

      <Section title="Crews" id="formation-crews">
        <ErrorNote error={crews.error} />
        {crews.data && crews.data.length === 0 ? <p class="muted">No crew instantiates this formation yet.</p> : null}
        {crews.data?.map((c) => (
          <article class="crew" aria-labelledby={`crew-${c.crew_id}`} data-crew={c.crew_id}>
            <h3 id={`crew-${c.crew_id}`}>
              <bdi>{c.name}</bdi>{' '}
              <span class="muted">
                <code>{c.crew_id}</code> · workspace {c.workspace_id}
              </span>
            </h3>
            <p>
              <a href={href('runs', null, { crew: c.crew_id })}>Runs of this crew</a>
            </p>
            <RunForm crew={c} />
          </article>
        ))}
      </Section>
    </>
  );
}

export function FormationsView({ formationId }: { formationId: string | null }) {
  const { session } = useApp();
  const list = useLoad(
    (signal) => call<{ formations: Formation[] }>(session, 'GET', `${TEAMS}/formations?limit=1000`, { signal }),
    [session],
  );
  return (
    <>
      <h1>Formations &amp; crews</h1>
      <ErrorNote error={list.error} prefix="Formations could not be loaded" />
      <div class="split">
        <nav class="list" aria-label="Formations">
          {list.data && list.data.formations.length === 0 ? <p class="muted">No formation yet.</p> : null}
          <ul>
            {list.data?.formations.map((f) => (
              <li>
                <a href={href('formations', f.formation_id)} aria-current={formationId === f.formation_id ? 'page' : undefined}>
                  <bdi>{f.name}</bdi> <span class="muted">{f.coordination_policy}</span>
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <div class="detail">
          {formationId ? (
            <FormationDetail key={formationId} formationId={formationId} />
          ) : (
            <p class="muted">Choose a formation to see its compiled graph and run its crews.</p>
          )}
        </div>
      </div>
    </>
  );
}
