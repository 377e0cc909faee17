/**
 * Exactly-once effects across a crash, with real processes: the real cell (dist/cell.mjs) runs `single`
 * jobs whose http.request writes reach a real HTTP service that counts its effects the way a service
 * honouring Idempotency-Key does (one effect per key) and holds its answers, so the cell is SIGKILLed
 * between the dispatch of each write and its result. After the restart (same cell, same data; or, on
 * PostgreSQL, a peer of the group taking the run over):
 * - a PUT (an idempotent method, so http.request declares the call idempotent) is issued again with the
 *   same Idempotency-Key: the service sees the key twice and counts one effect, and the run completes;
 * - a POST (not idempotent) is not issued again: the run waits `outcome_unknown`, its view and journal
 *   naming the effect key the service saw; an operator's `retry` sends the same key (one effect),
 *   `record` completes the run with the given result (nothing sent), `fail` fails it.
 * The journal proves the crash path: the wait is decided after the restarted cell took the run back. A run
 * waiting on an operator stays so, untouched, across another crash and restart.
 * Needs `node scripts/build.mjs` first.
 */
import assert from 'node:assert/strict';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { startCellProcess, type CellProcess } from '../helpers/cell-process.ts';
import { startGroup, type Group } from '../helpers/group.ts';
import { pgUnavailable } from '../helpers/postgres.ts';
import { TEST_ENGINE } from '../helpers/inproc.ts';
import {
  assertLostInTheCrash,
  httpApi,
  jobRunEnded,
  resolveOutcome as resolve,
  runView as view,
  until,
  verifiedJournal,
  waitingOnOutcome as waitingOn,
} from './_runs.ts';
import { ok, type Api } from '../helpers/teams.ts';

const RUNS = '/api/public/v1/admin/jobs/runs';

/** A service that applies each write once per Idempotency-Key, and holds its answers while `holding`. */
async function effectService() {
  const requests: { method: string; path: string; key: string | undefined }[] = [];
  /** The effects applied: one per distinct key (a request without a key is an effect of its own). */
  const effects = new Map<string, { method: string; path: string }>();
  const held: ServerResponse[] = [];
  let holding = true;
  let anonymous = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const key = req.headers['idempotency-key'] as string | undefined;
      requests.push({ method: req.method!, path: req.url!, key });
      const k = key ?? `anonymous-${++anonymous}`;
      if (!effects.has(k)) effects.set(k, { method: req.method!, path: req.url! });
      if (holding) {
        held.push(res);
        return;
      }
      res.writeHead(req.method === 'POST' ? 201 : 200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ applied: req.url }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    effects,
    /** How many requests reached `path`, and with which keys. */
    keysOf: (path: string) => requests.filter((r) => r.path === path).map((r) => r.key),
    release() {
      holding = false;
    },
    close() {
      server.close();
      server.closeAllConnections();
    },
  };
}
type Service = Awaited<ReturnType<typeof effectService>>;

const write = (svc: Service, method: string, path: string) => ({
  job_type: 'single',
  workspace_id: 'w1',
  spec: {
    tool: 'http.request',
    args: { method, url: `${svc.origin}${path}`, body: { path } },
    authority: { egress_allowlist: [`POST,PUT:${svc.origin}`] },
  },
});

/** Submits the writes and waits until the service holds every one of them (dispatched, not answered). */
async function dispatched(api: Api, svc: Service, writes: [string, string][]): Promise<Record<string, string>> {
  const ids: Record<string, string> = {};
  for (const [method, path] of writes) ids[path] = (await ok(api, 'POST', RUNS, write(svc, method, path))).run_id as string;
  await until(
    'every write to reach the service',
    async () => (writes.every(([, p]) => svc.keysOf(p).length === 1) ? true : undefined),
    10_000,
  );
  return ids;
}

