/**
 * The console's routes live in the URL fragment (`#/runs/run_…`), so every
 * view has a link that can be bookmarked and shared, and the cell serves one
 * page for all of them. Parsing is pure (tested in test/console/router.test.ts).
 */
import { useEffect, useState } from 'preact/hooks';

export type Route =
  | { view: 'runs'; query: URLSearchParams }
  | { view: 'run'; runId: string }
  | { view: 'approvals' }
  | { view: 'formations'; formationId: string | null }
  | { view: 'keys' }
  | { view: 'audit' }
  | { view: 'cells' }
  | { view: 'schedules'; scheduleId: string | null }
  | { view: 'principals' }
  | { view: 'catalog' }
  | { view: 'verify' }
  | { view: 'devices'; deviceId: string | null }
  | { view: 'edge-run'; runId: string };

const ID = /^[A-Za-z0-9_.:-]{1,100}$/;

/** The route of a fragment such as `#/runs/run_0123` (unknown fragments go to the runs list). */
export function parseRoute(hash: string): Route {
  const raw = hash.replace(/^#/, '');
  const [path = '', qs = ''] = raw.split('?', 2);
  const parts = path
    .split('/')
    .filter(Boolean)
    .map((p) => {
      try {
        return decodeURIComponent(p);
      } catch {
        return '';
      }
    });
  const [first, second] = parts;
  if (first === 'runs' && second && ID.test(second)) return { view: 'run', runId: second };
  if (first === 'approvals') return { view: 'approvals' };
  if (first === 'formations') return { view: 'formations', formationId: second && ID.test(second) ? second : null };
  if (first === 'keys') return { view: 'keys' };
  if (first === 'audit') return { view: 'audit' };
  if (first === 'cells') return { view: 'cells' };
  if (first === 'schedules') return { view: 'schedules', scheduleId: second && ID.test(second) ? second : null };
  if (first === 'principals') return { view: 'principals' };
  if (first === 'catalog') return { view: 'catalog' };
  if (first === 'verify') return { view: 'verify' };
  if (first === 'devices') return { view: 'devices', deviceId: second && ID.test(second) ? second : null };
  if (first === 'edge-runs' && second && ID.test(second)) return { view: 'edge-run', runId: second };
  return { view: 'runs', query: new URLSearchParams(qs) };
}

/** The fragment of a route. */
export function href(view: string, id?: string | null, query?: Record<string, string>): string {
  const q = query ? new URLSearchParams(Object.entries(query).filter(([, v]) => v !== '')).toString() : '';
  return `#/${view}${id ? `/${encodeURIComponent(id)}` : ''}${q ? `?${q}` : ''}`;
}

/** The current route, following fragment changes. */
export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(window.location.hash));
  useEffect(() => {
    const on = () => setRoute(parseRoute(window.location.hash));
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}
