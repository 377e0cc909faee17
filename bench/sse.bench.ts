/**
 * Live tokens on the SSE path (issue 24), each against a floor measured in the
 * same run, in alternating rounds:
 *
 * 1. Fan-out: 500 subscribers on one run over real HTTP to an in-process cell
 *    (port 0); 40 journal records per round. Latency = arrival at a subscriber
 *    - the moment the record was published (an in-process subscriber,
 *    registered first, stamps it: the durable append is done by then). The
 *    floor: a minimal node:http SSE server in the same process writing the
 *    same frames (a record of the same size, `id:` seq) to 500 responses.
 *    Same client for both (node:http, frames split by `id:` lines). The cell
 *    is also timed from the call of appendJournal (seal, sign, fsync, publish).
 * 2. First delta: a crew run whose model streams from the fake OpenAI server
 *    (test/fixtures/openai-server.ts) with 50 subscribers on the run's SSE;
 *    latency = arrival of the first `delta` frame - the moment the fake server
 *    wrote its first token (released once every subscriber has its backlog).
 *
 * Clients, cell and floor share the process and the machine's 2 cores.
 */
import { rmSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg } from 'node:os';
import type { RunningCell } from '../cell/server.ts';
import { startOpenAIServer } from '../test/fixtures/openai-server.ts';
import { T, ok, provider, team, type Api } from '../test/helpers/teams.ts';
import { bootInProcessCell } from './_inproc.ts';
import { fmt, pct } from './_util.ts';

const SUBS = 500;
const EVENTS = 40;
const ROUNDS = 3;
const FIRST_SUBS = 50;
const FIRST_RUNS = 12;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const boot = () => bootInProcessCell('bench-sse', { port: 0, rate: { capacity: 100_000, refillPerSecond: 100_000 } });

/** One SSE client: calls `onFrame(id, event, now)` for each frame with an id or an event, as it arrives. */
function client(
  url: string,
  headers: Record<string, string>,
  onFrame: (id: number | null, event: string, now: number) => void,
): Promise<{ close(): void }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { headers: { accept: 'text/event-stream', ...headers }, agent: false }, (res: IncomingMessage) => {
      if (res.statusCode !== 200) return reject(new Error(`SSE ${res.statusCode}`));
      let buf = '';
      let opened = false;
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        const now = performance.now();
        buf += chunk;
        let end = buf.indexOf('\n\n');
        while (end >= 0) {
          const frame = buf.slice(0, end);
          buf = buf.slice(end + 2);
          end = buf.indexOf('\n\n');
          if (!opened) {
            opened = true;
            resolve({ close: () => req.destroy() });
          }
          let id: number | null = null;
          let event = 'message';
          const i = frame.lastIndexOf('\nid: ');
          if (i >= 0) id = Number(frame.slice(i + 5));
          if (frame.startsWith('event: ')) event = frame.slice(7, frame.indexOf('\n'));
          onFrame(id, event, now);
        }
      });
    });
    req.on('error', (e) => reject(e));
    req.end();
  });
}

/** The floor: a minimal node:http SSE server; `publish` writes one frame to every open response. */
async function floorServer(): Promise<{ url: string; publish(frame: string): void; count(): number; close(): Promise<void> }> {
  const open = new Set<ServerResponse>();
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write('retry: 1000\n\n');
    open.add(res);
    res.on('close', () => open.delete(res));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    publish(frame) {
      for (const res of open) res.write(frame);
    },
    count: () => open.size,
    close: () =>
      new Promise<void>((r) => {
        for (const res of open) res.destroy();
        server.close(() => r());
      }),
  };
}

interface Round {
  lat: number[];
  fromAppend: number[];
  delivered: number;
}

