/**
 * The shapes of a crew run: what it was asked (the input) and what it runs
 * (the spec kept with the run).
 */

export interface CrewRunSpec {
  input: unknown;
  /** Time budget (ms): a run still in flight after it is flagged `investigate`. */
  max_duration_ms: number;
  /** Cost budget (tokens across all seats): a run still in flight beyond it is flagged too. */
  max_tokens: number | null;
  formation_id: string;
  /** The formation version the run executes (runs from before versions: absent, read as 1). */
  formation_version?: number;
  /** The crew's assignments when the run started (billet id -> agent id). */
  assignments?: Record<string, string>;
  /** A fork's parent: the run, the seq forked at and that record's hash (fork.ts). */
  forked_from?: { run_id: string; seq: number; record_hash: string };
  /** A fork's replacement input of the step it was forked at. */
  replace?: { step_id: string; input: unknown };
}

export interface CrewRunInput {
  input?: unknown;
  workspace_id?: string | undefined;
  max_duration_ms?: number | undefined;
  max_tokens?: number | undefined;
}
