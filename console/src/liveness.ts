/**
 * Is the console's picture of the cell current? Every answer from the cell
 * (any API call, and a heartbeat on `/healthz` every 2 s) marks it connected;
 * a request that gets no answer (connection refused, timeout) marks it
 * disconnected. Views read this so they never say "live" or "nothing waits"
 * from data the cell could not confirm; the shell shows a banner with the age
 * of the last answer.
 */
import { useEffect, useState } from 'preact/hooks';

export interface Liveness {
  connected: boolean;
  /** Milliseconds since the epoch of the last answer from the cell (0: none yet). */
  lastOk: number;
}

let state: Liveness = { connected: true, lastOk: Date.now() };
const listeners = new Set<(l: Liveness) => void>();

function set(next: Liveness): void {
  state = next;
  for (const l of listeners) l(state);
}

/** The cell answered (any HTTP status: it is up). */
export function markAnswered(): void {
  if (state.connected) state = { connected: true, lastOk: Date.now() };
  else set({ connected: true, lastOk: Date.now() });
}

/** A request got no answer (not an abort by the console itself). */
export function markUnreachable(): void {
  if (state.connected) set({ connected: false, lastOk: state.lastOk });
}

export function liveness(): Liveness {
  return state;
}

/** The liveness, re-rendering on change. */
export function useLiveness(): Liveness {
  const [l, setL] = useState(state);
  useEffect(() => {
    listeners.add(setL);
    setL(state);
    return () => {
      listeners.delete(setL);
    };
  }, []);
  return l;
}

/** Pings `/healthz` every `everyMs` while mounted (also while the tab is hidden: cheap, and the banner is right on return). */
export function useHeartbeat(everyMs = 2000): void {
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const beat = async () => {
      try {
        const r = await fetch('/healthz', { cache: 'no-store', credentials: 'omit', signal: AbortSignal.timeout(Math.max(1500, everyMs)) });
        await r.body?.cancel();
        if (!stopped) markAnswered();
      } catch {
        if (!stopped) markUnreachable();
      }
      if (!stopped) timer = setTimeout(beat, everyMs);
    };
    timer = setTimeout(beat, everyMs);
    return () => {
      stopped = true;
      if (timer) clearTimeout(timer);
    };
  }, [everyMs]);
}

/** "just now", "12 s ago", "3 min ago". */
export function ago(ms: number, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 2) return 'just now';
  if (s < 120) return `${s} s ago`;
  const m = Math.round(s / 60);
  if (m < 120) return `${m} min ago`;
  return `${Math.round(m / 60)} h ago`;
}
