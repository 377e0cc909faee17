/**
 * Automatic takeover and fencing with real processes: three cells
 * (`node dist/cell.mjs serve --posture multi-cell`) on one PostgreSQL 15
 * database, a fake OpenAI server (a real HTTP server) as the model, short
 * leases (--heartbeat-ms 100 --lease-ms 600).
 *
 * - SIGKILL the coordinator during a model call: a peer completes the run
 *   within lease + heartbeat (plus generous slack for a shared machine); the
 *   journal verifies against any cell's /.well-known/cell-keys.json; model
 *   calls made = steps + the flagged re-issue (flags.reissued, on the run and
 *   the step record).
 * - SIGSTOP the coordinator past its lease, let a peer take over, SIGCONT it:
 *   its late write is refused (it logs the lost lease), the journal has no
 *   duplicate seq and verifies, and the outcome is the peer's.
 *
 * Needs `node scripts/build.mjs` and PostgreSQL (CELL_TEST_STORE=postgres,
 * e.g. under `make with-pg`); skipped otherwise.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { verifyJournal } from '../../../core/journal/verify.ts';
import type { JournalRecord } from '../../../core/journal/record.ts';
import { startOpenAIServer, type ChatRequestBody, type FakeOpenAI } from '../../fixtures/openai-server.ts';
import { startCellProcess, type CellProcess } from '../../helpers/cell-process.ts';
import { TEST_ENGINE } from '../../helpers/inproc.ts';
import { pgDatabase, type PgDatabase } from '../../helpers/postgres.ts';
import { ok, provider, roleOf, team, T, type Api } from '../../helpers/teams.ts';

const SKIP = TEST_ENGINE !== 'postgres' ? 'needs PostgreSQL (CELL_TEST_STORE=postgres)' : false;
// Short by default so the tests run fast; TAKEOVER_HEARTBEAT_MS=500 TAKEOVER_LEASE_MS=2000 measures the defaults.
const HEARTBEAT_MS = Number(process.env['TAKEOVER_HEARTBEAT_MS'] ?? 100);
const LEASE_MS = Number(process.env['TAKEOVER_LEASE_MS'] ?? 600);
const GROUP_ARGS = ['--posture', 'multi-cell', '--heartbeat-ms', String(HEARTBEAT_MS), '--lease-ms', String(LEASE_MS)];

function httpApi(url: string, token: string): Api {
  return {
    token,
    async request(method, path, opts = {}) {
      const res = await fetch(url + path, {
        method,
        headers: {
          ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
          ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
      });
      const text = await res.text();
      let body: unknown;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        body = undefined;
      }
      return { status: res.status, body, text };
    },
  };
}

/** A promise with its resolve function. */
function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

async function until<T>(what: string, fn: () => Promise<T | undefined | null | false>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

interface Group {
  db: PgDatabase;
  ai: FakeOpenAI;
  cells: CellProcess[];
  api: Api;
  /** Per-test hook the fake model calls on each request (roles: w1, w2, w3). */
  hook: (req: ChatRequestBody, role: string) => Promise<void>;
}

let g: Group | null = null;
/** Model answers held back on purpose; released before the fake server closes. */
const held = deferred();

function within<T>(what: string, p: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
    }),
  ]);
}

before(async () => {
  if (SKIP) return;
  const db = await pgDatabase();
  const state = { hook: async (_req: ChatRequestBody, _role: string) => {} };
  const ai = await startOpenAIServer({
    apiKey: 'sk-fake',
    respond: async (req) => {
      const role = roleOf(req);
      await state.hook(req, role);
      return { content: `answer of ${role}`, usage: { prompt_tokens: 10, completion_tokens: 5 } };
    },
  });
  const a = await startCellProcess({ args: ['--store', db.url, '--cell-id', 'cell-a', ...GROUP_ARGS] });
  const api = httpApi(a.url, a.adminKey);
  await provider(api, ai);
  // The members share one secrets key (docs/multi-cell.md): startCellProcess gives every cell on a
  // store the test process's group key file.
  const cells = [a];
  for (const id of ['cell-b', 'cell-c']) {
    cells.push(await startCellProcess({ args: ['--store', db.url, '--cell-id', id, ...GROUP_ARGS] }));
  }
  g = {
    db,
    ai,
    cells,
    api,
    get hook() {
      return state.hook;
    },
    set hook(h) {
      state.hook = h;
    },
  };
});

