// MCP tools on a device (edge/mcp-tools.ts over runtime/mcp-client/): the reference SDK's stdio server
// (test/fixtures/mcp-stdio-server.mjs) named in `edge serve --tool-sources`, started by the edge, its tools offered
// to the tiny local model as the crew bundle's catalog entries describe them and called (each billet's
// tool_choice names its tool, so the small model calls it) through the real `edge serve` process: the journal
// names the pin, the side-effecting call carries its effect key in `_meta`. A definition that no longer matches
// the bundle's pin is refused offline at call time (`tool_definition_changed`) and before the next run
// (`device_tools_unavailable`); so is a server started with another definition, and a crew whose source the
// device does not configure, naming each tool and seat.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { CrewMcpTool } from '../../bundles/crew-bundle.ts';
import { listTools, openClient } from '../../runtime/mcp-client/connect.ts';
import type { StdioSourceConfig } from '../../runtime/mcp-client/config.ts';
import { guardedDispatcher } from '../../runtime/ssrf.ts';
import { createLogger } from '../../runtime/log.ts';
import { findRuntime } from '../../runtime/local-model.ts';
import { edgeListening } from './_listening.ts';
import { edgeWorld, NARROW_SECRET, SECRET, T0 } from './_edge-fixtures.ts';
import { start } from './_offline-app.ts';
import { until } from '../helpers/until.ts';

const ROOT = resolve(import.meta.dirname, '..', '..');
const EDGE = join(ROOT, 'dist', 'edge.mjs');
const SERVER = join(ROOT, 'test', 'fixtures', 'mcp-stdio-server.mjs');
const RUNS = '/api/public/v1/admin/agent-teams/crews/crw_1/runs';

let skip: string | false = false;
try {
  findRuntime();
} catch {
  skip = 'edge-runtime/ is not installed (make edge-runtime)';
}
if (!skip && !existsSync(EDGE)) skip = 'dist/edge.mjs missing: run node scripts/build.mjs';

const source = (env: Record<string, string> = {}): StdioSourceConfig => ({
  name: 'files',
  command: process.execPath,
  args: [SERVER],
  env,
  cwd: null,
  description: '',
  // Read the server's list before every call: a change shows at once.
  definition_max_age_ms: 0,
  timeout_ms: 10_000,
});

/** The catalog entries of the fixture's tools as the cell would pin them: read from the server itself. */
async function catalogEntries(): Promise<CrewMcpTool[]> {
  const s = source();
  const session = await openClient(
    { source_id: 'src_files', name: 'files', transport: 'stdio', url: null, timeout_ms: 10_000 },
    { dispatcher: guardedDispatcher([]), log: createLogger({ level: 'error', format: 'json' }), stdio: () => ({ ...s }) },
  );
  try {
    const listing = await listTools(session.client, { timeout: 10_000 });
    return [...listing.tools.values()].map((t) => ({
      name: `mcp.files.${t.definition.name}`,
      source: 'files',
      tool: t.definition.name,
      pin: t.pin,
      definition: t.definition,
    }));
  } finally {
    await session.close();
  }
}

/** Seat a calls echo, seat b counter (each billet's tool_choice names its tool); both may reach `mcp:files`. */
const policies = {
  a: {
    authority_cap: { allowed_tools: ['mcp.files.echo'], permission_mode: 'auto' as const, egress_allowlist: ['mcp:files'] },
    tool_choice: { name: 'mcp.files.echo' },
  },
  b: {
    authority_cap: { allowed_tools: ['mcp.files.counter'], permission_mode: 'auto' as const, egress_allowlist: ['mcp:files'] },
    tool_choice: { name: 'mcp.files.counter' },
  },
};

let tools: CrewMcpTool[] = [];
let world: Awaited<ReturnType<typeof edgeWorld>>;
before(async () => {
  if (skip) return;
  tools = await catalogEntries();
  world = await edgeWorld({ maxTokens: 400, policies, mcpTools: tools, narrowKey: true });
});
after(() => {
  if (world) rmSync(world.dir, { recursive: true, force: true });
});

