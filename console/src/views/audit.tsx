/**
 * The audit trail (`GET /admin/audit`, audit.read): newest first, 50 a page,
 * filtered by actor or target. Every mint, rotation, revocation, approval,
 * run and refusal the cell recorded.
 */
import { useState } from 'preact/hooks';
import { ADMIN, call } from '../api.ts';
import { can, knowsPermissions } from '../auth/session.ts';
import { ErrorNote, Time, useApp, useLoad, Who } from '../ui.tsx';

interface Entry {
  seq: number;
  at: string;
  actor: string;
  action: string;
  target: string;
  outcome: string;
  details: Record<string, unknown> | null;
}
const PAGE = 50;

export function AuditView() {
  const { session } = useApp();
  const [offset, setOffset] = useState(0);
  const [actor, setActor] = useState('');
  const [target, setTarget] = useState('');
  const [applied, setApplied] = useState({ actor: '', target: '' });
  const data = useLoad(
    (signal) => {
      const q = new URLSearchParams({ limit: String(PAGE), offset: String(offset) });
      if (applied.actor) q.set('actor', applied.actor);
      if (applied.target) q.set('target', applied.target);
      return call<{ entries: Entry[] }>(session, 'GET', `${ADMIN}/audit?${q}`, { signal });
    },
    [session, offset, applied.actor, applied.target],
    10_000,
  );
  if (knowsPermissions(session) && !can(session, 'audit.read')) {
    return (
      <>
        <h1>Audit trail</h1>
        <p class="notice">
          Your credential lacks the permission <code>audit.read</code>.
        </p>
      </>
    );
  }
  return (
    <>
      <h1>Audit trail</h1>
      <form
        class="filters"
        aria-label="Filter the audit trail"
        onSubmit={(e) => {
          e.preventDefault();
          setOffset(0);
          setApplied({ actor: actor.trim(), target: target.trim() });
        }}
      >
        <label>
          Actor{' '}
          <input
            id="audit-actor"
            value={actor}
            onInput={(e) => setActor((e.target as HTMLInputElement).value)}
            placeholder="principal id"
          />
        </label>
        <label>
          Target{' '}
          <input
            id="audit-target"
            value={target}
            onInput={(e) => setTarget((e.target as HTMLInputElement).value)}
            placeholder="key, run or principal id"
          />
        </label>
        <button type="submit">Filter</button>
      </form>
      <ErrorNote error={data.error} prefix="The audit trail could not be loaded" />
      {data.data ? (
        <>
          <div class="table-wrap">
            <table id="audit-table">
              <caption class="sr-only">Audit entries, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">#</th>
                  <th scope="col">When</th>
                  <th scope="col">Actor</th>
                  <th scope="col">Action</th>
                  <th scope="col">Target</th>
                  <th scope="col">Outcome</th>
                  <th scope="col">Details</th>
                </tr>
              </thead>
              <tbody>
                {data.data.entries.map((e) => (
                  <tr key={e.seq} data-action={e.action}>
                    <th scope="row" data-label="#">
                      {e.seq}
                    </th>
                    <td data-label="When">
                      <Time at={e.at} />
                    </td>
                    <td data-label="Actor">
                      <Who id={e.actor} />
                    </td>
                    <td data-label="Action">
                      <code>{e.action}</code>
                    </td>
                    <td data-label="Target">
                      <code>{e.target}</code>
                    </td>
                    <td data-label="Outcome" class={e.outcome === 'ok' ? 'ok-text' : 'bad-text'}>
                      {e.outcome}
                    </td>
                    <td data-label="Details" class="data">
                      {e.details ? <code>{JSON.stringify(e.details).slice(0, 200)}</code> : ''}
                    </td>
                  </tr>
                ))}
                {data.data.entries.length === 0 ? (
                  <tr>
                    <td colSpan={7} class="muted">
                      No entry.
                    </td>
                  </tr>
                ) : null}
              </tbody>
            </table>
          </div>
          <div class="buttons pager">
            <button type="button" disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - PAGE))}>
              Newer
            </button>
            <button type="button" disabled={data.data.entries.length < PAGE} onClick={() => setOffset(offset + PAGE)}>
              Older
            </button>
          </div>
        </>
      ) : data.loading ? (
        <p role="status">Loading the audit trail…</p>
      ) : null}
    </>
  );
}
