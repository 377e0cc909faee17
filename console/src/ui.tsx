/**
 * Small shared pieces of the console's views: state badges (colour and text,
 * never colour alone), error notes, JSON blocks, times, a copy button, the
 * hooks that load data (with reload and polling that pauses while the tab is
 * hidden), the second step of an action that asks first (`Confirm`), and the
 * app-wide context (configuration, session, principal names).
 */
import { createContext } from 'preact';
import { useCallback, useContext, useEffect, useRef, useState } from 'preact/hooks';
import type { ComponentChildren } from 'preact';
import { describeError } from './api.ts';
import type { Session } from './auth/session.ts';
import type { ConsoleConfig } from './config.ts';

export interface AppState {
  config: ConsoleConfig;
  session: Session;
  /** Principal id -> name, for the principals the session may read. */
  names: ReadonlyMap<string, string>;
  /** Ends the session (forgets every secret). */
  signOut(): void;
  /** Tells the app the credential was refused (expired token, revoked key). */
  refused(): void;
}

export const App = createContext<AppState | null>(null);

export function useApp(): AppState {
  const a = useContext(App);
  if (!a) throw new TypeError('useApp outside <App.Provider>');
  return a;
}

/** "you" for the signed-in principal, else its name when known, else its id. */
export function Who({ id }: { id: string | null | undefined }) {
  const { session, names } = useApp();
  if (!id) return <span class="muted">unknown</span>;
  const name = names.get(id);
  const me = session.principal.id === id;
  return (
    <span class="who" title={id}>
      <bdi>{name ?? id}</bdi>
      {me ? <span class="you"> (you)</span> : null}
    </span>
  );
}

/**
 * A name for places that cannot hold an element (an `<option>`, an SVG label, an attribute): wrapped in
 * FIRST STRONG ISOLATE … POP DIRECTIONAL ISOLATE (U+2068, U+2069), so a right-to-left override inside
 * stays inside, and cut to `max` characters.
 */
export function isolated(s: string, max = 40): string {
  return `\u2068${s.length > max ? `${s.slice(0, max - 1)}…` : s}\u2069`;
}

/**
 * The second step of an action that asks before it acts (a key's rotate or revoke, a principal's archive, a
 * schedule's delete, a run's cancel, a device's release): the question, the button that acts (`cls` gives its weight,
 * `danger` or `primary`; it carries the class `confirm`), and the one that takes the question back. The view shows it
 * in place of the button that asked, and keeps the answer's error beside it.
 */
export function Confirm({
  question,
  act,
  cls,
  id,
  label,
  keep = 'Cancel',
  small = false,
  busy = false,
  onConfirm,
  onKeep,
}: {
  question?: ComponentChildren;
  /** The acting button's text. */
  act: string;
  /** Its weight: `danger` or `primary`. */
  cls: 'danger' | 'primary';
  id?: string;
  /** Its accessible name, when its text alone does not say what it acts on. */
  label?: string;
  /** The text of the button that takes the question back. */
  keep?: string;
  small?: boolean;
  busy?: boolean;
  onConfirm(): void;
  onKeep(): void;
}) {
  const size = small ? 'small ' : '';
  return (
    <>
      {question !== undefined ? (
        <>
          <span>{question}</span>{' '}
        </>
      ) : null}
      <button type="button" class={`${size}${cls} confirm`} id={id} disabled={busy} onClick={onConfirm} aria-label={label}>
        {act}
      </button>{' '}
      <button type="button" class={small ? 'small' : undefined} onClick={onKeep}>
        {keep}
      </button>
    </>
  );
}

/** Principals, comma-separated, each as `Who` shows it. */
export function WhoList({ ids }: { ids: readonly string[] }) {
  return (
    <>
      {ids.map((p, i) => (
        <>
          {i ? ', ' : ''}
          <Who id={p} />
        </>
      ))}
    </>
  );
}

export function StateBadge({ state }: { state: string }) {
  return <span class={`state state-${state.replace(/[^a-z_]/g, '')}`}>{state === 'skipped' ? 'not run' : state}</span>;
}

export function ErrorNote({ error, prefix }: { error: unknown; prefix?: string }) {
  if (error === null || error === undefined) return null;
  return (
    <p class="error" role="alert">
      {prefix ? `${prefix}: ` : ''}
      {describeError(error)}
    </p>
  );
}

export function Json({ value, label }: { value: unknown; label?: string }) {
  let text: string;
  try {
    text = JSON.stringify(value, null, 2) ?? 'undefined';
  } catch {
    text = String(value);
  }
  if (text.length > 20_000) text = `${text.slice(0, 20_000)}\n… (${text.length - 20_000} more characters)`;
  // A long value scrolls: keyboard users reach it with Tab (axe: scrollable-region-focusable).
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: see above.
    // biome-ignore lint/a11y/useAriaPropsSupportedByRole: the label names the value for screen readers that announce it.
    <pre class="json" tabIndex={0} aria-label={label ?? 'JSON value'}>
      {text}
    </pre>
  );
}

export function Time({ at }: { at: number | string | null | undefined }) {
  if (at === null || at === undefined) return <span class="muted">-</span>;
  const d = new Date(at);
  if (Number.isNaN(d.getTime())) return <span>{String(at)}</span>;
  return (
    <time dateTime={d.toISOString()} title={d.toISOString()}>
      {d.toLocaleString()}
    </time>
  );
}

export function CopyButton({ text, label }: { text: string; label: string }) {
  const [done, setDone] = useState<'idle' | 'copied' | 'failed'>('idle');
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setDone('copied');
    } catch {
      setDone('failed');
    }
  };
  return (
    <span class="copy">
      <button type="button" onClick={copy} aria-label={label}>
        Copy
      </button>
      <span role="status" class="muted">
        {done === 'copied' ? ' Copied.' : done === 'failed' ? ' Copy failed: select the text and copy it.' : ''}
      </span>
    </span>
  );
}

export function Section({
  title,
  id,
  children,
  actions,
}: {
  title: string;
  id?: string;
  children: ComponentChildren;
  actions?: ComponentChildren;
}) {
  const hid = id ? `${id}-title` : undefined;
  return (
    <section class="panel" aria-labelledby={hid} id={id}>
      <div class="panel-head">
        <h2 id={hid}>{title}</h2>
        {actions ? <div class="actions">{actions}</div> : null}
      </div>
      {children}
    </section>
  );
}

export interface Loaded<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload(): void;
}

/**
 * Loads with `load` now and whenever `deps` change; `pollMs` reloads on a
 * timer while the page is visible. The previous data stays shown during a reload.
 */
export function useLoad<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[], pollMs?: number): Loaded<T> {
  const { refused } = useApp();
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  const loadRef = useRef(load);
  loadRef.current = load;
  useEffect(() => {
    const ac = new AbortController();
    setLoading(true);
    loadRef.current(ac.signal).then(
      (d) => {
        if (ac.signal.aborted) return;
        setData(d);
        setError(null);
        setLoading(false);
      },
      (e: unknown) => {
        if (ac.signal.aborted) return;
        if ((e as { status?: number }).status === 401) refused();
        setError(e);
        setLoading(false);
      },
    );
    return () => ac.abort();
  }, [...deps, tick]);
  useEffect(() => {
    if (!pollMs) return undefined;
    const t = setInterval(() => {
      if (document.visibilityState === 'visible') reload();
    }, pollMs);
    return () => clearInterval(t);
  }, [pollMs, reload]);
  return { data, error, loading, reload };
}
