/** Waits (bounded) until a run's journal holds its run_finished record, through the runs module's event bus. */
import type { Runs } from '../../../cell/runs/api.ts';

export async function waitFinished(runs: Runs, runId: string, timeoutMs = 30_000): Promise<void> {
  let done!: () => void;
  const finished = new Promise<void>((resolve) => {
    done = resolve;
  });
  // The backlog (a run that finished already) is delivered before subscribe resolves.
  const unsub = await runs.subscribe(runId, 0, (r) => {
    if (r.kind === 'run_finished') done();
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      finished,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`run ${runId} did not finish in ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
    unsub();
  }
}
