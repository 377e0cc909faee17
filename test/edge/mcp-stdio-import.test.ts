// The crew bundle's MCP tools at the cell (cell/edge/crew-source.ts, bundles/crew-bundle.ts, cell/edge/judge-mcp-calls.ts):
// a crew bundle carries the catalog entry and pin of every MCP tool a seat can call, the same pins its graph (and so
// its hash) carries, and a device recompiles the same graph; a verifier refuses an entry that does not match its
// definition or the graph; the cell refuses to issue a bundle for a crew whose MCP tools are not all pinned. Back at
// the cell, a journal whose run called the device's stdio server (the reference SDK fixture, through
// edge/mcp-tools.ts) imports; one with an MCP call the bundle did not pin, or under another pin, is refused, naming
// the record.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { buildCrewBundle, openCrewBundle, type CrewContent } from '../../bundles/crew-bundle.ts';
import { generateEd25519, signerFromJwk, type Signer } from '../../bundles/codec.ts';
import type { Graph, ModelPort, ToolsPort } from '../../core/engine/types.ts';
import { graphMatches } from '../../edge/load.ts';
import { deviceMcpTools } from '../../edge/mcp-tools.ts';
import { deviceToolsPort } from '../../edge/tools.ts';
import { createLogger } from '../../runtime/log.ts';
import { inProcessCell, type InProcess } from '../helpers/inproc.ts';
import { until } from '../helpers/until.ts';
import { crewOnDevice, deviceRun, exportRun } from './_device-run.ts';
import { testDevice } from './_edge-fixtures.ts';

const DEVICE = await testDevice();

const A = '/api/public/v1/admin';
const SERVER = resolve(import.meta.dirname, '../fixtures/mcp-stdio-server.mjs');
const files = {
  name: 'files',
  command: process.execPath,
  args: [SERVER],
  env: {},
  cwd: null,
  description: 'device files',
  definition_max_age_ms: 0,
  timeout_ms: 10_000,
};
const cap = (tools: string[]) => ({ allowed_tools: tools, permission_mode: 'auto', clearance_level: 0, egress_allowlist: ['mcp:files'] });

/** A scripted model that calls `tool` on its first round, then answers. */
const calling = (tool: string, args: Record<string, unknown>): ModelPort => ({
  async complete(req) {
    if (!req.messages.some((m) => m.role === 'tool') && req.tools.some((t) => t.name === tool))
      return { content: '', tool_calls: [{ id: 'call_0', name: tool, arguments: args }], usage: { input_tokens: 3, output_tokens: 4 } };
    return { content: `${req.agent.seat} done`, usage: { input_tokens: 3, output_tokens: 4 } };
  },
});

let t: InProcess;
let signer: Signer;
let trust: { kid: string; jwk: JsonWebKey }[];
before(async () => {
  t = await inProcessCell({ config: { toolSources: [files] } });
  const k = await generateEd25519();
  const reg = await t.request('POST', `${A}/edge/devices`, { token: t.adminKey, body: { name: 'field', public_jwk: k.publicJwk } });
  assert.equal(reg.status, 201, reg.text);
  signer = signerFromJwk(k.kid, k.privateJwk);
  trust = reg.body.trust.keys;
});
after(() => t?.close());

async function importJournal(text: string) {
  return t.request('POST', `${A}/edge/journals`, {
    token: t.adminKey,
    rawBody: text,
    headers: { 'content-type': 'application/vnd.agent-cell.signed' },
  });
}

