// The device's tool catalog (edge/tools.ts): calc, clock.now, kv.get/kv.put on the device's own storage, judged
// from the bundle's seat authority by the same code as the cell's catalog (core/catalog/builtin.ts); a crew whose
// tools the device cannot honour is refused before its run starts, naming them; a crew made to call a tool runs
// offline on the local model and its call is journaled.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isEngineRefusal } from '../../core/engine/refusal.ts';
import type { Graph, SeatAuthority, ToolCallContext } from '../../core/engine/types.ts';
import { toolRegistryView } from '../../cell/tools/catalog.ts';
import { findRuntime } from '../../runtime/local-model.ts';
import { adoptKv, deviceToolsPort, KV_FILE, KvNotSealed, unhonouredTools } from '../../edge/tools.ts';
import { compiledCrew, edgeWorld, testDevice } from './_edge-fixtures.ts';
import { start } from './_offline-app.ts';

const DEVICE = await testDevice();

let skip: string | false = false;
try {
  findRuntime();
} catch {
  skip = 'edge-runtime/ is not installed (make edge-runtime)';
}

const T = Date.UTC(2026, 5, 1, 12);
const FULL: SeatAuthority = {
  allowed_tools: ['calc', 'clock.now', 'kv.get', 'kv.put'],
  clearance_level: 2,
  permission_mode: 'auto',
  data_grant_ids: ['kv:ws_1'],
  egress_allowlist: ['kv:ws_1'],
  compartments: ['ops'],
  governing_contract_ids: [],
  budget_ceiling: null,
};
const at = (authority: SeatAuthority): ToolCallContext => ({ run_id: 'r', step_id: 's', seat: 'a', agent_id: 'agt_a', authority });
async function refusal(p: Promise<unknown>): Promise<{ reason: string; details: unknown }> {
  try {
    await p;
  } catch (e) {
    if (isEngineRefusal(e)) return { reason: e.reason, details: e.details };
    throw e;
  }
  throw new Error('not refused');
}

