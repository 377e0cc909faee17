// A device run that called a device tool (edge/tools.ts) is carried back and imported by the cell: the journal
// replays on the graph the cell carried, its tool step included, and the import stores it. Every built-in
// tool call it records is judged again against the bundle the device held (cell/edge/journal-acts.ts): a
// device that ignored its bundle (here: ran a widened copy of the graph, signing the bundle's graph hash, as
// a device key signs whatever it is given) is refused, naming the record.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inProcessCell, type InProcess } from '../helpers/inproc.ts';
import { generateEd25519, signerFromJwk, type Signer } from '../../bundles/codec.ts';
import type { Graph, ModelPort, SeatAuthority, ToolsPort } from '../../core/engine/types.ts';
import type { JournalRecord, JsonObject } from '../../core/journal/record.ts';
import { contentHash } from '../../core/canonical.ts';
import { unentitledAct, workspaceOf } from '../../cell/edge/journal-acts.ts';
import { deviceToolsPort } from '../../edge/tools.ts';
import { HTTP_REQUEST } from '../../runtime/http-request.ts';
import { crewOnDevice, deviceRun, exportRun } from './_device-run.ts';
import { testDevice } from './_edge-fixtures.ts';

const DEVICE = await testDevice();

const A = '/api/public/v1/admin';
const SIGNED = { 'content-type': 'application/vnd.agent-cell.signed' };
const NOW = 1_767_225_600_000;

/** A scripted model that calls `tool` with `args` on its first round (when offered), then answers. */
function callingModel(tool: string, args: JsonObject): ModelPort {
  return {
    async complete(req) {
      const called = req.messages.some((m) => m.role === 'tool');
      if (!called && req.tools.some((t) => t.name === tool))
        return { content: '', tool_calls: [{ id: 'call_0', name: tool, arguments: args }], usage: { input_tokens: 3, output_tokens: 4 } };
      return { content: `${req.agent.seat} called ${tool}`, usage: { input_tokens: 3, output_tokens: 4 } };
    },
  };
}

/** The device's HTTP tool without a network: http.request as the catalog describes it, answering 201. */
const offlineHttp: ToolsPort = {
  describe: (name) => {
    if (name !== HTTP_REQUEST.name) return undefined;
    const { run: _run, ...d } = HTTP_REQUEST;
    return d;
  },
  call: async () => ({ status: 201, headers: {}, body: '' }),
};

/** `graph` with every seat's authority changed by `widen`: what a device that ignored its bundle ran. */
function widened(graph: Graph, widen: (a: SeatAuthority) => SeatAuthority): Graph {
  const g = structuredClone(graph);
  for (const s of Object.values(g.seats)) s.authority = widen(s.authority);
  return g;
}

interface Device {
  signer: Signer;
  kid: string;
  trust: { kid: string; jwk: JsonWebKey }[];
}

async function device(t: InProcess): Promise<Device> {
  const k = await generateEd25519();
  const reg = await t.request('POST', `${A}/edge/devices`, { token: t.adminKey, body: { name: 'field', public_jwk: k.publicJwk } });
  assert.equal(reg.status, 201, reg.text);
  return { signer: signerFromJwk(k.kid, k.privateJwk), kid: k.kid, trust: reg.body.trust.keys };
}