describe('SIGKILL between dispatch and result of a write; the same cell restarted', { timeout: 180_000 }, () => {
  let svc: Service;
  const procs: CellProcess[] = [];
  before(async () => {
    svc = await effectService();
  });
  after(async () => {
    for (const p of procs) await p.kill().catch(() => undefined);
    procs[0]?.cleanup();
    svc.close();
  });

  test('PUT is re-issued with its key (one effect); POST waits outcome_unknown and is retried, recorded or failed by an operator', async () => {
    const args = ['--cell-id', 'cell-fx', '--egress-allow-private', '127.0.0.1/32'];
    const a = await startCellProcess({ args });
    procs.push(a);
    const apiA = httpApi(a.url, a.adminKey);
    const ids = await dispatched(apiA, svc, [
      ['PUT', '/accounts/1'],
      ['POST', '/refunds/retry'],
      ['POST', '/refunds/record'],
      ['POST', '/refunds/fail'],
    ]);
    await a.kill('SIGKILL');
    svc.release();

    const b = await startCellProcess({ dataDir: a.dataDir, args });
    procs.push(b);
    let api = httpApi(b.url, a.adminKey);

    // (a) Declared idempotent: issued again with the same key; the service counts one effect.
    const put = await jobRunEnded(api, ids['/accounts/1']!);
    assert.equal(put.state, 'completed', JSON.stringify(put.error));
    const putKeys = svc.keysOf('/accounts/1');
    assert.equal(putKeys.length, 2, 'sent twice');
    assert.equal(putKeys[0], putKeys[1], 'with the same Idempotency-Key');
    assert.match(putKeys[0]!, /^"[0-9a-f-]{36}"$/);
    assert.equal([...svc.effects.values()].filter((e) => e.path === '/accounts/1').length, 1, 'one effect');
    assert.equal(put.flags.reissued.length, 1);

    // (b) Not idempotent: not sent again; each run waits with the key the service saw.
    for (const path of ['/refunds/retry', '/refunds/record', '/refunds/fail']) {
      const v = await waitingOn(api, ids[path]!);
      const seen = svc.keysOf(path);
      assert.equal(seen.length, 1, `${path}: not issued blindly again`);
      assert.equal(`"${v.unknown_outcome.effect_key}"`, seen[0], `${path}: the view shows the key the service saw`);
      assert.equal(v.unknown_outcome.tool, 'http.request');
      assert.equal(v.unknown_outcome.attempt, 1);
      await assertLostInTheCrash(api, b.url, ids[path]!, v.unknown_outcome.effect_key);
    }
    const listed = await ok(api, 'GET', `${RUNS}?state=outcome_unknown`);
    assert.equal(listed.items.length, 3);

    // Waiting survives another crash: the cell restarted again leaves the runs as they are (no timer, nothing
    // re-driven, nothing sent), and resolves them.
    const waiting = ['/refunds/retry', '/refunds/record', '/refunds/fail'].map((p) => ids[p]!);
    const lengths = await Promise.all(waiting.map(async (id) => (await verifiedJournal(api, b.url, id)).records.length));
    await b.kill('SIGKILL');
    const c = await startCellProcess({ dataDir: a.dataDir, args });
    procs.push(c);
    api = httpApi(c.url, a.adminKey);
    for (const [i, id] of waiting.entries()) {
      assert.equal((await view(api, id)).state, 'outcome_unknown');
      assert.equal((await verifiedJournal(api, c.url, id)).records.length, lengths[i], 'nothing was written for it');
    }
    for (const path of ['/refunds/retry', '/refunds/record', '/refunds/fail']) assert.equal(svc.keysOf(path).length, 1);

    // retry: the same key again; the service applies it once.
    const retried = ids['/refunds/retry']!;
    await resolve(api, retried, 'tool/call', { resolution: 'retry' });
    const r1 = await jobRunEnded(api, retried);
    assert.equal(r1.state, 'completed', JSON.stringify(r1.error));
    assert.equal(r1.output.status, 201);
    const retryKeys = svc.keysOf('/refunds/retry');
    assert.equal(retryKeys.length, 2);
    assert.equal(retryKeys[0], retryKeys[1]);
    assert.equal([...svc.effects.values()].filter((e) => e.path === '/refunds/retry').length, 1);

    // record: completes with the operator's result; nothing is sent.
    const recorded = ids['/refunds/record']!;
    await resolve(api, recorded, 'tool/call', { resolution: 'record', result: { status: 201, body: 'found in the ledger' } });
    const r2 = await jobRunEnded(api, recorded);
    assert.equal(r2.state, 'completed');
    assert.deepEqual(r2.output, { status: 201, body: 'found in the ledger' });
    assert.equal(svc.keysOf('/refunds/record').length, 1);

    // fail: the run fails; nothing is sent.
    const failed = ids['/refunds/fail']!;
    await resolve(api, failed, 'tool/call', { resolution: 'fail' });
    const r3 = await jobRunEnded(api, failed);
    assert.equal(r3.state, 'failed');
    assert.equal(r3.error.reason, 'outcome_unknown');
    assert.equal(svc.keysOf('/refunds/fail').length, 1);
    for (const id of Object.values(ids)) assert.deepEqual((await verifiedJournal(api, c.url, id)).verdict, { ok: true });
    await c.stop();
  });
});

describe('SIGKILL mid-POST in a group: a peer takes the run over and waits with the same key', {
  skip: TEST_ENGINE !== 'postgres' ? 'PostgreSQL only (CELL_TEST_STORE=postgres)' : (pgUnavailable() ?? false),
  timeout: 180_000,
}, () => {
  let svc: Service;
  let g: Group;
  before(async () => {
    svc = await effectService();
    g = await startGroup(2, { args: () => ['--egress-allow-private', '127.0.0.1/32', '--heartbeat-ms', '200', '--lease-ms', '1500'] });
  });
  after(async () => {
    await g?.stop();
    svc?.close();
  });

  test('the peer shows the key the service saw; a retry from the peer sends it again; one effect', async () => {
    const [a, b] = g.cells as [CellProcess, CellProcess];
    const ids = await dispatched(httpApi(a.url, g.adminKey), svc, [['POST', '/payouts/1']]);
    const runId = ids['/payouts/1']!;
    await a.kill('SIGKILL');
    svc.release();
    const api = httpApi(b.url, g.adminKey);
    const v = await waitingOn(api, runId);
    const first = svc.keysOf('/payouts/1');
    assert.equal(first.length, 1, 'the peer did not send it again');
    assert.equal(`"${v.unknown_outcome.effect_key}"`, first[0]);
    await assertLostInTheCrash(api, b.url, runId, v.unknown_outcome.effect_key);
    const { records } = await verifiedJournal(api, b.url, runId);
    assert.ok(
      records.some((r) => r.kind === 'taken_over' && r.data?.['previous_owner'] !== r.data?.['cell_id']),
      'taken over by the peer',
    );
    await resolve(api, runId, 'tool/call', { resolution: 'retry' });
    const done = await jobRunEnded(api, runId);
    assert.equal(done.state, 'completed', JSON.stringify(done.error));
    const keys = svc.keysOf('/payouts/1');
    assert.equal(keys.length, 2);
    assert.equal(keys[0], keys[1], 'the same key from the other cell');
    assert.equal([...svc.effects.values()].filter((e) => e.path === '/payouts/1').length, 1);
  });
});
