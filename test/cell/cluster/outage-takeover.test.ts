/**
 * A store outage is nobody's death. PostgreSQL is stopped for two leases
 * while each of two cells has a model call in flight; when it comes back,
 * cell-a beats first (cell-b is paused for half a lease more, so the order is
 * certain) and must not judge cell-b dead for the beats nobody could write,
 * take over its run and ask the model a second time. Each run completes under
 * its own cell: no `taken_over` record, no re-issued call, three model calls
 * a run. Needs `node scripts/build.mjs`; runs in the
 * PostgreSQL pass of `make test` (CELL_TEST_STORE=postgres).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startOpenAIServer, type FakeOpenAI } from '../../fixtures/openai-server.ts';
import { startCellProcess, type CellProcess } from '../../helpers/cell-process.ts';
import { call } from '../../helpers/group.ts';
import { TEST_ENGINE } from '../../helpers/inproc.ts';
import { pgDatabase, pgUnavailable, startPgServer, type PgDatabase, type PgServer } from '../../helpers/postgres.ts';
import { httpApi, provider, team, T } from '../../helpers/teams.ts';
import { until } from '../../helpers/until.ts';
import { crewRunEnded, verifiedJournal } from '../../e2e/_runs.ts';

const SKIP = TEST_ENGINE !== 'postgres' ? 'needs PostgreSQL (CELL_TEST_STORE=postgres)' : (pgUnavailable() ?? false);
const HEARTBEAT_MS = 300;
const LEASE_MS = 3000;
const OUTAGE_MS = 2 * LEASE_MS;
/** How long cell-b stays paused after the store is back: within its lease, so it is not dead. */
const LATE_MS = LEASE_MS / 2;

let server: PgServer;
let db: PgDatabase;
let ai: FakeOpenAI;
const cells: CellProcess[] = [];
let keyDir = '';

before(async () => {
  if (SKIP) return;
  server = await startPgServer();
  db = await pgDatabase(server.url);
  // The first call of each run is answered during the outage: its answer waits in the cell for the store.
  ai = await startOpenAIServer({
    apiKey: 'sk-fake',
    respond: (_req, i) => ({ content: 'ok', delayMs: i < 2 ? 2_000 : 20, usage: { prompt_tokens: 3, completion_tokens: 2 } }),
  });
  keyDir = mkdtempSync(join(tmpdir(), 'group-key-'));
  writeFileSync(join(keyDir, 'secrets.key'), randomBytes(32), { mode: 0o600 });
  const args = (id: string) => [
    '--store',
    db.url,
    '--cell-id',
    id,
    '--secrets-key-file',
    join(keyDir, 'secrets.key'),
    '--posture',
    'multi-cell',
    '--heartbeat-ms',
    String(HEARTBEAT_MS),
    '--lease-ms',
    String(LEASE_MS),
  ];
  cells.push(await startCellProcess({ args: args('cell-a') }));
  cells.push(await startCellProcess({ args: args('cell-b') }));
});

after(async () => {
  if (SKIP) return;
  for (const c of cells) {
    await c.kill('SIGKILL');
    c.cleanup();
  }
  await ai?.close();
  await db?.drop().catch(() => undefined);
  await server?.stop();
  if (keyDir) rmSync(keyDir, { recursive: true, force: true });
});

test('PostgreSQL away for two leases with calls in flight: no peer takes a run over, no call is asked twice', {
  skip: SKIP,
  timeout: 120_000,
}, async () => {
  const token = cells[0]!.adminKey;
  const api = httpApi(cells[0]!.url, token);
  await provider(api, ai);
  const tm = await team(api, 'sequential', [{ role: 'p1' }, { role: 'p2' }, { role: 'p3' }]);
  const runs: { runId: string; cell: string }[] = [];
  for (const [i, c] of cells.entries()) {
    const r = await call(c.url, 'POST', `${T}/crews/${tm.crew}/runs`, { token, body: { input: `go ${i}` } });
    assert.equal(r.status, 201, r.text);
    runs.push({ runId: r.body.run_id, cell: i === 0 ? 'cell-a' : 'cell-b' });
  }
  // Both first calls have left (their reservations, the calls' intents, are committed): the outage lands while they are in flight.
  await until('both first calls to be in flight', async () => ai.requests.length >= 2, 30_000);
  await server.stopImmediate();
  cells[1]!.proc.kill('SIGSTOP');
  try {
    await new Promise((r) => setTimeout(r, OUTAGE_MS));
    await server.startAgain();
    await new Promise((r) => setTimeout(r, LATE_MS));
  } finally {
    cells[1]!.proc.kill('SIGCONT');
  }

  for (const { runId, cell } of runs) {
    const r = await crewRunEnded(httpApi(cells[1]!.url, token), tm.crew, runId);
    assert.equal(r.state, 'completed', `${runId}: ${JSON.stringify({ error: r.error, flags: r.flags })}`);
    assert.equal(r.flags?.reissued, undefined, `${runId}: no call re-issued`);
    const { records, verdict } = await verifiedJournal(api, cells[1]!.url, runId);
    assert.deepEqual(verdict, { ok: true }, `${runId}: its journal verifies`);
    const taken = records.filter((x) => x.kind === 'taken_over');
    assert.deepEqual(
      taken.map((x) => x.data),
      [],
      `${runId} (started on ${cell}) was not taken over`,
    );
    assert.equal(records.filter((x) => (x.data as { reissued?: unknown } | null)?.reissued === true).length, 0);
  }
  assert.equal(ai.requests.length, 3 * runs.length, 'three model calls a run, none asked twice');
});