test('journal import re-judges the tool calls of a device run against the bundle', async (t0) => {
  const t = await inProcessCell();
  const dir = mkdtempSync(join(tmpdir(), 'edge-import-tools-'));
  try {
    const dev = await device(t);
    /** Runs the crew of `cap` on the device (its graph changed by `widen`), exports and imports the journal. */
    const runAndImport = async (
      cap: Record<string, unknown>,
      model: ModelPort,
      tools: (ws: string | null) => ToolsPort,
      widen: (a: SeatAuthority) => SeatAuthority = (a) => a,
    ) => {
      const d = await crewOnDevice(t, dev.kid, dev.trust, { permission_mode: 'auto', clearance_level: 0, ...cap });
      // The crew the export names runs the graph's agents: its workspace is the bundle's.
      assert.equal(workspaceOf(d.graph, await t.modules.teams.teams.crew(d.crewId)), d.workspaceId);
      const r = await deviceRun(dev.signer, widened(d.graph, widen), d.graphHash, { model, tools: tools(d.workspaceId) });
      assert.equal(r.result.outcome, 'completed', JSON.stringify(r.result));
      const res = await t.request('POST', `${A}/edge/journals`, {
        token: t.adminKey,
        rawBody: await exportRun(dev.signer, r, { crewId: d.crewId }),
        headers: SIGNED,
      });
      return { r, res };
    };
    const kvTools = (ws: string | null) => deviceToolsPort(dir, DEVICE, { now: () => NOW }, ws);
    const refusedAt = (x: Awaited<ReturnType<typeof runAndImport>>, tool: string, why: string) => {
      assert.equal(x.res.status, 403, x.res.text);
      assert.equal(x.res.body.details.reason, 'journal_act_not_entitled');
      const rec = x.r.records.find((y) => y.kind === 'step' && y.data?.['tool'] === tool)!;
      assert.equal(x.res.body.details.seq, rec.seq);
      assert.equal(x.res.body.details.step_id, rec.step_id);
      assert.equal(x.res.body.details.tool, tool);
      assert.equal(x.res.body.details.act_reason, why);
      assert.match(x.res.body.message, new RegExp(`record ${rec.seq} .*${tool.replace('.', '\\.')}`));
    };

    await t0.test('an honest run of a granted tool imports', async () => {
      const x = await runAndImport({ allowed_tools: ['clock.now'] }, callingModel('clock.now', {}), kvTools);
      assert.ok(
        x.r.records.some((y) => y.kind === 'step' && y.data?.['tool'] === 'clock.now'),
        'the tool call is journaled',
      );
      assert.equal(x.res.status, 201, x.res.text);
    });

    await t0.test('a tool the seat was not granted is refused, naming the record', async () => {
      const x = await runAndImport({ allowed_tools: ['clock.now'] }, callingModel('calc', { expression: '6*7' }), kvTools, (a) => ({
        ...a,
        allowed_tools: [...a.allowed_tools, 'calc'],
      }));
      refusedAt(x, 'calc', 'tool_not_granted');
    });

    const origin = 'https://api.field.test';
    await t0.test('an http.request GET to an origin the allowlist names imports', async () => {
      const cap = { allowed_tools: ['http.request'], egress_allowlist: [origin] };
      const x = await runAndImport(cap, callingModel('http.request', { method: 'GET', url: `${origin}/pumps` }), () => offlineHttp);
      assert.equal(x.res.status, 201, x.res.text);
    });

    await t0.test('an http.request POST to an origin the allowlist names only for GET is refused', async () => {
      const cap = { allowed_tools: ['http.request'], egress_allowlist: [origin] };
      const x = await runAndImport(
        cap,
        callingModel('http.request', { method: 'POST', url: `${origin}/pumps`, body: { state: 'open' } }),
        () => offlineHttp,
        (a) => ({ ...a, egress_allowlist: [`POST:${origin}`] }),
      );
      refusedAt(x, 'http.request', 'egress_denied');
    });

    const kvCap = { allowed_tools: ['kv.put'], egress_allowlist: ['kv:*'] };
    await t0.test('a kv.put at the seat clearance imports', async () => {
      const x = await runAndImport(kvCap, callingModel('kv.put', { key: 'finding', value: 'leak' }), kvTools);
      assert.equal(x.res.status, 201, x.res.text);
    });

    await t0.test('a kv.put above the seat clearance is refused', async () => {
      const x = await runAndImport(kvCap, callingModel('kv.put', { key: 'finding', value: 'leak', classification: 2 }), kvTools, (a) => ({
        ...a,
        clearance_level: 2,
      }));
      refusedAt(x, 'kv.put', 'clearance_insufficient');
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await t.close();
  }
});

test('the judge of recorded calls: what a call record must be, and the modes', async () => {
  const authority = (o: Partial<SeatAuthority> = {}): SeatAuthority => ({
    allowed_tools: ['calc', 'kv.put'],
    clearance_level: 0,
    permission_mode: 'auto',
    data_grant_ids: [],
    egress_allowlist: ['kv:*'],
    compartments: [],
    governing_contract_ids: [],
    budget_ceiling: null,
    ...o,
  });
  const graph = (a: SeatAuthority) =>
    ({ nodes: [{ id: 'n', kind: 'agent', seat: 's', config: {} }], seats: { s: { authority: a } } }) as unknown as Graph;
  const journal = (stepId: string, input: unknown, data: JsonObject, out: unknown = { ok: true, key: 'k' }) => ({
    records: [
      { seq: 3, kind: 'step', step_id: stepId, input_hash: contentHash(input), output_hash: contentHash(out), data },
    ] as unknown as JournalRecord[],
    values: { [contentHash(input)]: input, [contentHash(out)]: out },
  });
  const put = { tool: 'kv.put', args: { key: 'k', value: 1 } };
  const why = async (g: Graph, j: ReturnType<typeof journal>) => (await unentitledAct(g, 'ws', j))?.why ?? null;
  assert.equal(await why(graph(authority()), journal('n/tool/0.0', put, { tool: 'kv.put' })), null);
  // A record that names a tool is judged as a call wherever it is: under a step id no call has, it is refused.
  assert.equal(await why(graph(authority()), journal('n/model/0', put, { tool: 'kv.put' })), 'journal_invalid');
  // Its tool is the one its input names; its arguments are there.
  assert.equal(await why(graph(authority()), journal('n/tool/0.0', put, { tool: 'calc' })), 'journal_invalid');
  assert.equal(await why(graph(authority()), journal('n/tool/0.0', { tool: 'kv.put' }, { tool: 'kv.put' })), 'journal_invalid');
  // A step the graph does not have.
  assert.equal(await why(graph(authority()), journal('m/tool/0.0', put, { tool: 'kv.put' })), 'journal_invalid');
  // Modes: plan runs nothing; ask (and auto-read for a side-effecting tool) only with recorded approvals.
  assert.equal(
    await why(graph(authority({ permission_mode: 'plan' })), journal('n/tool/0.0', put, { tool: 'kv.put' })),
    'tool_forbidden_by_mode',
  );
  for (const mode of ['ask', 'auto-read'] as const) {
    assert.equal(
      await why(graph(authority({ permission_mode: mode })), journal('n/tool/0.0', put, { tool: 'kv.put' })),
      'approval_unavailable',
    );
    const approved = { tool: 'kv.put', approved_by: ['usr_b'], approvals: [{ principal: 'usr_b', decision: 'approve' }] };
    assert.equal(await why(graph(authority({ permission_mode: mode })), journal('n/tool/0.0', put, approved)), null);
  }
  const calc = { tool: 'calc', args: { expression: '1+1' } };
  assert.equal(
    await why(graph(authority({ permission_mode: 'auto-read' })), journal('n/tool/0.0', calc, { tool: 'calc' }, { value: 2 })),
    null,
  );
  // Arguments the tool would refuse as bad, with a result recorded: forged; with the bad-arguments answer: no act.
  const bad = { tool: 'kv.put', args: { key: 'k', value: 1, classification: -1 } };
  assert.equal(await why(graph(authority()), journal('n/tool/0.0', bad, { tool: 'kv.put' })), 'tool_bad_arguments');
  assert.equal(
    await why(graph(authority()), journal('n/tool/0.0', bad, { tool: 'kv.put' }, { error: 'invalid_request', message: 'x' })),
    null,
  );
});

test("the workspace a kv call is judged in is the named crew's only when that crew runs the graph's agents", async () => {
  const graph = {
    nodes: [{ id: 'n', kind: 'agent', seat: 's', config: {} }],
    seats: {
      s: {
        agent_id: 'agt_1',
        authority: {
          allowed_tools: ['kv.get'],
          clearance_level: 0,
          permission_mode: 'auto',
          data_grant_ids: ['kv:ws_a'],
          egress_allowlist: [],
          compartments: [],
          governing_contract_ids: [],
          budget_ceiling: null,
        },
      },
    },
  } as unknown as Graph;
  assert.equal(workspaceOf(graph, { assignments: { s: 'agt_1' }, workspace_id: 'ws_a' }), 'ws_a');
  // A crew the export names that does not bind the graph's seat to its agent: another crew, no workspace known.
  assert.equal(workspaceOf(graph, { assignments: { s: 'agt_2' }, workspace_id: 'ws_a' }), null);
  assert.equal(workspaceOf(graph, undefined), null);
  const input = { tool: 'kv.get', args: { key: 'k' } };
  const out = { found: false };
  const journal = {
    records: [
      {
        seq: 2,
        kind: 'step',
        step_id: 'n/tool/0.0',
        input_hash: contentHash(input),
        output_hash: contentHash(out),
        data: { tool: 'kv.get' },
      },
    ] as unknown as JournalRecord[],
    values: { [contentHash(input)]: input, [contentHash(out)]: out },
  };
  assert.equal(await unentitledAct(graph, 'ws_a', journal), null);
  assert.equal((await unentitledAct(graph, null, journal))?.why, 'data_not_granted');
});
