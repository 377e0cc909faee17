/**
 * A run taken over by a peer continues its trace (issue 25): two cells of a
 * group on one PostgreSQL database export to one OTLP receiver; the cell
 * driving a crew run is SIGKILLed during a model call, the peer takes the run
 * over after the lease and completes it, and the peer's drive is a span of the
 * trace the run was started in, child of the first drive's run span (kept in
 * the run's signed journal), with its step and chat spans. Needs
 * `node scripts/build.mjs` and a PostgreSQL server (CELL_TEST_PG_URL: `make
 * test` and scripts/pg-test-server.sh give one).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startOpenAIServer, type FakeOpenAI } from '../fixtures/openai-server.ts';
import { startOtlpReceiver, type OtlpReceiver } from '../fixtures/otlp-receiver.ts';
import { startCellProcess, type CellProcess } from '../helpers/cell-process.ts';
import { pgDatabase, type PgDatabase } from '../helpers/postgres.ts';
import { ok, provider, roleOf, T, team } from '../helpers/teams.ts';
import { httpApi, until, verifiedJournal } from './_runs.ts';

const GROUP_ARGS = ['--posture', 'multi-cell', '--heartbeat-ms', '100', '--lease-ms', '600'];
const TRACE_ID = '5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e';

let db: PgDatabase;
let ai: FakeOpenAI;
let receiver: OtlpReceiver;
const cells: CellProcess[] = [];
let hang = true;

before(async () => {
  db = await pgDatabase();
  receiver = await startOtlpReceiver();
  ai = await startOpenAIServer({
    apiKey: 'sk-fake',
    respond: (req) => {
      const role = roleOf(req);
      return role === 'second' && hang ? { content: 'too late', delayMs: 60_000 } : { content: `${role} done` };
    },
  });
});
after(async () => {
  for (const c of cells) {
    await c.kill('SIGKILL').catch(() => undefined);
    c.cleanup();
  }
  await ai?.close();
  await receiver?.close();
  await db?.drop();
});

test('SIGKILL the driving cell: the peer that takes the run over continues its trace', { timeout: 120_000 }, async () => {
  const env = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '100' };
  const a = await startCellProcess({ args: ['--store', db.url, '--cell-id', 'cell-ta', ...GROUP_ARGS], env });
  cells.push(a);
  const b = await startCellProcess({ args: ['--store', db.url, '--cell-id', 'cell-tb', ...GROUP_ARGS], env });
  cells.push(b);
  const api = httpApi(a.url, a.adminKey);
  await provider(api, ai);
  const tm = await team(api, 'sequential', [{ role: 'first' }, { role: 'second' }]);
  const res = await fetch(`${a.url}${T}/crews/${tm.crew}/runs`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${a.adminKey}`,
      'content-type': 'application/json',
      traceparent: `00-${TRACE_ID}-00f067aa0ba902b7-01`,
    },
    body: JSON.stringify({ input: 'task' }),
  });
  assert.equal(res.status, 201, await res.clone().text());
  const runId = ((await res.json()) as { run_id: string }).run_id;
  await until('the second model call', async () => (ai.requests.some((r) => roleOf(r.body) === 'second') ? true : undefined));
  await until('the request span', async () => (receiver.spans.some((s) => s.traceId === TRACE_ID && s.kind === 2) ? true : undefined));
  await a.kill('SIGKILL');
  hang = false;

  const apiB = httpApi(b.url, a.adminKey);
  const done = await until('the peer to finish the run', async () => {
    const s = await ok(apiB, 'GET', `${T}/crews/${tm.crew}/runs/${runId}`);
    return ['completed', 'failed', 'refused', 'cancelled'].includes(s.state) ? s : undefined;
  });
  assert.equal(done.state, 'completed', JSON.stringify(done.error));
  const resumed = await until('the peer drive span', async () =>
    receiver.spans.find((s) => s.name === `invoke_agent ${tm.crewName}` && s.attributes['agent_cell.cell.id'] === 'cell-tb'),
  );
  assert.equal(resumed.attributes['agent_cell.run.takeover'], true);
  assert.equal(resumed.traceId, TRACE_ID);
  assert.equal(resumed.resource['service.instance.id'], 'cell-tb');
  const { records } = await verifiedJournal(apiB, b.url, runId);
  const stored = String(records.find((r) => r.kind === 'run_started')!.data?.['traceparent']);
  assert.equal(resumed.parentSpanId, stored.split('-')[2], "child of the first drive's run span");
  const chat = await until('the peer chat span', async () =>
    receiver.spans.find((s) => s.traceId === TRACE_ID && s.name.startsWith('chat ') && s.resource['service.instance.id'] === 'cell-tb'),
  );
  const step = receiver.spans.find((s) => s.spanId === chat.parentSpanId);
  assert.equal(step?.parentSpanId, resumed.spanId);
  await b.stop();
});
