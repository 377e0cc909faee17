/**
 * The console's shell: the sign-in screen (the cell's own OAuth server in a
 * pop-up, or a pasted API key), then the header (who is signed in, sign out),
 * the navigation and the current view. The session lives in this component's
 * state only; signing out or reloading forgets it.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { ADMIN, call, describeError, TEAMS } from './api.ts';
import { whyNot, type ApprovalRun, type PendingApproval } from './approval-model.ts';
import { apiKeySession, can, identify, knowsPermissions, type Session } from './auth/session.ts';
import { signInWithCell } from './auth/signin.ts';
import { openedAtPublicUrl, type ConsoleConfig } from './config.ts';
import { ago, useHeartbeat, useLiveness } from './liveness.ts';
import { href, useRoute, type Route } from './router.ts';
import { App, useApp, useLoad, type AppState } from './ui.tsx';
import { ApprovalsView } from './views/approvals.tsx';
import { AuditView } from './views/audit.tsx';
import { CatalogView } from './views/catalog.tsx';
import { CellsView } from './views/cells.tsx';
import { DevicesView, EdgeRunView } from './views/devices.tsx';
import { FormationsView } from './views/formations.tsx';
import { KeysView } from './views/keys.tsx';
import { RunView } from './views/run.tsx';
import { PrincipalsView } from './views/principals.tsx';
import { RunsView } from './views/runs.tsx';
import { SchedulesView } from './views/schedules.tsx';
import { VerifyView } from './views/verify.tsx';

function SignIn({ config, onSession, notice }: { config: ConsoleConfig; onSession(s: Session): void; notice: string | null }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [key, setKey] = useState('');
  const abort = useRef<AbortController | null>(null);
  useEffect(() => () => abort.current?.abort(), []);
  const atPublicUrl = openedAtPublicUrl(config);

  const withCell = async () => {
    setError(null);
    setBusy(true);
    abort.current = new AbortController();
    try {
      onSession(await signInWithCell(config, abort.current.signal));
    } catch (e) {
      setError(describeError(e));
    } finally {
      setBusy(false);
    }
  };
  const withKey = async (e: Event) => {
    e.preventDefault();
    setError(null);
    const secret = key.trim();
    if (!/^svck_live_[A-Za-z0-9_-]{43}$/.test(secret)) {
      setError('That is not an API key: it starts with svck_live_ and has 53 characters.');
      return;
    }
    setBusy(true);
    try {
      const s = apiKeySession(secret);
      if (!(await identify(s))) {
        setError('The cell refused this key (unknown, revoked, expired, or not allowed from here).');
        return;
      }
      setKey('');
      onSession(s);
    } catch (err) {
      setError(describeError(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <main id="main" class="signin">
      <h1>agent-cell console</h1>
      <p class="muted">
        Cell <code>{config.cell_id}</code>
      </p>
      {notice ? (
        <p class="notice" role="status">
          {notice}
        </p>
      ) : null}
      {!atPublicUrl ? (
        <p class="error" role="alert">
          This cell's public URL is <code>{config.public_url}</code>; tokens are bound to it. Open the console at{' '}
          <a href={`${config.public_url}/console`}>{config.public_url}/console</a>.
        </p>
      ) : null}
      <section class="panel" aria-labelledby="signin-oauth">
        <h2 id="signin-oauth">Sign in</h2>
        <p>
          Sign in with your user name and password on this cell. A window opens for the cell's login and consent pages; the console then
          holds a short-lived access token bound to a key only this page has.
        </p>
        <button type="button" id="sign-in" class="primary" onClick={withCell} disabled={busy || !atPublicUrl}>
          Sign in with this cell
        </button>
      </section>
      <section class="panel" aria-labelledby="signin-key">
        <h2 id="signin-key">Or use an API key</h2>
        <form onSubmit={withKey}>
          <label for="api-key">API key</label>
          <input
            id="api-key"
            type="password"
            autoComplete="off"
            spellcheck={false}
            value={key}
            onInput={(e) => setKey((e.target as HTMLInputElement).value)}
            placeholder="svck_live_…"
          />
          <p class="muted">The key stays in this page's memory only; reloading the page or signing out forgets it.</p>
          <button type="submit" id="use-key" disabled={busy || key === ''}>
            Use this key
          </button>
        </form>
      </section>
      {error ? (
        <p class="error" role="alert" id="signin-error">
          {error}
        </p>
      ) : null}
      {busy ? <p role="status">Signing in…</p> : null}
    </main>
  );
}

const NAV: { view: Route['view']; label: string; id: string }[] = [
  { view: 'runs', label: 'Runs', id: 'nav-runs' },
  { view: 'approvals', label: 'Approvals', id: 'nav-approvals' },
  { view: 'schedules', label: 'Schedules', id: 'nav-schedules' },
  { view: 'formations', label: 'Formations & crews', id: 'nav-formations' },
  { view: 'catalog', label: 'Catalog', id: 'nav-catalog' },
  { view: 'principals', label: 'Principals', id: 'nav-principals' },
  { view: 'keys', label: 'API keys', id: 'nav-keys' },
  { view: 'audit', label: 'Audit trail', id: 'nav-audit' },
  { view: 'cells', label: 'Cells', id: 'nav-cells' },
  { view: 'devices', label: 'Edge devices', id: 'nav-devices' },
  { view: 'verify', label: 'Verify a journal', id: 'nav-verify' },
];

function View({ route }: { route: Route }) {
  switch (route.view) {
    // Keyed by subject: another run or formation starts from a clean state, never another's records.
    case 'run':
      return <RunView key={route.runId} runId={route.runId} />;
    case 'approvals':
      return <ApprovalsView />;
    case 'formations':
      return <FormationsView formationId={route.formationId} />;
    case 'keys':
      return <KeysView />;
    case 'audit':
      return <AuditView />;
    case 'cells':
      return <CellsView />;
    case 'devices':
      return <DevicesView key={route.deviceId ?? ''} deviceId={route.deviceId} />;
    case 'edge-run':
      return <EdgeRunView key={route.runId} runId={route.runId} />;
    case 'verify':
      return <VerifyView />;
    case 'principals':
      return <PrincipalsView />;
    case 'catalog':
      return <CatalogView />;
    case 'schedules':
      return <SchedulesView scheduleId={route.scheduleId} />;
    default:
      return <RunsView query={route.view === 'runs' ? route.query : new URLSearchParams()} />;
  }
}

/** How many approvals wait for the signed-in principal's decision (crew runs; fetched every 10 s). */
function ApprovalsBadge() {
  const { session } = useApp();
  const liveness = useLiveness();
  const data = useLoad(
    async (signal) => {
      if (!can(session, 'agent_teams.read')) return 0;
      const r = await call<{ runs: (ApprovalRun & { pending_approvals?: PendingApproval[] })[] }>(
        session,
        'GET',
        `${TEAMS}/runs?state=waiting&limit=1000`,
        { signal },
      );
      const approve = can(session, 'agent_teams.approve');
      return r.runs.reduce(
        (n, run) =>
          n +
          (run.pending_approvals ?? []).filter((a) => whyNot(a, run, session.principal.id, approve, knowsPermissions(session)) === null)
            .length,
        0,
      );
    },
    [session],
    10_000,
  );
  // Never a count the cell could not confirm: while it does not answer, the badge says so.
  if (!liveness.connected)
    return (
      <span class="badge badge-unknown" id="approvals-badge">
        {' '}
        ?<span class="sr-only"> waiting for you: unknown, the cell does not answer</span>
      </span>
    );
  if (!data.data) return null;
  return (
    <span class="badge" id="approvals-badge">
      {' '}
      {data.data}
      <span class="sr-only"> waiting for you</span>
    </span>
  );
}

