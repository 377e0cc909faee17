/**
 * The syntax of a run id, declared once for every host: `run_` + 20
 * lower-case hex digits (80 bits). The cell draws its runs' ids at random
 * (cell/runs/runs.ts `newRunId`), a device derives its own from its id and a
 * nonce (bundles/run-id.ts), and both share one id space: the cell's run
 * routes check path parameters against it (cell/runs/api.ts `runIdPath`),
 * the edge its runs directory (edge/runs.ts), the console a search box.
 */

/** A run id, whole: `run_` + 20 lower-case hex digits. */
export const RUN_ID_PATTERN = /^run_[0-9a-f]{20}$/;