after(async () => {
  if (!g) return;
  for (const c of g.cells) {
    try {
      if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill('SIGCONT');
    } catch {
      // already gone
    }
    await c.kill('SIGKILL');
    c.cleanup();
  }
  held.resolve();
  await g.ai.close();
  await g.db.drop();
});

/** Starts a three-step sequential crew run on `cell`; returns ids. */
async function launch(cell: CellProcess, name: string): Promise<{ crew: string; runId: string }> {
  const api = httpApi(cell.url, g!.api.token);
  const tm = await team(api, 'sequential', [{ role: `${name}1` }, { role: `${name}2` }, { role: `${name}3` }]);
  const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' });
  return { crew: tm.crew, runId: run.run_id };
}

async function runOn(cell: CellProcess, crew: string, runId: string): Promise<any> {
  const r = await httpApi(cell.url, g!.api.token).request('GET', `${T}/crews/${crew}/runs/${runId}`, { token: g!.api.token });
  assert.equal(r.status, 200, r.text);
  return r.body;
}

async function journalOn(cell: CellProcess, runId: string): Promise<JournalRecord[]> {
  const r = await httpApi(cell.url, g!.api.token).request('GET', `/api/public/v1/admin/jobs/runs/${runId}/journal`, {
    token: g!.api.token,
  });
  assert.equal(r.status, 200, r.text);
  return r.body.records;
}

/** Verifies a journal against the published keys of `cell` (every member's keys). */
async function verifyAgainst(cell: CellProcess, records: JournalRecord[]): Promise<void> {
  const doc = (await (await fetch(`${cell.url}/.well-known/cell-keys.json`)).json()) as { keys: { kid: string; jwk: JsonWebKey }[] };
  const keys = new Map(doc.keys.map((k) => [k.kid, k.jwk]));
  assert.deepEqual(await verifyJournal(records, (kid) => keys.get(kid)), { ok: true });
}

const calls = (prefix: string) => g!.ai.requests.filter((r) => roleOf(r.body).startsWith(prefix)).length;