test('a crew bundle carries the entries and pins of its MCP tools; the device recompiles the same graph; a forged entry is refused', async () => {
  const d = await crewOnDevice(t, signer.kid, trust, cap(['mcp.files.echo', 'mcp.files.counter', 'calc']));
  const registry = (await t.request('GET', `${A}/ai/tool-registry?limit=200`, { token: t.adminKey })).body;
  const entries = (registry.items ?? registry.tools ?? registry) as { name: string; pin?: string }[];
  const catalogPin = (n: string) => entries.find((e) => e.name === n)!.pin!;
  const carried = d.crew.mcp_tools!;
  assert.deepEqual(
    carried.map((x) => [x.name, x.source, x.tool, x.pin]),
    [
      ['mcp.files.counter', 'files', 'counter', catalogPin('mcp.files.counter')],
      ['mcp.files.echo', 'files', 'echo', catalogPin('mcp.files.echo')],
    ],
  );
  assert.equal(carried[1]!.definition.annotations?.['readOnlyHint'], true, 'the annotations travel: echo reads only');
  assert.deepEqual(d.graph.tool_pins, Object.fromEntries(carried.map((x) => [x.name, x.pin])));
  assert.equal(graphMatches(d.crew), true, 'the device compiles the same graph and hash from what the bundle carries');

  // A bundle whose entry does not match its definition, or the graph's pin, is refused under the signature.
  const k = await generateEd25519();
  const forged = async (crew: CrewContent) =>
    openCrewBundle(
      await buildCrewBundle({
        issuer: 'g',
        signer: signerFromJwk(k.kid, k.privateJwk),
        audience: signer.kid,
        version: 1,
        issuedAt: 0,
        expiresAt: null,
        crew,
        model: null,
      }),
      [{ kid: k.kid, jwk: k.publicJwk }],
    );
  await forged(d.crew); // as issued: it opens
  const changed = structuredClone(d.crew);
  changed.mcp_tools![0]!.definition.description = 'Count a call, and more.';
  await assert.rejects(forged(changed), /pin is not its definition's hash/);
  const repinned = structuredClone(d.crew);
  (repinned.graph as Graph).tool_pins!['mcp.files.echo'] = `sha256:${'1'.repeat(64)}`;
  await assert.rejects(forged(repinned), /not the graph's pin of mcp\.files\.echo/);
  const { mcp_tools: _none, ...older } = d.crew;
  await forged(older); // a bundle without entries (an older cell's) still opens
});

test('a device run that called the stdio server imports; an MCP call the bundle did not pin, or under another pin, is refused naming the record', {
  timeout: 60_000,
}, async () => {
  const d = await crewOnDevice(t, signer.kid, trust, cap(['mcp.files.echo']));
  const imported = deviceMcpTools({
    sources: [files],
    tools: d.crew.mcp_tools!,
    clock: { now: () => 0 },
    log: createLogger({ level: 'error', format: 'json' }),
  });
  try {
    const tools = deviceToolsPort('/nonexistent', DEVICE, { now: () => 0 }, null, [], imported);
    const r = await deviceRun(signer, d.graph, d.graphHash, { model: calling('mcp.files.echo', { text: 'hi' }), tools });
    assert.equal(r.result.outcome, 'completed', JSON.stringify(r.result));
    const call = r.records.find((x) => x.kind === 'step' && x.data?.['tool'] === 'mcp.files.echo')!;
    assert.equal(call.data!['pin'], d.graph.tool_pins!['mcp.files.echo']);
    const ok = await importJournal(await exportRun(signer, r, { crewId: d.crewId }));
    assert.equal(ok.status, 201, ok.text);
  } finally {
    await imported.close();
  }

  // A device that says it called a tool the bundle did not carry, or under another pin, acted without the
  // right to: the cell refuses its journal (the device signs whatever it writes).
  const answer: ToolsPort = {
    describe: (name) => ({ name, description: '', side_effects: false, parameters: { type: 'object' } }),
    call: async () => ({ content: [{ type: 'text', text: 'ok' }] }),
  };
  const other = `sha256:${'2'.repeat(64)}`;
  const doctored = (g: Graph, tool: string): Graph => {
    const x = structuredClone(g);
    for (const s of Object.values(x.seats)) s.authority.allowed_tools = [tool];
    x.tool_pins = { [tool]: other };
    return x;
  };
  for (const [tool, why] of [
    ['mcp.files.counter', /calls mcp\.files\.counter, which the crew bundle did not carry/],
    ['mcp.files.echo', /calls mcp\.files\.echo under sha256:2+, not the crew bundle's pin/],
  ] as const) {
    const r = await deviceRun(signer, doctored(d.graph, tool), d.graphHash, { model: calling(tool, { text: 'x' }), tools: answer });
    const rec = r.records.find((x) => x.kind === 'step' && x.data?.['tool'] === tool)!;
    assert.equal(rec.data!['pin'], other);
    const refused = await importJournal(await exportRun(signer, r, { crewId: d.crewId }));
    assert.equal(refused.status, 403, refused.text);
    assert.equal(refused.body.details.reason, 'journal_tool_unpinned');
    assert.match(refused.body.message, why);
    assert.equal(refused.body.details.seq, rec.seq);
    assert.equal(refused.body.details.step_id, rec.step_id);
    assert.equal(await t.row('SELECT run_id FROM edge_journals WHERE run_id = ?', [r.run.run_id]), undefined, 'nothing stored');
  }
});

test('the cell refuses a crew bundle for a crew whose MCP tools are not all pinned, naming each tool and seat', async () => {
  const d = await crewOnDevice(t, signer.kid, trust, cap(['mcp.files.counter']));
  // The pin goes (as a store copied from elsewhere might lack it): the catalog reads its pins again.
  await t.core.store.write((tx) => tx.run("DELETE FROM tool_pins WHERE name = 'mcp.files.counter'", []));
  const refused = await until('the catalog without the pin', async () => {
    const r = await t.request('POST', `${A}/edge/crew-bundles`, { token: t.adminKey, body: { device_id: signer.kid, crew_id: d.crewId } });
    return r.status === 201 ? undefined : r;
  });
  assert.equal(refused.status, 409, refused.text);
  assert.equal(refused.body.details.reason, 'crew_tools_unpinned');
  assert.deepEqual(
    refused.body.details.tools.map((u: { tool: string; seat: string }) => u.tool),
    ['mcp.files.counter', 'mcp.files.counter'],
  );
  assert.match(refused.body.details.tools[0].why, /no pinned definition/);
});
