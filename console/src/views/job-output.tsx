/**
 * A job's output as what it is: SQL results as tables, a notebook's cells in
 * order (markdown as text, SQL as tables, compute with its result and logs),
 * a compute step's logs as a log panel; anything else as JSON.
 */
import { Json } from '../ui.tsx';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

interface SqlResult {
  columns: string[];
  rows: unknown[][];
  changes?: number;
  truncated_by?: string;
}
const isSql = (v: unknown): v is SqlResult => isObj(v) && Array.isArray(v['columns']) && Array.isArray(v['rows']);

function cell(v: unknown): string {
  if (v === null || v === undefined) return 'NULL';
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}

export function SqlTable({ r, caption }: { r: SqlResult; caption: string }) {
  if (r.columns.length === 0) return <p class="muted">{r.changes ?? 0} rows changed.</p>;
  return (
    <div class="table-wrap">
      <table class="sql-result">
        <caption>
          {caption}: {r.rows.length} row{r.rows.length === 1 ? '' : 's'}
          {r.truncated_by ? ` (truncated: ${r.truncated_by})` : ''}
        </caption>
        <thead>
          <tr>
            {r.columns.map((c) => (
              <th scope="col">
                <bdi>{c}</bdi>
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {r.rows.slice(0, 500).map((row) => (
            <tr>
              {(Array.isArray(row) ? row : r.columns.map((c) => (row as Obj)[c])).map((v, i) => (
                <td data-label={r.columns[i] ?? ''}>
                  <bdi>{cell(v)}</bdi>
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function Logs({ logs }: { logs: unknown[] }) {
  if (logs.length === 0) return <p class="muted">No log line.</p>;
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling log is reached with Tab (axe: scrollable-region-focusable).
    <pre class="logs" tabIndex={0} role="log">
      {logs.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n')}
    </pre>
  );
}

function Step({ v, label }: { v: unknown; label: string }) {
  if (isObj(v) && Array.isArray(v['results']) && (v['results'] as unknown[]).every(isSql)) {
    return (
      <>
        {(v['results'] as SqlResult[]).map((r, i) => (
          <SqlTable r={r} caption={`${label}, statement ${i + 1}`} />
        ))}
      </>
    );
  }
  if (isObj(v) && v['type'] === 'markdown' && typeof v['source'] === 'string')
    return (
      <div class="markdown">
        <bdi>{v['source']}</bdi>
      </div>
    );
  if (isObj(v) && Array.isArray(v['logs'])) {
    return (
      <>
        <Json value={'result' in v ? v['result'] : null} label={`${label} result`} />
        <h4>Logs</h4>
        <Logs logs={v['logs'] as unknown[]} />
      </>
    );
  }
  return <Json value={v} label={label} />;
}

export function JobOutput({ value, jobType }: { value: unknown; jobType: string | null }) {
  if (jobType === 'notebook' && isObj(value) && Array.isArray(value['cells'])) {
    return (
      <ol class="notebook plain">
        {(value['cells'] as unknown[]).map((c, i) => (
          <li class="nb-cell" data-cell={i}>
            <h4>
              Cell {i + 1} <span class="muted small">{isObj(c) && typeof c['type'] === 'string' ? c['type'] : ''}</span>
            </h4>
            <Step v={c} label={`Cell ${i + 1}`} />
          </li>
        ))}
      </ol>
    );
  }
  return <Step v={value} label="Run output" />;
}
