// /mcp at the edge, in process: the reference SDK's client lists the device's crew as a tool for a key
// of the bundle that may run it (and nothing for one that may not), calls it offline on the tiny local
// model, and gets the output with a receipt signed by the device key, which verifies offline with the
// key the device publishes and the run's journal. A 401 names the device's protected resource metadata.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { emptyDeviceState } from '../../bundles/accept.ts';
import { verifyReceipt } from '../../core/mcp-receipts/verify.ts';
import { findRuntime } from '../../runtime/local-model.ts';
import { createEdgeApp, type EdgeRuntime } from '../../edge/gateway.ts';
import { mountMcp } from '../../edge/mcp.ts';
import { mountOffline, prepareOffline } from '../../edge/offline.ts';
import { loadKeyBundle } from '../../edge/load.ts';
import { mcpClient, publishedKeys, type FetchLike } from '../helpers/mcp-endpoint.ts';
import { edgeWorld, NARROW_SECRET, SECRET, T0 } from './_edge-fixtures.ts';

let skip: string | false = false;
try {
  findRuntime();
} catch {
  skip = 'edge-runtime/ is not installed (npm install --prefix edge-runtime --omit=optional)';
}

test('an MCP client runs the device crew offline and verifies the receipt with the device key', { skip, timeout: 120_000 }, async () => {
  const w = await edgeWorld({ narrowKey: true });
  try {
    const clock = { now: () => T0 + 1000 };
    let state = emptyDeviceState(w.device.device_id);
    const k = await loadKeyBundle(w.keysPath, w.trust, state, clock.now());
    state = k.state;
    const setup = await prepareOffline({
      dir: w.dir,
      device: w.device,
      trust: w.trust,
      state,
      clock,
      crewBundle: w.crewPath,
      model: w.modelPath,
      modelManifest: w.manifestPath,
    });
    const rt: EdgeRuntime = {
      deviceId: w.device.device_id,
      cellId: 'cell-a',
      region: 'local',
      clock,
      keys: k.keys,
      state: setup.state,
      rate: { capacity: 1000, refillPerSecond: 100 },
      info: setup.info,
    };
    const app = createEdgeApp(rt, (a, guard) => mountMcp(a, guard, rt, mountOffline(a, guard, rt, setup), w.device.public_jwk));
    const fetchIn: FetchLike = async (url, init) =>
      app.request(String(url), init, { incoming: { socket: { remoteAddress: '127.0.0.1' } } } as never);
    const url = 'http://127.0.0.1/mcp';

    const anonymous = await fetchIn(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(anonymous.status, 401);
    assert.match(
      anonymous.headers.get('www-authenticate')!,
      /resource_metadata="http:\/\/127\.0\.0\.1\/\.well-known\/oauth-protected-resource"/,
    );

    const narrow = await mcpClient(fetchIn, url, NARROW_SECRET);
    assert.deepEqual((await narrow.listTools()).tools, [], 'a key that may not run the crew or read runs is shown nothing');
    const denied = await narrow.callTool({ name: 'crew_crw_1', arguments: { input: 'x' } });
    assert.equal(JSON.parse((denied.content as { text: string }[])[0]!.text).details.required_permission, 'agent_teams.write');

    const c = await mcpClient(fetchIn, url, SECRET);
    const names = (await c.listTools()).tools.map((t) => t.name).sort();
    assert.deepEqual(names, ['crew_crw_1', 'journal_verify', 'run_status']);
    const progress: string[] = [];
    const r = await c.callTool({ name: 'crew_crw_1', arguments: { input: 'inspect the pump' } }, undefined, {
      onprogress: (p) => progress.push(p.message ?? ''),
    });
    const s = r.structuredContent as { run_id: string; state: string; output: unknown; receipt: { issuer: string; kid: string } };
    assert.equal(s.state, 'completed', JSON.stringify(s));
    assert.ok(
      progress.some((m) => m.startsWith('run_finished ')),
      JSON.stringify(progress),
    );
    assert.equal(s.receipt.issuer, w.device.device_id);
    assert.equal(s.receipt.kid, w.device.device_id);
    const journal = (await (
      await fetchIn(`http://127.0.0.1/api/public/v1/admin/jobs/runs/${s.run_id}/journal`, {
        headers: { authorization: `Bearer ${SECRET}` },
      })
    ).json()) as {
      records: never[];
    };
    const keys = await publishedKeys(fetchIn, 'http://127.0.0.1');
    const v = await verifyReceipt(s.receipt, keys, { output: s.output, journal: journal.records });
    assert.equal(v.ok, true, JSON.stringify(v));
    const j = (await c.callTool({ name: 'journal_verify', arguments: { run_id: s.run_id } })).structuredContent as { ok: boolean };
    assert.equal(j.ok, true);
    const status = (await c.callTool({ name: 'run_status', arguments: { run_id: s.run_id } })).structuredContent as { state: string };
    assert.equal(status.state, 'completed');
    await c.close();
  } finally {
    rmSync(w.dir, { recursive: true, force: true });
  }
});