/** Shown while the cell does not answer: what is on screen may be stale. */
function LivenessBanner() {
  useHeartbeat();
  const l = useLiveness();
  const [, tick] = useState(0);
  useEffect(() => {
    if (l.connected) return undefined;
    const t = setInterval(() => tick((n) => n + 1), 1000);
    return () => clearInterval(t);
  }, [l.connected]);
  if (l.connected) return null;
  return (
    <div class="banner disconnected" id="liveness-banner" role="alert">
      <strong>Disconnected from the cell, retrying.</strong> Last update {ago(l.lastOk)}: what this page shows may be out of date.
    </div>
  );
}

function Shell({ state }: { state: AppState }) {
  const route = useRoute();
  const main = useRef<HTMLElement>(null);
  const first = useRef(true);
  // The view and its subject, not its filters: changing a filter must not move focus away from it.
  const place =
    route.view === 'run'
      ? `run/${route.runId}`
      : route.view === 'formations'
        ? `formations/${route.formationId ?? ''}`
        : route.view === 'schedules'
          ? `schedules/${route.scheduleId ?? ''}`
          : route.view;
  useEffect(() => {
    // Move focus to the new view so keyboard and screen-reader users land on it.
    if (first.current) {
      first.current = false;
      return;
    }
    main.current?.focus();
  }, [place]);
  const { session } = state;
  const current = route.view === 'run' ? 'runs' : route.view;
  const expires = session.expiresAt;
  return (
    <App.Provider value={state}>
      {/* biome-ignore lint/a11y/useValidAnchor: a skip link is a link to #main; the handler only moves focus there in a hash router. */}
      <a
        class="skip"
        href="#main"
        onClick={(e) => {
          e.preventDefault();
          main.current?.focus();
        }}
      >
        Skip to content
      </a>
      <header class="top">
        <div class="brand">
          <span class="logo" aria-hidden="true">
            ◆
          </span>{' '}
          agent-cell console <span class="muted">· {state.config.cell_id}</span>
        </div>
        <div class="whoami" id="whoami">
          Signed in as{' '}
          <strong id="whoami-name">
            <bdi>{session.principal.name ?? session.principal.id ?? 'an API key'}</bdi>
          </strong>
          <span class="muted">
            {' '}
            · {session.kind === 'oauth' ? 'OAuth (DPoP)' : 'API key'}
            {expires ? <> · until {new Date(expires).toLocaleTimeString()}</> : null}
          </span>
          {session.permissions === null ? <span class="muted"> · permissions unknown: the cell decides each action</span> : null}
          <button type="button" id="sign-out" onClick={state.signOut}>
            Sign out
          </button>
        </div>
      </header>
      <LivenessBanner />
      <nav class="nav" aria-label="Console">
        <ul>
          {NAV.map((n) => (
            <li key={n.view}>
              <a id={n.id} href={href(n.view)} aria-current={current === n.view ? 'page' : undefined}>
                {n.label}
                {n.view === 'approvals' ? <ApprovalsBadge /> : null}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <main id="main" ref={main} tabIndex={-1}>
        <View route={route} />
      </main>
    </App.Provider>
  );
}

/** The whole console: sign-in until a session exists, then the shell. */
export function Console({ config }: { config: ConsoleConfig }) {
  const [session, setSession] = useState<Session | null>(null);
  const [names, setNames] = useState<ReadonlyMap<string, string>>(new Map());
  const [notice, setNotice] = useState<string | null>(null);

  useEffect(() => {
    if (!session) return undefined;
    const ac = new AbortController();
    const m = new Map<string, string>();
    if (session.principal.id && session.principal.name) m.set(session.principal.id, session.principal.name);
    setNames(new Map(m));
    if (can(session, 'iam.principals.read') && session.permissions !== null) {
      call<{ principals: { id: string; name: string }[] }>(session, 'GET', `${ADMIN}/principals?limit=1000`, { signal: ac.signal }).then(
        (r) => {
          for (const p of r.principals) m.set(p.id, p.name);
          setNames(new Map(m));
        },
        () => undefined,
      );
    }
    // An OAuth session ends when its token expires: say so instead of failing every request.
    const t = session.expiresAt
      ? setTimeout(() => refused('Your access token expired. Sign in again.'), Math.max(0, session.expiresAt - Date.now()))
      : undefined;
    return () => {
      ac.abort();
      if (t) clearTimeout(t);
    };
  }, [session]);

  const signOut = (message: string | null = null) => {
    void session?.end();
    setSession(null);
    setNames(new Map());
    setNotice(message);
  };
  function refused(message = 'The cell no longer accepts this session (token expired or revoked, or key revoked). Sign in again.') {
    signOut(message);
  }

  if (!session)
    return (
      <SignIn
        config={config}
        notice={notice}
        onSession={(s) => {
          setNotice(null);
          setSession(s);
        }}
      />
    );
  return (
    <Shell
      state={{ config, session, names, signOut: () => signOut('Signed out. The console forgot the credential.'), refused: () => refused() }}
    />
  );
}