test('SIGKILL of the coordinator during a model call: a peer completes the run, nothing runs twice but the flagged call', {
  skip: SKIP,
}, async () => {
  const [a, b, c] = g!.cells as [CellProcess, CellProcess, CellProcess];
  const inFlight = deferred();
  let first = true;
  g!.hook = async (_req, role) => {
    if (role === 'k2' && first) {
      first = false;
      inFlight.resolve();
      await held.promise; // no answer: the coordinator dies waiting for it
    }
  };
  const { crew, runId } = await launch(a, 'k');
  await inFlight.promise;
  await a.kill('SIGKILL');
  const killedAt = Date.now();
  const done = await until(
    'the run to complete on a peer',
    async () => {
      const r = await runOn(b, crew, runId);
      return r.state === 'completed' ? r : null;
    },
    LEASE_MS + HEARTBEAT_MS + 15_000,
  );
  const tookMs = Date.now() - killedAt;
  const records = await journalOn(c, runId);
  await verifyAgainst(c, records);
  const takeover = records.find((r) => r.kind === 'taken_over');
  assert.ok(takeover, 'the takeover is on the journal');
  assert.ok(takeover.v === 2 && ['cell-b', 'cell-c'].includes(takeover.cell_id), 'by a peer');
  assert.equal((takeover.data as { previous_owner: string }).previous_owner, 'cell-a');
  assert.ok(takeover.at - killedAt < LEASE_MS + HEARTBEAT_MS + 5_000, `taken over ${takeover.at - killedAt} ms after the kill`);
  // Writers: cell-a under epoch 1 (the run was recorded claimed, its request with it), then the
  // peer under epoch 2; seqs contiguous, no duplicate.
  assert.deepEqual(
    records.map((r) => r.seq),
    records.map((_, i) => i + 1),
  );
  const writers = [...new Set(records.map((r) => (r.v === 2 ? `${r.cell_id}@${r.epoch}` : 'v1')))];
  assert.deepEqual(writers, ['cell-a@1', `${takeover.v === 2 ? takeover.cell_id : ''}@2`]);
  // Model calls: three steps, plus the one in flight re-issued once.
  assert.equal(calls('k'), 4, 'k1 once, k2 twice (the re-issue), k3 once');
  const k2Steps = records.filter((r) => r.kind === 'step' && r.data?.['reissued'] === true);
  assert.equal(k2Steps.length, 1, 'the re-issued call is flagged on its step record');
  // A model call's intent is its budget reservation (no intent record): the re-issue is attempt 2.
  assert.ok(!records.some((r) => r.kind === 'intent'), 'no intent record before a model call');
  assert.equal(k2Steps[0]!.data?.['attempt'], 2);
  const flagged = done.flags.reissued as { step_id: string; cost_tokens: number; attempt: number }[];
  assert.equal(flagged.length, 1);
  assert.equal(flagged[0]!.step_id, k2Steps[0]!.step_id);
  assert.equal(flagged[0]!.cost_tokens, 15, 'the re-issue cost what the call used');
  assert.equal(flagged[0]!.attempt, 2);
  console.log(`# takeover after SIGKILL: run completed ${tookMs} ms after the kill (lease ${LEASE_MS} ms, heartbeat ${HEARTBEAT_MS} ms)`);
});

test('SIGSTOP past the lease, then SIGCONT: the late writer is fenced off and the outcome is the peer’s', { skip: SKIP }, async () => {
  const cells = g!.cells.filter((c) => c.proc.exitCode === null && c.proc.signalCode === null);
  assert.equal(cells.length, 2, 'cell-b and cell-c are left');
  const [coord, peer] = cells as [CellProcess, CellProcess];
  const coordId = coord === g!.cells[1] ? 'cell-b' : 'cell-c';
  const firstS2 = deferred();
  const releaseFirstS2 = deferred();
  const s3Asked = deferred();
  const releaseS3 = deferred();
  let s2 = 0;
  g!.hook = async (_req, role) => {
    if (role === 's2' && s2++ === 0) {
      firstS2.resolve();
      await releaseFirstS2.promise; // the paused coordinator's call, answered after it wakes
    }
    if (role === 's3') {
      s3Asked.resolve();
      await releaseS3.promise; // holds the peer inside the run until the old coordinator has tried to write
    }
  };
  const { crew, runId } = await launch(coord, 's');
  await firstS2.promise;
  coord.proc.kill('SIGSTOP');
  try {
    // The peer takes over (re-issuing s2, which answers at once) and asks for s3.
    await within('the peer to reach s3', s3Asked.promise, 20_000);
  } finally {
    coord.proc.kill('SIGCONT');
  }
  releaseFirstS2.resolve();
  await until('the woken cell to learn it lost the lease', async () => /run lease lost/.test(coord.output()) || null, 15_000);
  releaseS3.resolve();
  const done = await until(
    'the run to complete',
    async () => {
      const r = await runOn(coord, crew, runId);
      return r.state === 'completed' ? r : null;
    },
    15_000,
  );
  const records = await journalOn(peer, runId);
  await verifyAgainst(coord, records);
  const seqs = records.map((r) => r.seq);
  assert.equal(new Set(seqs).size, seqs.length, 'no duplicate seq');
  const takeover = records.find((r) => r.kind === 'taken_over');
  assert.ok(takeover && takeover.v === 2 && takeover.cell_id !== coordId);
  const after = records.slice(records.indexOf(takeover));
  assert.ok(
    after.every((r) => r.v === 2 && r.cell_id !== coordId),
    'nothing written by the paused cell after the takeover',
  );
  const last = records.at(-1)!;
  assert.equal(last.kind, 'run_finished');
  assert.ok(last.v === 2 && last.cell_id !== coordId, "the outcome is the peer's");
  assert.equal(done.state, 'completed');
  assert.equal(calls('s2'), 2, 'the paused call and its one re-issue');
});

