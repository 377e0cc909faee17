/**
 * The cells of this cell's group (`GET /admin/cells`: id, region, clearance,
 * topology, state), when the cell has that endpoint (groups of cells on a
 * shared PostgreSQL store). A cell without it answers 404, and the view says
 * this is a single cell.
 */
import { ADMIN, ApiError, call } from '../api.ts';
import { ErrorNote, Json, StateBadge, Time, useApp, useLoad } from '../ui.tsx';

interface CellRow {
  id?: string;
  cell_id?: string;
  region?: string;
  clearance?: number;
  topology?: Record<string, string>;
  state?: string;
  last_seen?: string;
  heartbeat_at?: string;
}

export function CellsView() {
  const { session, config } = useApp();
  const data = useLoad(
    async (signal) => {
      try {
        const r = await call<{ cells?: CellRow[] } | CellRow[]>(session, 'GET', `${ADMIN}/cells`, { signal });
        return Array.isArray(r) ? r : (r.cells ?? []);
      } catch (e) {
        if (e instanceof ApiError && e.status === 404) return null;
        throw e;
      }
    },
    [session],
    10_000,
  );
  return (
    <>
      <h1>Cells</h1>
      <ErrorNote error={data.error} prefix="The group could not be loaded" />
      {data.data === null ? (
        <p id="cells-single">
          This is a single cell (<code>{config.cell_id}</code>): it does not list a group of cells (no <code>GET /admin/cells</code>).
        </p>
      ) : data.data ? (
        <div class="table-wrap">
          <table id="cells-table">
            <caption class="sr-only">Cells of the group</caption>
            <thead>
              <tr>
                <th scope="col">Cell</th>
                <th scope="col">Region</th>
                <th scope="col">Clearance</th>
                <th scope="col">Topology</th>
                <th scope="col">State</th>
                <th scope="col">Last seen</th>
              </tr>
            </thead>
            <tbody>
              {data.data.map((c) => {
                const id = c.cell_id ?? c.id ?? '?';
                return (
                  <tr key={id}>
                    <th scope="row">
                      <code>{id}</code>
                      {id === config.cell_id ? <span class="muted"> (this cell)</span> : null}
                    </th>
                    <td>{c.region ?? '-'}</td>
                    <td>{c.clearance ?? '-'}</td>
                    <td>{c.topology ? <Json value={c.topology} label={`Topology of ${id}`} /> : '-'}</td>
                    <td>{c.state ? <StateBadge state={c.state} /> : '-'}</td>
                    <td>
                      <Time at={c.last_seen ?? c.heartbeat_at ?? null} />
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      ) : (
        <p role="status">Loading…</p>
      )}
    </>
  );
}
