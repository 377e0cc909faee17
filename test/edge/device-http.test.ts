// http.get and http.request on a device (edge/tools.ts over runtime/http-call.ts, runtime/http-request.ts: the
// cell's definitions and floor), against a real HTTP server on a free port: only what the seat's egress allowlist
// names, with the method it names; loopback only when the device's `--egress-allow-private` names it; a write
// carries the call's effect key as Idempotency-Key, the one its journal records.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isEngineRefusal } from '../../core/engine/refusal.ts';
import { runGraph } from '../../core/engine/run.ts';
import { effectKey } from '../../core/engine/effect-key.ts';
import type { Graph, SeatAuthority, ToolCallContext } from '../../core/engine/types.ts';
import { toolRegistryView } from '../../cell/tools/catalog.ts';
import { deviceToolsPort, unhonouredTools } from '../../edge/tools.ts';
import { budget, graph, manualClock, seat, signedJournal, OPTS } from '../core/engine/_harness.ts';
import { compiledCrew } from './_edge-fixtures.ts';
import { testDevice } from './_edge-fixtures.ts';

const DEVICE = await testDevice();

const T = Date.UTC(2026, 5, 1, 12);
const LOOPBACK = ['127.0.0.1/32'];

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}
const seen: Seen[] = [];
let server: Server;
let origin = '';
const dir = mkdtempSync(join(tmpdir(), 'edge-http-'));