async function cellRound(c: RunningCell, key: string): Promise<Round> {
  const runs = c.modules.runs.runs;
  const runId = await c.core.store.write((tx) =>
    runs.createRunTx(tx, { kind: 'job', job_type: 'compute', requester: 'bench', spec: {}, state: 'running', at: c.core.clock.now() }),
  );
  const published = new Map<number, number>();
  const called = new Map<number, number>();
  // Registered first, so it is called first when a record is published: the publish time.
  const unsub = await runs.subscribe(runId, 0, (rec) => {
    published.set(rec.seq, performance.now());
  });
  const lat: number[] = [];
  const fromAppend: number[] = [];
  let delivered = 0;
  const clients = await Promise.all(
    Array.from({ length: SUBS }, () =>
      client(`${c.url}/api/public/v1/admin/jobs/runs/${runId}/events/sse`, { authorization: `Bearer ${key}` }, (id, event, now) => {
        if (event !== 'step' || id === null) return;
        delivered++;
        lat.push(now - published.get(id)!);
        fromAppend.push(now - called.get(id)!);
      }),
    ),
  );
  for (let i = 0; i < EVENTS; i++) {
    const t0 = performance.now();
    const n = i + 1;
    called.set(n, t0);
    await runs.appendJournal(runId, { step_id: `s${i}`, kind: 'step', data: { i } });
    await sleep(20);
  }
  const until = Date.now() + 10_000;
  while (delivered < SUBS * EVENTS && Date.now() < until) await sleep(20);
  await runs.finishRun(runId, 'completed');
  unsub();
  for (const cl of clients) cl.close();
  await sleep(100);
  return { lat, fromAppend, delivered };
}

async function floorRound(frameSize: number): Promise<Round> {
  const f = await floorServer();
  const lat: number[] = [];
  let delivered = 0;
  const published = new Map<number, number>();
  const clients = await Promise.all(
    Array.from({ length: SUBS }, () =>
      client(f.url, {}, (id, event, now) => {
        if (event !== 'step' || id === null) return;
        delivered++;
        lat.push(now - published.get(id)!);
      }),
    ),
  );
  const pad = 'x'.repeat(Math.max(0, frameSize - 60));
  for (let i = 0; i < EVENTS; i++) {
    const n = i + 1;
    const frame = `event: step\ndata: ${JSON.stringify({ seq: n, pad })}\nid: ${n}\n\n`;
    published.set(n, performance.now());
    f.publish(frame);
    await sleep(20);
  }
  const until = Date.now() + 10_000;
  while (delivered < SUBS * EVENTS && Date.now() < until) await sleep(20);
  for (const cl of clients) cl.close();
  await f.close();
  return { lat, fromAppend: [], delivered };
}

/** A crew run whose model streams, 50 subscribers: first delta at each - the fake server's first token. */
async function firstDelta(c: RunningCell, key: string): Promise<{ lat: number[]; floor: number[] }> {
  const ai = await startOpenAIServer({ apiKey: 'sk-bench' });
  const api: Api = {
    token: key,
    async request(method, path, opts = {}) {
      const res = await fetch(c.url + path, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}) },
        ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : undefined, text };
    },
  };
  const lat: number[] = [];
  const floor: number[] = [];
  try {
    await provider(api, ai, 'sk-bench', true);
    const tm = await team(api, 'sequential', [{ role: 'writer', ledger: 100_000_000 }]);
    for (let r = 0; r < FIRST_RUNS; r++) {
      let go!: () => void;
      const ready = new Promise<void>((res) => {
        go = res;
      });
      let firstToken = 0;
      ai.setResponder(() => ({
        content: 'one two three',
        pieces: ['one', ' two', ' three'],
        beforePiece: async (i) => {
          if (i !== 0) return;
          await ready;
          firstToken = performance.now();
        },
      }));
      const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: `go ${r}` });
      const seen = new Set<number>();
      const caughtUp = new Set<number>();
      const clients = await Promise.all(
        Array.from({ length: FIRST_SUBS }, (_, k) =>
          client(
            `${c.url}/api/public/v1/admin/jobs/runs/${run.run_id}/events/sse`,
            { authorization: `Bearer ${key}` },
            (_id, event, now) => {
              // The run's start, committed with the model call's reservation just before the call leaves:
              // this subscriber has its backlog and follows live.
              if (event === 'run_started') caughtUp.add(k);
              if (event === 'delta' && !seen.has(k) && firstToken > 0) {
                seen.add(k);
                lat.push(now - firstToken);
              }
            },
          ),
        ),
      );
      const settle = Date.now() + 10_000;
      while (caughtUp.size < FIRST_SUBS && Date.now() < settle) await sleep(10);
      await sleep(50);
      go();
      const until = Date.now() + 10_000;
      while (seen.size < FIRST_SUBS && Date.now() < until) await sleep(10);
      await c.modules.teams.teams.settled(run.run_id);
      for (const cl of clients) cl.close();
      // The floor for the same 50: a node:http SSE server writing one small frame.
      const f = await floorServer();
      const got = new Set<number>();
      let t0 = 0;
      const fc = await Promise.all(
        Array.from({ length: FIRST_SUBS }, (_, k) =>
          client(f.url, {}, (_id, event, now) => {
            if (event === 'delta' && !got.has(k)) {
              got.add(k);
              floor.push(now - t0);
            }
          }),
        ),
      );
      t0 = performance.now();
      f.publish(`event: delta\ndata: ${JSON.stringify({ step_id: 'writer/model/0', index: 0, text: 'one' })}\n\n`);
      const fEnd = Date.now() + 10_000;
      while (got.size < FIRST_SUBS && Date.now() < fEnd) await sleep(10);
      for (const cl of fc) cl.close();
      await f.close();
    }
  } finally {
    await ai.close();
  }
  return { lat, floor };
}