test('calc, clock.now and kv on device storage, judged as at the cell: grants, clearance, compartments', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'edge-tools-'));
  try {
    const port = deviceToolsPort(dir, DEVICE, { now: () => T }, 'ws_1');
    assert.deepEqual(await port.call('calc', { expression: '(2+3)*4' }, at(FULL)), { value: 20 });
    assert.deepEqual(await port.call('clock.now', {}, at(FULL)), { epoch_ms: T, iso: new Date(T).toISOString() });
    // Bad arguments go back to the model, as at the cell.
    assert.equal(((await port.call('calc', { expression: '2+' }, at(FULL))) as { error: string }).error, 'invalid_request');

    assert.deepEqual(
      await port.call('kv.put', { key: 'pump/7', value: { bar: 3.2 }, classification: 2, compartments: ['ops'] }, at(FULL)),
      {
        ok: true,
        key: 'pump/7',
        compartments: ['ops'],
      },
    );
    // Device-local storage: another port on the same directory (a restart) reads it back.
    const again = deviceToolsPort(dir, DEVICE, { now: () => T }, 'ws_1');
    assert.deepEqual(await again.call('kv.get', { key: 'pump/7' }, at(FULL)), { found: true, value: { bar: 3.2 } });
    assert.deepEqual(await again.call('kv.get', { key: 'nothing' }, at(FULL)), { found: false });
    // Another workspace's crew does not see it.
    const other = deviceToolsPort(dir, DEVICE, { now: () => T }, 'ws_2');
    assert.deepEqual(await other.call('kv.get', { key: 'pump/7' }, at({ ...FULL, data_grant_ids: ['kv:*'] })), { found: false });

    assert.equal((await refusal(port.call('kv.get', { key: 'pump/7' }, at({ ...FULL, data_grant_ids: [] })))).reason, 'data_not_granted');
    assert.equal(
      (await refusal(port.call('kv.get', { key: 'pump/7' }, at({ ...FULL, clearance_level: 1 })))).reason,
      'clearance_insufficient',
    );
    const c = await refusal(port.call('kv.get', { key: 'pump/7' }, at({ ...FULL, compartments: [] })));
    assert.equal(c.reason, 'compartment_not_granted');
    assert.deepEqual((c.details as { missing_compartments: string[] }).missing_compartments, ['ops']);
    assert.equal(
      (await refusal(port.call('kv.put', { key: 'k', value: 1 }, at({ ...FULL, egress_allowlist: [] })))).reason,
      'egress_denied',
    );
    assert.equal(
      (await refusal(port.call('kv.put', { key: 'k', value: 1, classification: 3 }, at(FULL)))).reason,
      'clearance_insufficient',
    );
    // Overwriting a labelled entry needs its labels: refused, and the entry is unchanged.
    const over = await refusal(port.call('kv.put', { key: 'pump/7', value: 'erased' }, at({ ...FULL, compartments: [] })));
    assert.equal(over.reason, 'compartment_not_granted');
    assert.deepEqual(await again.call('kv.get', { key: 'pump/7' }, at(FULL)), { found: true, value: { bar: 3.2 } });
    assert.equal((await refusal(port.call('weather.forecast', { city: 'x' }, at(FULL)))).reason, 'tool_unknown');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the kv file is sealed with the device key: an entry relabelled by hand, another device's file or an unsealed one is not read", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'edge-kv-seal-'));
  try {
    const port = deviceToolsPort(dir, DEVICE, { now: () => T }, 'ws_1');
    await port.call('kv.put', { key: 'pump/7', value: 'secret', classification: 2, compartments: ['ops'] }, at(FULL));
    const path = join(dir, KV_FILE);
    const sealed = readFileSync(path, 'utf8');
    const file = JSON.parse(sealed);
    assert.equal(file.format_version, 2);
    assert.equal(file.device_id, DEVICE.device_id);
    // Lowered by hand to the clearance and compartments of a seat that may not read it: not believed.
    const low = { ...FULL, clearance_level: 0, compartments: [] };
    file.workspaces.ws_1['pump/7'].classification = 0;
    file.workspaces.ws_1['pump/7'].compartments = [];
    writeFileSync(path, JSON.stringify(file));
    await assert.rejects(port.call('kv.get', { key: 'pump/7' }, at(low)), KvNotSealed);
    await assert.rejects(port.call('kv.put', { key: 'other', value: 1 }, at(FULL)), KvNotSealed, 'nor written over');
    // Another device's port on the same file does not believe this device's seal.
    writeFileSync(path, sealed);
    const stranger = deviceToolsPort(dir, await testDevice(), { now: () => T }, 'ws_1');
    await assert.rejects(stranger.call('kv.get', { key: 'pump/7' }, at(FULL)), /not sealed by this device's key/);
    assert.deepEqual(await port.call('kv.get', { key: 'pump/7' }, at(FULL)), { found: true, value: 'secret' });
    // What an older release wrote (format 1, unsealed) is read only once adopted (`edge state adopt`), as it is.
    writeFileSync(path, JSON.stringify({ format_version: 1, workspaces: JSON.parse(sealed).workspaces }));
    await assert.rejects(port.call('kv.get', { key: 'pump/7' }, at(FULL)), /edge state adopt/);
    assert.equal(adoptKv(dir, DEVICE), 1);
    assert.equal(adoptKv(dir, DEVICE), null, 'a sealed file is not adopted again');
    assert.deepEqual(await port.call('kv.get', { key: 'pump/7' }, at(FULL)), { found: true, value: 'secret' });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the device offers the cell's definitions of its tools, and nothing else", () => {
  const port = deviceToolsPort(tmpdir(), DEVICE, { now: () => T }, 'ws_1');
  for (const name of ['calc', 'clock.now', 'kv.get', 'kv.put']) {
    const cell = toolRegistryView().find((t) => t.name === name)!;
    const d = port.describe(name)!;
    assert.deepEqual(
      {
        name: d.name,
        description: d.description,
        side_effects: d.side_effects,
        idempotent: d.idempotent ?? false,
        parameters: d.parameters,
      },
      {
        name: cell.name,
        description: cell.description,
        side_effects: cell.side_effects,
        idempotent: cell.idempotent,
        parameters: cell.parameters,
      },
    );
  }
  // An imported (MCP) tool is not on a device yet.
  assert.equal(port.describe('weather.forecast'), undefined);
});

test('the tools a device cannot honour are named: outside its catalog, kv without a workspace; a call that waits for an approval is honoured', () => {
  const graph = (a: object, b: object = {}) =>
    compiledCrew(16, { a: { authority_cap: a as never }, b: { authority_cap: b as never } }).graph as unknown as Graph;
  assert.deepEqual(unhonouredTools(graph({ allowed_tools: ['calc', 'kv.get'], permission_mode: 'auto' }), 'ws_1'), []);
  assert.deepEqual(
    unhonouredTools(
      graph(
        { allowed_tools: ['calc', 'weather.forecast'], permission_mode: 'auto' },
        { allowed_tools: ['kv.put'], permission_mode: 'auto' },
      ),
      null,
    ).map((u) => [u.seat, u.tool]),
    [
      ['a', 'weather.forecast'],
      ['b', 'kv.put'],
    ],
  );
  // A call that waits for a human approval (`ask`; `auto-read` for a write) waits on the device's approvals port.
  assert.deepEqual(
    unhonouredTools(
      graph({ allowed_tools: ['calc'], permission_mode: 'ask' }, { allowed_tools: ['kv.get', 'kv.put'], permission_mode: 'auto-read' }),
      'ws_1',
    ),
    [],
  );
});

test('a crew whose tools the device cannot honour is refused before its run starts, naming them', { skip, timeout: 60_000 }, async () => {
  const w = await edgeWorld({
    policies: { a: { authority_cap: { allowed_tools: ['weather.forecast', 'calc'], permission_mode: 'auto' } } },
  });
  try {
    const e = await start(w);
    const r = await e.req('POST', '/api/public/v1/admin/agent-teams/crews/crw_1/runs', { input: 'go' });
    assert.equal(r.status, 409, JSON.stringify(r.body));
    assert.equal(r.body.details.reason, 'device_tools_unavailable');
    assert.deepEqual(
      r.body.details.tools.map((u: { tool: string; seat: string }) => [u.seat, u.tool]),
      [['a', 'weather.forecast']],
    );
    assert.match(r.body.message, /weather\.forecast/);
    await e.setup.model?.dispose();
  } finally {
    rmSync(w.dir, { recursive: true, force: true });
  }
});

test('a seat made to call a device tool calls it offline on the local model; the call is journaled, the same each run', {
  skip,
  timeout: 120_000,
}, async () => {
  const w = await edgeWorld({
    maxTokens: 400,
    workspaceId: 'ws_1',
    policies: {
      a: {
        authority_cap: { allowed_tools: ['clock.now', 'kv.put'], permission_mode: 'auto', egress_allowlist: ['kv:ws_1'] },
        tool_choice: { name: 'clock.now' },
      },
    },
  });
  try {
    const e = await start(w);
    const journalOf = async (input: unknown) => {
      const run = await e.runToEnd(input);
      const j = await e.req('GET', `/api/public/v1/admin/jobs/runs/${run.run_id}/journal`);
      assert.equal(j.status, 200, JSON.stringify(j.body));
      return { run, records: j.body.records as { step_id: string; kind: string; data?: any }[] };
    };
    const one = await journalOf('pump 7 reads 3.2 bar');
    const steps = one.records.map((r) => [r.step_id, r.kind, r.data?.tool ?? null]);
    // The forced call is the seat's first act: its first model round answers with it, and the device runs it.
    const first = one.records.find((r) => r.kind === 'step' && r.step_id.startsWith('agent:a/tool/'));
    assert.ok(first, `a tool step of seat a: ${JSON.stringify(steps)}`);
    assert.equal(first.step_id, 'agent:a/tool/0.0');
    assert.equal(first.data.tool, 'clock.now');
    assert.equal(one.run.state, 'completed', JSON.stringify(steps));
    const two = await journalOf('pump 7 reads 3.2 bar');
    assert.deepEqual(
      two.records.map((r) => [r.step_id, r.kind, r.data?.tool ?? null]),
      steps,
      'the same steps and calls on the same input',
    );
    await e.setup.model?.dispose();
  } finally {
    rmSync(w.dir, { recursive: true, force: true });
  }
});
