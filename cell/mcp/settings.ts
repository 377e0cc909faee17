/**
 * Every default of the MCP endpoint in one place, each with why.
 */
export const MCP = {
  /** Most crews (and endpoints) one `tools/list` offers: the list is built per caller on every call. */
  maxToolsPerKind: 1000,
  /** How long a call waits for the client's user to answer an approval (elicitation), at most: then the call answers `waiting`. */
  elicitationTimeoutMs: 10 * 60_000,
  /** A session with no request and no call in flight for this long is closed; its client opens another. */
  sessionIdleMs: 30 * 60_000,
  /** Sessions one caller holds at once; a new one closes its least recently used. */
  sessionsPerCaller: 16,
  /** Sessions of the cell in all. */
  maxSessions: 10_000,
  /** Messages kept per session for a client that resumes its stream with Last-Event-ID. */
  eventsPerSession: 1_000,
  /**
   * How often a call that follows a run judges its credential again besides the store's changes
   * (an expiry announces itself with no change): a run event stream's heartbeat, 15 s.
   */
  credentialRecheckMs: 15_000,
} as const;