test('the real edge serve calls the stdio server for the local model; a changed definition is refused at call time, then before the run', {
  skip,
  timeout: 240_000,
}, async () => {
  const change = join(world.dir, 'change-counter');
  const callsFile = join(world.dir, 'counter-calls');
  const counterCalls = () =>
    existsSync(callsFile)
      ? readFileSync(callsFile, 'utf8')
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l))
      : [];
  const sourcesFile = join(world.dir, 'tool-sources.json');
  writeFileSync(sourcesFile, JSON.stringify({ sources: [{ ...source({ CHANGE_FILE: change, CALLS_FILE: callsFile }), cwd: undefined }] }));
  const proc: ChildProcess = spawn(
    process.execPath,
    [
      EDGE,
      'serve',
      '--data',
      world.dir,
      '--bundle',
      world.keysPath,
      '--crew-bundle',
      world.crewPath,
      '--model',
      world.modelPath,
      '--model-manifest',
      world.manifestPath,
      '--port',
      '0',
      '--tool-sources',
      sourcesFile,
      `--now-offset-ms=${T0 + 1000 - Date.now()}`,
    ],
    { env: { ...process.env, AGENT_CELL_EDGE_TEST_CLOCK: '1' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  try {
    const { url, out } = await edgeListening(proc, 60_000);
    const req = async (method: string, path: string, body?: unknown) => {
      const r = await fetch(url + path, {
        method,
        headers: { authorization: `Bearer ${SECRET}`, 'content-type': 'application/json' },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      return { status: r.status, body: (await r.json()) as any };
    };
    const runToEnd = async (input: string) => {
      const p = await req('POST', RUNS, { input });
      assert.equal(p.status, 202, `${JSON.stringify(p.body)}\n${out()}`);
      for (let i = 0; i < 2400; i++) {
        const g = await req('GET', `${RUNS}/${p.body.run_id}`);
        if (g.body.state !== 'running') {
          const j = await req('GET', `/api/public/v1/admin/jobs/runs/${p.body.run_id}/journal`);
          return { run: g.body, records: j.body.records as { step_id: string; kind: string; data?: any }[] };
        }
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error('the run did not end');
    };

    // 1. Both seats call their tool on the device's server; the journal names the pins; the side-effecting call
    //    carries its effect key in _meta (the server answers with the key it got), the one the journal records.
    const one = await runToEnd('pump 7 reads 3.2 bar');
    assert.equal(one.run.state, 'completed', JSON.stringify(one));
    const calls = one.records.filter((r) => r.kind === 'step' && typeof r.data?.tool === 'string');
    const pin = (name: string) => tools.find((t) => t.name === name)!.pin;
    assert.deepEqual(
      calls.map((r) => [r.step_id.split('/')[0], r.data.tool, r.data.pin, r.data.identity]),
      [
        ['agent:a', 'mcp.files.echo', pin('mcp.files.echo'), { kind: 'none' }],
        ['agent:b', 'mcp.files.counter', pin('mcp.files.counter'), { kind: 'none' }],
      ],
    );
    const counted = calls[1]!;
    assert.match(counted.data.effect_key, /^[0-9a-f-]{36}$/);
    assert.deepEqual(counterCalls(), [{ count: 1, effect_key: counted.data.effect_key }]);

    // 2. The server's definition of counter changes while a run is under way (echo's call changes it): the
    //    run started (the pins matched), and its call of counter is refused offline, never made.
    writeFileSync(change, '1');
    const two = await runToEnd('pump 8 reads 2.9 bar');
    assert.equal(two.run.state, 'refused', JSON.stringify(two.run));
    const refusal = two.records.find((r) => r.kind === 'refusal');
    assert.equal(refusal?.data?.reason, 'tool_definition_changed', JSON.stringify(two.records));
    assert.equal(refusal.data.tool, 'mcp.files.counter');
    assert.equal(refusal.data.pinned, pin('mcp.files.counter'));
    assert.notEqual(refusal.data.live, pin('mcp.files.counter'));
    assert.ok(!two.records.some((r) => r.kind === 'step' && r.data?.tool === 'mcp.files.counter'));
    assert.equal(counterCalls().length, 1, 'the server saw no second call of counter');

    // 3. The next run is refused before it starts, naming the tool, its seat and why.
    const three = await req('POST', RUNS, { input: 'pump 9' });
    assert.equal(three.status, 409, JSON.stringify(three.body));
    assert.equal(three.body.details.reason, 'device_tools_unavailable');
    assert.deepEqual(
      three.body.details.tools.map((u: { tool: string; seat: string }) => [u.tool, u.seat]),
      [['mcp.files.counter', 'b']],
    );
    assert.match(three.body.details.tools[0].why, /does not hash to the bundle's pin/);
  } finally {
    if (proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      await exited;
    }
  }
});

test('a crew whose source the device does not configure, or whose server has another definition, is refused before its run, naming each tool', {
  skip,
  timeout: 120_000,
}, async () => {
  for (const [sources, why] of [
    [[], [/source files is not configured on this device/, /source files is not configured on this device/]],
    [[source({ COUNTER_DESCRIPTION: 'Count a call, and more.' })], [/does not hash to the bundle's pin/]],
  ] as const) {
    const e = await start(world, [...sources]);
    try {
      const r = await e.req('POST', RUNS, { input: 'go' });
      assert.equal(r.status, 409, JSON.stringify(r.body));
      assert.equal(r.body.details.reason, 'device_tools_unavailable');
      const named = r.body.details.tools as { tool: string; seat: string; why: string }[];
      assert.deepEqual(
        named.map((u) => [u.seat, u.tool]),
        sources.length === 0
          ? [
              ['a', 'mcp.files.echo'],
              ['b', 'mcp.files.counter'],
            ]
          : [['b', 'mcp.files.counter']],
      );
      for (const [i, u] of named.entries()) assert.match(u.why, why[i]!);
    } finally {
      await e.close();
      await e.setup.model?.dispose();
    }
  }
});

test('a side-effecting call sent and not answered waits outcome_unknown; after a restart it is not issued again', {
  skip,
  timeout: 120_000,
}, async () => {
  const callsFile = join(world.dir, 'hanging-calls');
  const calls = () => (existsSync(callsFile) ? readFileSync(callsFile, 'utf8').trim().split('\n').length : 0);
  // The server counts the call of counter and never answers it: after the source's timeout its outcome is unknown.
  const hanging = { ...source({ COUNTER_HANGS: '1', CALLS_FILE: callsFile }), timeout_ms: 1000 };
  const waitingRun = async (e: Awaited<ReturnType<typeof start>>, id: string) => {
    for (let i = 0; i < 400; i++) {
      const g = await e.req('GET', `${RUNS}/${id}`);
      if (g.body.state !== 'running') return g.body;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error('the run did not stop');
  };
  const first = await start(world, [hanging]);
  let id = '';
  try {
    const p = await first.req('POST', RUNS, { input: 'pump 10' });
    assert.equal(p.status, 202, JSON.stringify(p.body));
    id = p.body.run_id;
    const run = await waitingRun(first, id);
    assert.equal(run.state, 'waiting', JSON.stringify(run));
    const j = (await first.req('GET', `/api/public/v1/admin/jobs/runs/${id}/journal`)).body.records as any[];
    const wait = [...j].reverse().find((r) => r.kind === 'waiting');
    assert.equal(wait.data.reason, 'outcome_unknown', JSON.stringify(wait));
    assert.equal(wait.data.effect.tool, 'mcp.files.counter');
    const intent = j.find((r) => r.kind === 'intent' && r.step_id === wait.step_id);
    assert.equal(wait.data.effect.effect_key, intent.data.effect_key, 'the key its intent recorded');
    assert.equal(calls(), 1);
  } finally {
    await first.close();
    await first.setup.model?.dispose();
  }
  // The device starts again: the run is driven from its journal, and the lost call is not issued blindly again.
  const again = await start(world, [hanging]);
  try {
    await until('the run driven again', async () => {
      const j = (await again.req('GET', `/api/public/v1/admin/jobs/runs/${id}/journal`)).body.records as any[];
      return j.filter((r) => r.kind === 'waiting').length >= 2;
    });
    assert.equal((await waitingRun(again, id)).state, 'waiting');
    assert.equal(calls(), 1, 'the server saw the call once');
  } finally {
    await again.close();
    await again.setup.model?.dispose();
  }
});

test('a lost outcome is resolved on the device as at the cell: retry with the same effect key, record a result, fail', {
  skip,
  timeout: 120_000,
}, async () => {
  const callsFile = join(world.dir, 'resolved-calls');
  const calls = () =>
    existsSync(callsFile)
      ? readFileSync(callsFile, 'utf8')
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as { effect_key: string })
      : [];
  // Every call of counter is counted and never answered: each issue of it is lost after the source's timeout.
  const e = await start(world, [{ ...source({ COUNTER_HANGS: '1', CALLS_FILE: callsFile }), timeout_ms: 1000 }]);
  const view = (id: string) => e.req('GET', `${RUNS}/${id}`).then((r) => r.body);
  /** The run once it waits on the lost outcome of `attempt` (or has ended). */
  const lost = (id: string, attempt: number) =>
    until(`attempt ${attempt} lost`, async () => {
      const v = await view(id);
      return v.unknown_outcome?.attempt === attempt || ['completed', 'failed', 'refused'].includes(v.state) ? v : undefined;
    });
  const ended = (id: string) =>
    until('the run ended', async () => {
      const v = await view(id);
      return v.state === 'waiting' || v.state === 'running' ? undefined : v;
    });
  const resolve = (id: string, stepId: string, body: unknown, secret = SECRET) =>
    e.req('POST', `${RUNS}/${id}/outcomes/${encodeURIComponent(stepId)}`, body, secret);
  try {
    const id = (await e.req('POST', RUNS, { input: 'pump 11' })).body.run_id as string;
    const first = await lost(id, 1);
    assert.equal(first.state, 'waiting', JSON.stringify(first));
    const u = first.unknown_outcome;
    assert.equal(u.tool, 'mcp.files.counter');
    assert.equal(u.effect_key, calls()[0]!.effect_key);
    // A caller without agent_teams.write is refused by the gateway's guard; bad bodies and other steps as at the cell.
    const narrow = await resolve(id, u.step_id, { resolution: 'retry' }, NARROW_SECRET);
    assert.equal(narrow.status, 403, JSON.stringify(narrow.body));
    assert.equal((await resolve(id, u.step_id, { resolution: 'record' })).status, 400);
    assert.equal((await resolve(id, 'agent:a/nope', { resolution: 'retry' })).status, 404);

    // retry: the server sees the call again, under the same effect key (lost again: attempt 2).
    const retried = await resolve(id, u.step_id, { resolution: 'retry', comment: 'checked the pump log' });
    assert.equal(retried.status, 200, JSON.stringify(retried.body));
    assert.equal(retried.body.unknown_outcome, null);
    assert.equal((await lost(id, 2)).unknown_outcome.attempt, 2);
    assert.deepEqual(
      calls().map((c) => c.effect_key),
      [u.effect_key, u.effect_key],
    );
    assert.equal((await resolve(id, u.step_id, { resolution: 'retry' }, SECRET)).status, 200);
    await lost(id, 3);
    // record: the operator's value is the call's result; the call is not issued again and the run goes on.
    const recorded = await resolve(id, u.step_id, { resolution: 'record', result: { count: 3, effect_key: u.effect_key } });
    assert.equal(recorded.status, 200, JSON.stringify(recorded.body));
    const done = await ended(id);
    assert.equal(done.state, 'completed', JSON.stringify(done));
    assert.equal(calls().length, 3, 'the recorded call was not issued');
    const j = (await e.req('GET', `/api/public/v1/admin/jobs/runs/${id}/journal`)).body.records as any[];
    const resolutions = j.filter((r) => r.kind === 'outcome_resolved');
    assert.deepEqual(
      resolutions.map((r) => [r.data.by, r.data.resolution, r.data.attempt, r.data.effect_key, typeof r.data.key_bundle]),
      [
        ['usr_1', 'retry', 1, u.effect_key, 'number'],
        ['usr_1', 'retry', 2, u.effect_key, 'number'],
        ['usr_1', 'record', 3, u.effect_key, 'number'],
      ],
    );
    assert.equal(resolutions[0].data.comment, 'checked the pump log');
    const step = j.find((r) => r.kind === 'step' && r.step_id === u.step_id);
    assert.deepEqual(step.data.resolution, { resolution: 'record', by: 'usr_1', attempt: 3 });
    assert.equal((await resolve(id, u.step_id, { resolution: 'fail' })).body.details.reason, 'run_terminal');

    // fail: the run fails outcome_unknown, naming who resolved it.
    const other = (await e.req('POST', RUNS, { input: 'pump 12' })).body.run_id as string;
    const w = (await lost(other, 1)).unknown_outcome;
    assert.equal((await resolve(other, w.step_id, { resolution: 'fail' })).status, 200);
    const failed = await ended(other);
    assert.equal(failed.state, 'failed', JSON.stringify(failed));
    assert.equal(failed.reason, 'outcome_unknown');
  } finally {
    await e.close();
    await e.setup.model?.dispose();
  }
});

test('edge serve reads --tool-sources strictly: a bad file stops the start, naming what is wrong', { skip }, () => {
  const bad = join(world.dir, 'bad-sources.json');
  writeFileSync(bad, JSON.stringify({ sources: [{ name: 'files' }] }));
  const r = spawnSync(process.execPath, [EDGE, 'serve', '--data', world.dir, '--tool-sources', bad], { encoding: 'utf8' });
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /--tool-sources .*command must be a string/);
  const help = spawnSync(process.execPath, [EDGE, 'serve', '--help'], { encoding: 'utf8' });
  assert.match(help.stdout, /--tool-sources FILE/);
});