/** Follows a run's SSE stream on `cell` from `lastId`; calls `onEvent` per event until the stream ends or `signal` aborts. */
async function follow(
  cell: CellProcess,
  runId: string,
  lastId: number,
  onEvent: (id: number, kind: string) => void,
  signal: AbortSignal,
): Promise<void> {
  const res = await fetch(`${cell.url}/api/public/v1/admin/jobs/runs/${runId}/events/sse`, {
    headers: { authorization: `Bearer ${g!.api.token}`, 'last-event-id': String(lastId) },
    signal,
  });
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let buf = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += dec.decode(value, { stream: true });
      for (let i = buf.indexOf('\n\n'); i >= 0; i = buf.indexOf('\n\n')) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const id = /^id: ?(\d+)$/m.exec(block)?.[1];
        const kind = /^event: ?(\S+)$/m.exec(block)?.[1];
        if (id !== undefined && kind !== undefined) onEvent(Number(id), kind);
      }
    }
  } catch (e) {
    if (!signal.aborted) throw e;
  }
}

test('SSE across cells: follow on one cell, the coordinator dies, resume on a third with Last-Event-ID: no gap, no duplicate', {
  skip: SKIP,
}, async () => {
  // A coordinator again: cell-a restarts on its data directory.
  const old = g!.cells[0]!;
  const a = await startCellProcess({ dataDir: old.dataDir, args: ['--store', g!.db.url, '--cell-id', 'cell-a', ...GROUP_ARGS] });
  g!.cells.push(a);
  const [, b, c] = g!.cells as [CellProcess, CellProcess, CellProcess];
  const inFlight = deferred();
  let first = true;
  g!.hook = async (_req, role) => {
    if (role === 'e2' && first) {
      first = false;
      inFlight.resolve();
      await held.promise;
    }
  };
  const { runId } = await launch(a, 'e');
  const seen: Array<[number, string]> = [];
  const onB = new AbortController();
  const sawSteps = deferred();
  const followingB = follow(
    b,
    runId,
    0,
    (id, kind) => {
      seen.push([id, kind]);
      // e1's two step records, written with e2's reservation before e2's call left.
      if (kind === 'step' && seen.filter(([, k]) => k === 'step').length === 2) sawSteps.resolve();
    },
    onB.signal,
  );
  await inFlight.promise;
  // Records written by cell-a reach the client on cell-b.
  await within('cell-b to stream cell-a’s records', sawSteps.promise, 15_000);
  await a.kill('SIGKILL');
  onB.abort();
  await followingB;
  const last = seen.at(-1)![0];
  await within(
    'the rest of the stream on cell-c',
    follow(c, runId, last, (id, kind) => seen.push([id, kind]), new AbortController().signal),
    LEASE_MS + HEARTBEAT_MS + 20_000,
  );
  const ids = seen.map(([id]) => id);
  assert.deepEqual(
    ids,
    ids.map((_, i) => i + 1),
    'every seq once, in order',
  );
  assert.equal(seen.at(-1)![1], 'run_finished');
  const records = await journalOn(b, runId);
  assert.deepEqual(
    seen,
    records.map((r) => [r.seq, r.kind]),
    'the stream is the journal',
  );
});