before(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(req.method === 'POST' ? 201 : 200, { 'content-type': 'text/plain' });
      res.end(`${req.method} ${req.url}`);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(async () => {
  await new Promise((r) => server.close(r));
  rmSync(dir, { recursive: true, force: true });
});

const authority = (egress: string[], tools = ['http.get', 'http.request']): SeatAuthority => ({
  allowed_tools: tools,
  clearance_level: 0,
  permission_mode: 'auto',
  data_grant_ids: [],
  egress_allowlist: egress,
  compartments: [],
  governing_contract_ids: [],
  budget_ceiling: null,
});
const at = (a: SeatAuthority, effect_key?: string): ToolCallContext => ({
  run_id: 'r',
  step_id: 's',
  seat: 'a',
  agent_id: 'agt_a',
  authority: a,
  ...(effect_key !== undefined ? { effect_key } : {}),
});
async function refusal(p: Promise<unknown>): Promise<{ reason: string; details: Record<string, unknown> }> {
  try {
    await p;
  } catch (e) {
    if (isEngineRefusal(e)) return { reason: e.reason, details: e.details as Record<string, unknown> };
    throw e;
  }
  throw new Error('not refused');
}

test('http.get and http.request reach what the egress allowlist names, with the methods it names', async () => {
  const port = deviceToolsPort(dir, DEVICE, { now: () => T }, null, LOOPBACK);
  const before = seen.length;
  assert.deepEqual(await port.call('http.get', { url: `${origin}/pumps/7` }, at(authority([origin]))), {
    status: 200,
    content_type: 'text/plain',
    body: 'GET /pumps/7',
    truncated: false,
  });
  const r = (await port.call(
    'http.request',
    { method: 'POST', url: `${origin}/findings`, body: { pump: 7, bar: 3.2 } },
    at(authority([`POST:${origin}`]), 'key-1'),
  )) as { status: number; body: string };
  assert.equal(r.status, 201);
  assert.equal(r.body, 'POST /findings');
  const post = seen.at(-1)!;
  assert.equal(post.method, 'POST');
  assert.equal(post.body, '{"pump":7,"bar":3.2}');
  assert.equal(post.headers['content-type'], 'application/json');
  // The call's effect key, as a Structured Field string: the same on every issue of the call.
  assert.equal(post.headers['idempotency-key'], '"key-1"');
  assert.equal(seen.length, before + 2);

  // Not on the allowlist, or not with this method: refused before any request leaves.
  const other = await refusal(port.call('http.get', { url: `${origin}/x` }, at(authority(['https://api.example.com']))));
  assert.equal(other.reason, 'egress_denied');
  assert.equal(other.details['destination'], origin);
  const write = await refusal(port.call('http.request', { method: 'POST', url: `${origin}/x`, body: 'x' }, at(authority([origin]))));
  assert.equal(write.reason, 'egress_denied');
  assert.equal(write.details['method'], 'POST');
  assert.equal((await refusal(port.call('http.get', { url: `${origin}/x` }, at(authority([]))))).reason, 'egress_denied');
  // An agent cannot pick its own effect key (or present a credential).
  const h = await refusal(
    port.call(
      'http.request',
      { method: 'PUT', url: `${origin}/x`, headers: { 'Idempotency-Key': 'mine' } },
      at(authority([`*:${origin}`])),
    ),
  );
  assert.equal(h.reason, 'header_not_allowed');
  // Bad arguments go back to the model.
  assert.equal(((await port.call('http.get', { url: 'ftp://x' }, at(authority(['*'])))) as { error: string }).error, 'invalid_request');
  assert.equal(seen.length, before + 2, 'no refused call reached the server');
  // edge serve's stop closes the HTTP tools' kept-alive connections: the server has none left open.
  const open = () => new Promise<number>((r) => server.getConnections((_e, n) => r(n)));
  assert.ok((await open()) > 0, 'a connection is kept alive between calls');
  await port.close();
  for (let i = 0; i < 50 && (await open()) > 0; i++) await new Promise((r) => setTimeout(r, 20));
  assert.equal(await open(), 0);
});

test("a loopback or private address is refused unless the device's --egress-allow-private names its range", async () => {
  const before = seen.length;
  const bare = deviceToolsPort(dir, DEVICE, { now: () => T }, null);
  const lit = await refusal(bare.call('http.get', { url: `${origin}/x` }, at(authority([origin]))));
  assert.equal(lit.reason, 'egress_private_address');
  // A name is judged at connect time (the address dialled is the address judged): localhost is refused too.
  const port = (server.address() as AddressInfo).port;
  const named = await refusal(bare.call('http.get', { url: `http://localhost:${port}/x` }, at(authority(['localhost']))));
  assert.equal(named.reason, 'egress_private_address');
  // Another range allowed does not open this one.
  const ten = deviceToolsPort(dir, DEVICE, { now: () => T }, null, ['10.0.0.0/8']);
  assert.equal((await refusal(ten.call('http.get', { url: `${origin}/x` }, at(authority(['*']))))).reason, 'egress_private_address');
  assert.equal(seen.length, before, 'nothing reached the server');
  const allowed = deviceToolsPort(dir, DEVICE, { now: () => T }, null, LOOPBACK);
  assert.equal(
    ((await allowed.call('http.get', { url: `http://localhost:${port}/y` }, at(authority(['localhost'])))) as { status: number }).status,
    200,
  );
});

test("the device offers the cell's definitions of http.get and http.request, and honours crews that use them", () => {
  const port = deviceToolsPort(dir, DEVICE, { now: () => T }, null);
  for (const name of ['http.get', 'http.request']) {
    const cell = toolRegistryView().find((t) => t.name === name)!;
    const d = port.describe(name)!;
    assert.deepEqual(
      [d.name, d.description, d.side_effects, d.idempotent ?? false, d.parameters],
      [cell.name, cell.description, cell.side_effects, cell.idempotent, cell.parameters],
    );
  }
  const g = (mode: string) =>
    compiledCrew(16, { a: { authority_cap: { allowed_tools: ['http.get', 'http.request'], permission_mode: mode } as never } })
      .graph as unknown as Graph;
  assert.deepEqual(unhonouredTools(g('auto'), null), []);
  // http.request has side effects: under auto-read a call waits for an approval, which the device takes (edge/approvals.ts).
  assert.deepEqual(unhonouredTools(g('auto-read'), null), []);
});

/** A device run of one seat-bound http.request POST step, under `egress`, on the device's tools port and a signed journal. */
async function postRun(egress: string[]) {
  const j = await signedJournal();
  const g = graph(
    [{ id: 'post', kind: 'tool', seat: 'a', config: { tool: 'http.request', args: { method: 'POST', url: `${origin}/log`, body: 'ok' } } }],
    [],
    [seat('a', {}, { allowed_tools: ['http.request'], egress_allowlist: egress })],
  );
  const ports = {
    tools: deviceToolsPort(dir, DEVICE, { now: () => T }, null, LOOPBACK),
    clock: manualClock(),
    budget: budget(['agt_a']).port,
    journal: j.port,
    recorded: j.recorded,
    intents: j.intents,
    attempts: j.attempts,
  };
  return { r: await runGraph(g, null, ports, OPTS), j };
}

test("a device run's http.request: its effect key is journaled, and is the Idempotency-Key the service saw", async () => {
  const { r, j } = await postRun([`POST:${origin}`]);
  assert.equal(r.outcome, 'completed', JSON.stringify(r));
  const key = effectKey('run_test', 'post/call');
  const step = j.records.find((x) => x.kind === 'step' && x.step_id === 'post/call')!;
  assert.equal(step.data!['effect_key'], key);
  assert.equal(j.records.find((x) => x.kind === 'intent')!.data!['effect_key'], key);
  const hit = seen.at(-1)!;
  assert.equal(hit.url, '/log');
  assert.equal(hit.headers['idempotency-key'], `"${key}"`);
  assert.deepEqual(await j.verify(), { ok: true });

  // Refused by the floor (the allowlist names the origin for GET and HEAD only): the run is refused with the
  // tool's reason, journaled, and nothing is sent.
  const count = seen.length;
  const denied = await postRun([origin]);
  assert.equal(denied.r.outcome, 'refused');
  assert.equal(denied.r.reason, 'egress_denied');
  assert.equal(seen.length, count);
  assert.deepEqual(await denied.j.verify(), { ok: true });
});

test('edge serve --egress-allow-private takes addresses and CIDR ranges, and refuses anything else before it starts', {
  skip: existsSync('dist/edge.mjs') ? false : 'dist/edge.mjs missing: run node scripts/build.mjs',
}, () => {
  const r = spawnSync(process.execPath, ['dist/edge.mjs', 'serve', '--data', dir, '--egress-allow-private', '127.0.0.1/32,localhost'], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /--egress-allow-private: 'localhost' is not an address or CIDR range/);
  const help = spawnSync(process.execPath, ['dist/edge.mjs', 'serve', '--help'], { encoding: 'utf8' });
  assert.match(help.stdout, /--egress-allow-private CIDR/);
});
