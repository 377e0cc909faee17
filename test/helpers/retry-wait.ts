/**
 * The durable backoff tests' common start (test/cell/teams/retry-restart.test.ts on one cell,
 * test/cell/cluster/retry-takeover.test.ts across two): a provider that fails its first call,
 * and a one-billet crew run whose failed model call waits `backoffMs` to be retried.
 */
import { startOpenAIServer, type FakeOpenAI } from '../fixtures/openai-server.ts';
import { A, T, agent, ok, type Api } from './teams.ts';
import { until } from './until.ts';

/** A fake provider answering 503 once, then 'after the wait'; `callsAt` holds when each call came. */
export async function failOnceProvider(): Promise<{ ai: FakeOpenAI; callsAt: number[] }> {
  const callsAt: number[] = [];
  const ai = await startOpenAIServer({
    apiKey: 'sk-fake',
    respond: () => {
      callsAt.push(Date.now());
      return callsAt.length === 1 ? { status: 503 } : { content: 'after the wait' };
    },
  });
  return { ai, callsAt };
}

/**
 * Authors a formation named `name` with one billet retried once on provider errors after
 * `backoffMs`, and its crew; starts a run and waits until its first attempt failed and the run
 * waits to retry. Returns the crew and run ids and the failed attempt's journal record.
 */
export async function runWaitingToRetry(api: Api, name: string, backoffMs: number): Promise<{ crew: string; run: string; failed: any }> {
  const cap = { allowed_tools: [], permission_mode: 'auto', clearance_level: 0 };
  const f = await ok(api, 'POST', `${T}/formations`, { name });
  const b = await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
    role_label: 'patient',
    required_skills: [],
    authority_cap: cap,
    retry: { max_attempts: 2, backoff_ms: backoffMs, max_backoff_ms: backoffMs, on: ['provider_error'] },
  });
  const a = await agent(api, 'patient', cap);
  const crew = await ok(api, 'POST', `${T}/crews`, { formation_id: f.formation_id, assignments: { [b.billet_id]: a } });
  const run = await ok(api, 'POST', `${T}/crews/${crew.crew_id}/runs`, { input: 'go' });
  const failed = await until(
    'the failed attempt',
    async () => {
      const j = await ok(api, 'GET', `${A}/jobs/runs/${run.run_id}/journal`);
      return (j.records as any[]).find((r) => r.kind === 'attempt' && r.data.outcome === 'failed');
    },
    60_000,
  );
  await until(
    'the run to wait',
    async () => (await ok(api, 'GET', `${T}/crews/${crew.crew_id}/runs/${run.run_id}`)).state === 'waiting',
    60_000,
  );
  return { crew: crew.crew_id, run: run.run_id, failed };
}