export default async function run(): Promise<void> {
  const { c, key, dir } = await boot();
  try {
    console.log(
      `  load average at start: ${loadavg()
        .map((x) => x.toFixed(2))
        .join(' ')}`,
    );
    // Frame size of a cell record, for the floor's frames.
    const cell: Round = { lat: [], fromAppend: [], delivered: 0 };
    const floor: Round = { lat: [], fromAppend: [], delivered: 0 };
    await cellRound(c, key); // warm-up
    for (let r = 0; r < ROUNDS; r++) {
      const a = await floorRound(700);
      const b = await cellRound(c, key);
      floor.lat.push(...a.lat);
      floor.delivered += a.delivered;
      cell.lat.push(...b.lat);
      cell.fromAppend.push(...b.fromAppend);
      cell.delivered += b.delivered;
    }
    const want = SUBS * EVENTS * ROUNDS;
    console.log(
      `  SSE fan-out, ${SUBS} subscribers, ${EVENTS} records x ${ROUNDS} rounds: cell publish -> delivery p50 ${fmt(pct(cell.lat, 50), 1)} ms p99 ${fmt(pct(cell.lat, 99), 1)} ms (${fmt(cell.delivered)}/${fmt(want)}); node:http floor p50 ${fmt(pct(floor.lat, 50), 1)} ms p99 ${fmt(pct(floor.lat, 99), 1)} ms (${fmt(floor.delivered)}/${fmt(want)}); p99 ratio ${fmt(pct(cell.lat, 99) / pct(floor.lat, 99), 2)} (target <= 2)`,
    );
    console.log(
      `  the same from the call of appendJournal (seal, sign, fsync, publish): p50 ${fmt(pct(cell.fromAppend, 50), 1)} ms p99 ${fmt(pct(cell.fromAppend, 99), 1)} ms`,
    );
    const fd = await firstDelta(c, key);
    console.log(
      `  first delta, ${FIRST_SUBS} subscribers x ${FIRST_RUNS} runs: fake server's first token -> delivery p50 ${fmt(pct(fd.lat, 50), 1)} ms p99 ${fmt(pct(fd.lat, 99), 1)} ms (${fmt(fd.lat.length)} samples; target p99 < 20 ms); node:http floor writing one delta frame to ${FIRST_SUBS}: p99 ${fmt(pct(fd.floor, 99), 1)} ms (ratio ${fmt(pct(fd.lat, 99) / pct(fd.floor, 99), 2)})`,
    );
    console.log(
      `  load average at end: ${loadavg()
        .map((x) => x.toFixed(2))
        .join(' ')}`,
    );
  } finally {
    await c.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run();
