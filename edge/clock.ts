/**
 * The edge's clock. Production: the system clock. Test mode only (env
 * `AGENT_CELL_EDGE_TEST_CLOCK=1`) honours `--now-offset-ms N`, which shifts
 * every reading by N ms, so end-to-end tests can step past grace windows and
 * expiry without waiting; without the env flag the option is refused.
 */
export interface EdgeClock {
  now(): number;
}

export const TEST_CLOCK_ENV = 'AGENT_CELL_EDGE_TEST_CLOCK';

export function edgeClock(offsetMs: string | undefined): EdgeClock {
  if (offsetMs === undefined) return { now: () => Date.now() };
  if (process.env[TEST_CLOCK_ENV] !== '1') {
    throw new Error(`--now-offset-ms is a test-only option: set ${TEST_CLOCK_ENV}=1 to use it`);
  }
  const off = Number(offsetMs);
  if (!Number.isSafeInteger(off)) throw new Error('--now-offset-ms must be an integer');
  return { now: () => Date.now() + off };
}
