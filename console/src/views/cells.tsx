/**
 * The cells of this cell's group (`GET /admin/cells`: `{ items, total }` of
 * id, state, region, clearance, topology, posture, heartbeat), when the cell
 * has that endpoint. A cell without it answers 404, and the view says this is
 * a single cell.
 */
import { ADMIN, ApiError, call } from '../api.ts';
import { ErrorNote, Json, StateBadge, Time, useApp, useLoad } from '../ui.tsx';

export interface CellRow {
  id?: string;
  cell_id?: string;
  self?: boolean;
  region?: string;
  clearance?: number;
  topology?: Record<string, string>;
  posture?: string;
  url?: string | null;
  state?: string;
  last_seen?: string;
  heartbeat_at?: string;
  heartbeat_age_ms?: number;
  stopped_at?: string | null;
  key_ids?: string[];
}

/** The rows of any shape the endpoint has had: `{ items }` (the API), `{ cells }` or a bare list. */
export function cellRows(r: { items?: CellRow[]; cells?: CellRow[] } | CellRow[] | null | undefined): CellRow[] {
  if (!r) return [];
  if (Array.isArray(r)) return r;
  return r.items ?? r.cells ?? [];
}

export function CellsView() {
  const { session, config } = useApp();
  const data = useLoad(
    async (signal) => {
      try {
        return cellRows(await call<{ items?: CellRow[]; cells?: CellRow[] } | CellRow[]>(session, 'GET', `${ADMIN}/cells`, { signal }));
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
      {data.data === null || (data.data && data.data.length === 0) ? (
        <p id="cells-single">
          This is a single cell (<code>{config.cell_id}</code>): it lists no group of cells.
        </p>
      ) : data.data ? (
        <div class="table-wrap">
          <table id="cells-table">
            <caption class="sr-only">Cells of the group</caption>
            <thead>
              <tr>
                <th scope="col">Cell</th>
                <th scope="col">State</th>
                <th scope="col">Region</th>
                <th scope="col">Clearance</th>
                <th scope="col">Posture</th>
                <th scope="col">Topology</th>
                <th scope="col">Last heartbeat</th>
                <th scope="col">Keys</th>
              </tr>
            </thead>
            <tbody>
              {data.data.map((c) => {
                const id = c.cell_id ?? c.id ?? '?';
                return (
                  <tr key={id} data-cell={id}>
                    <th scope="row" data-label="Cell">
                      <code>{id}</code>
                      {c.self || id === config.cell_id ? <span class="muted"> (this cell)</span> : null}
                      {c.url ? <div class="muted small">{c.url}</div> : null}
                    </th>
                    <td data-label="State">{c.state ? <StateBadge state={c.state} /> : '-'}</td>
                    <td data-label="Region">{c.region ?? '-'}</td>
                    <td data-label="Clearance">{c.clearance ?? '-'}</td>
                    <td data-label="Posture">{c.posture ?? '-'}</td>
                    <td data-label="Topology">
                      {c.topology && Object.keys(c.topology).length ? <Json value={c.topology} label={`Topology of ${id}`} /> : '-'}
                    </td>
                    <td data-label="Last heartbeat">
                      <Time at={c.last_seen ?? c.heartbeat_at ?? null} />
                      {typeof c.heartbeat_age_ms === 'number' ? (
                        <div class="muted small">{Math.round(c.heartbeat_age_ms / 1000)} s ago</div>
                      ) : null}
                      {c.stopped_at ? (
                        <div class="muted small">
                          stopped <Time at={c.stopped_at} />
                        </div>
                      ) : null}
                    </td>
                    <td data-label="Keys">{c.key_ids?.length ? c.key_ids.map((k) => <code class="block">{k}</code>) : '-'}</td>
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
