/**
 * How the OAuth module follows the store: a reload (the signing keyring, the
 * denylist, the audiences, the issuers) run when its table changes, retried
 * every `retryMs` while it fails (a store hiccup must not leave a revocation
 * unseen), and logged when it starts failing and when it recovers, not at
 * every retry. `halt()` ends the pending retries for good.
 */
import type { Logger } from '../../context.ts';

export interface ReloadFollower {
  /** Runs a reload; on failure logs it (once per outage) and tries again shortly, until one succeeds or the follower halts. */
  follow(what: string, reload: () => Promise<void>): void;
  /** No retry runs after this. */
  halt(): void;
}

export function reloadFollower(log: Logger, retryMs: number): ReloadFollower {
  let stopped = false;
  /** A pending retry per reload that failed. */
  const retries = new Map<string, NodeJS.Timeout>();
  /** Reloads failing now (a store outage). */
  const failing = new Set<string>();
  const follow = (what: string, reload: () => Promise<void>): void => {
    reload().then(
      () => {
        if (failing.delete(what)) log.info(`oauth: ${what} reloaded again`);
      },
      (e: unknown) => {
        if (!failing.has(what)) log.error(`oauth: ${what} reload failed; retrying until it succeeds`, { error: e });
        failing.add(what);
        retry(what, reload);
      },
    );
  };
  const retry = (what: string, reload: () => Promise<void>): void => {
    if (stopped || retries.has(what)) return;
    const t = setTimeout(() => {
      retries.delete(what);
      if (!stopped) follow(what, reload);
    }, retryMs);
    t.unref();
    retries.set(what, t);
  };
  return {
    follow,
    halt() {
      stopped = true;
      for (const t of retries.values()) clearTimeout(t);
      retries.clear();
    },
  };
}
