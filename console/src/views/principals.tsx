/**
 * Principals (`GET /admin/principals`, iam.principals.read): who, kind,
 * roles, status and their API keys (`GET /admin/api-keys`, counted per
 * owner), with Archive and Restore for a session with iam.principals.write
 * (hidden otherwise; the cell decides anyway, and refuses archiving oneself).
 */
import { useState } from 'preact/hooks';
import { ADMIN, call, describeError, seg } from '../api.ts';
import { can, knowsPermissions } from '../auth/session.ts';
import { Confirm, ErrorNote, StateBadge, Time, useApp, useLoad } from '../ui.tsx';

interface Principal {
  id: string;
  kind: string;
  name: string;
  status: string;
  roles: string[];
  created_at: string;
}
interface KeyRow {
  owner_id: string;
  status: string;
}

function Lifecycle({ p, onDone }: { p: Principal; onDone(): void }) {
  const { session } = useApp();
  const [ask, setAsk] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  if (!can(session, 'iam.principals.write')) return <span class="muted">-</span>;
  if (p.id === session.principal.id) return <span class="muted">you</span>;
  const act = async (what: 'archive' | 'restore') => {
    setBusy(true);
    setError(null);
    try {
      await call(session, 'POST', `${ADMIN}/principals/${seg(p.id)}/${what}`);
      setAsk(false);
      onDone();
    } catch (e) {
      setError(describeError(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <span class="buttons">
      {p.status === 'active' ? (
        ask ? (
          <Confirm
            act="Confirm archive"
            cls="danger"
            keep="Keep"
            busy={busy}
            onConfirm={() => act('archive')}
            onKeep={() => setAsk(false)}
          />
        ) : (
          <button type="button" class="archive" onClick={() => setAsk(true)} aria-label={`Archive ${p.name}`}>
            Archive
          </button>
        )
      ) : p.status === 'archived' || p.status === 'deleted' ? (
        <button type="button" class="restore" disabled={busy} onClick={() => act('restore')} aria-label={`Restore ${p.name}`}>
          Restore
        </button>
      ) : (
        <span class="muted">-</span>
      )}
      {error ? (
        <span class="error" role="alert">
          {error}
        </span>
      ) : null}
    </span>
  );
}

export function PrincipalsView() {
  const { session } = useApp();
  const [q, setQ] = useState('');
  const data = useLoad(
    async (signal) => {
      const ps = await call<{ principals: Principal[]; total: number }>(session, 'GET', `${ADMIN}/principals?limit=1000`, { signal });
      let keys: KeyRow[] | null = null;
      try {
        keys = (await call<{ keys: KeyRow[] }>(session, 'GET', `${ADMIN}/api-keys?limit=1000`, { signal })).keys;
      } catch {
        keys = null;
      }
      return { principals: ps.principals, total: ps.total, keys };
    },
    [session],
    15_000,
  );
  if (knowsPermissions(session) && !can(session, 'iam.principals.read')) {
    return (
      <>
        <h1>Principals</h1>
        <p class="notice">
          Your credential lacks the permission <code>iam.principals.read</code>.
        </p>
      </>
    );
  }
  const needle = q.trim().toLowerCase();
  const rows = (data.data?.principals ?? []).filter(
    (p) => !needle || p.name.toLowerCase().includes(needle) || p.id.includes(needle) || p.roles.some((r) => r.includes(needle)),
  );
  const keysOf = (id: string) => {
    const ks = data.data?.keys?.filter((k) => k.owner_id === id) ?? [];
    return { active: ks.filter((k) => k.status === 'active').length, all: ks.length };
  };
  return (
    <>
      <h1>Principals</h1>
      <form class="filters" aria-label="Search principals" onSubmit={(e) => e.preventDefault()}>
        <label>
          Search
          <input
            id="principals-search"
            type="search"
            value={q}
            onInput={(e) => setQ((e.target as HTMLInputElement).value)}
            placeholder="name, id or role"
          />
        </label>
        <span class="muted" role="status">
          {data.data ? `${rows.length} of ${data.data.total}` : ''}
        </span>
      </form>
      <ErrorNote error={data.error} prefix="Principals could not be loaded" />
      {data.data ? (
        <div class="table-wrap">
          <table id="principals-table" class="cards-narrow">
            <caption class="sr-only">Principals</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Kind</th>
                <th scope="col">Roles</th>
                <th scope="col">Status</th>
                <th scope="col">API keys</th>
                <th scope="col">Created</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((p) => {
                const k = keysOf(p.id);
                return (
                  <tr key={p.id} data-principal={p.id} data-name={p.name} data-status={p.status}>
                    <th scope="row">
                      <bdi>{p.name}</bdi>
                      {p.id === session.principal.id ? <span class="muted"> (you)</span> : null}
                      <div class="muted small">
                        <code>{p.id}</code>
                      </div>
                    </th>
                    <td data-label="Kind">{p.kind}</td>
                    <td data-label="Roles">{p.roles.length ? <bdi>{p.roles.join(', ')}</bdi> : <span class="muted">none</span>}</td>
                    <td data-label="Status">
                      <StateBadge state={p.status} />
                    </td>
                    <td data-label="API keys">{data.data?.keys ? `${k.active} active of ${k.all}` : <span class="muted">unknown</span>}</td>
                    <td data-label="Created">
                      <Time at={p.created_at} />
                    </td>
                    <td data-label="Actions" class="row-actions">
                      <Lifecycle p={p} onDone={data.reload} />
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      ) : data.loading ? (
        <p role="status">Loading principals…</p>
      ) : null}
    </>
  );
}
