// The crew bundle's MCP tools at the cell (cell/edge/crew-source.ts, bundles/crew-bundle.ts, cell/edge/judge-mcp-calls.ts):
// a crew bundle carries the catalog entry and pin of every MCP tool a seat can call, the same pins its graph (and so
// its hash) carries, and a device recompiles the same graph; a verifier refuses an entry that does not match its
// definition or the graph; the cell refuses to issue a bundle for a crew whose MCP tools are not all pinned.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { buildCrewBundle, openCrewBundle, type CrewContent } from '../../bundles/crew-bundle.ts';
import { generateEd25519, signerFromJwk, type Signer } from '../../bundles/codec.ts';
import type { Graph } from '../../core/engine/types.ts';
import { graphMatches } from '../../edge/load.ts';
import { inProcessCell, type InProcess } from '../helpers/inproc.ts';
import { until } from '../helpers/until.ts';
import { crewOnDevice } from './_device-run.ts';

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
