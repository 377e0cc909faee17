// Back at the cell (issue #39, section 2): a device run whose side-effecting call was lost and resolved on the
// device (an `outcome_resolved` record written by edge/outcomes.ts, as edge serve appends it) imports and replays
// to completion; one whose resolution names an operator the cell's key bundle did not carry with
// agent_teams.write, or a bundle it never issued, or a call that followed a resolution no record holds, is
// refused naming the record. The device's judge refuses a second resolution of the same attempt, and one of a run
// that waits on no lost outcome.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { generateEd25519, signerFromJwk, type Signer } from '../../bundles/codec.ts';
import { newEdgeRun } from '../../bundles/run-id.ts';
import { contentHash } from '../../core/canonical.ts';
import { runGraph } from '../../core/engine/run.ts';
import type { EnginePorts, Graph, ModelPort, ToolsPort } from '../../core/engine/types.ts';
import type { ResolutionAsk } from '../../core/engine/outcome-resolution.ts';
import { ServiceError } from '../../core/errors.ts';
import { memoryJournal } from '../../core/journal/memory.ts';
import type { JournalKind, JournalRecord } from '../../core/journal/record.ts';
import { deviceOutcomesPort, judgeResolution } from '../../edge/outcomes.ts';
import type { RunFile } from '../../edge/runs.ts';
import { inProcessCell } from '../helpers/inproc.ts';
import { crewOnDevice, exportRun, type DeviceRun } from './_device-run.ts';

const A = '/api/public/v1/admin';
const AT = 1_767_225_600_000;
const files = {
  name: 'files',
  command: process.execPath,
  args: [resolve(import.meta.dirname, '../fixtures/mcp-stdio-server.mjs')],
  env: {},
  cwd: null,
  description: 'device files',
  definition_max_age_ms: 0,
  timeout_ms: 10_000,
};
const TOOL = 'mcp.files.counter';

/** Calls counter on its first round, then answers. */
const calling: ModelPort = {
  async complete(req) {
    if (!req.messages.some((m) => m.role === 'tool') && req.tools.some((t) => t.name === TOOL))
      return { content: '', tool_calls: [{ id: 'call_0', name: TOOL, arguments: {} }], usage: { input_tokens: 3, output_tokens: 4 } };
    return { content: `${req.agent.seat} done`, usage: { input_tokens: 3, output_tokens: 4 } };
  },
};

/**
 * A device run whose first call of counter is lost on the wire (the run waits outcome_unknown), resolved by
 * `by` with `ask` (judged by edge/outcomes.ts with key bundle `bundle`), then driven again.
 */
async function resolvedRun(signer: Signer, graph: Graph, graphHash: string, by: string, ask: ResolutionAsk, bundle: number) {
  const run = await newEdgeRun(signer.kid);
  const j = memoryJournal(run.run_id, signer);
  const file = () => ({ records: j.records, values: Object.fromEntries(j.blobs) });
  let issued = 0;
  const tools: ToolsPort = {
    describe: (name) => ({ name, description: '', side_effects: true, parameters: { type: 'object' } }),
    call: async () => {
      if (issued++ === 0) throw new ServiceError('service_unavailable', 'no answer', { details: { reason: 'outcome_unknown' } });
      return { content: [{ type: 'text', text: 'counted' }] };
    },
  };
  const ports: EnginePorts = {
    model: calling,
    tools,
    clock: { now: () => AT },
    budget: {
      hasLedger: async () => true,
      reserve: async (_a, amount) => ({ ok: true, reservation_id: 'r', amount }),
      commit: async () => {},
    },
    journal: j.port,
    recorded: j.recorded,
    attempts: j.attempts,
    intents: j.intents,
    outcomes: deviceOutcomesPort(file),
  };
  const opts = { run_id: run.run_id, graph_hash: graphHash, requester: 'prn_device_user' };
  const first = await runGraph(graph, 'count the pumps', ports, opts);
  assert.equal(first.reason, 'outcome_unknown', JSON.stringify(first));
  const runFile = { state: first.outcome, reason: first.reason, graph_hash: graphHash } as RunFile;
  const stepId = [...j.records].reverse().find((r) => r.kind === 'waiting')!.step_id;
  const rec = judgeResolution(runFile, file(), stepId, by, ask, bundle);
  await j.port.append(
    { ...rec.fields, kind: rec.fields.kind as JournalKind, graph_hash: graphHash, input_hash: contentHash(null), at: AT },
    { input: null, output: rec.value },
  );
  // A run not waiting on a lost outcome has none to resolve; one resolution per attempt, as at the cell.
  assert.throws(
    () => judgeResolution({ ...runFile, reason: 'approval_pending' }, file(), stepId, by, ask, bundle),
    (e: ServiceError) => e.details?.['reason'] === 'no_unknown_outcome',
  );
  assert.throws(
    () => judgeResolution(runFile, file(), stepId, by, ask, bundle),
    (e: ServiceError) => e.details?.['reason'] === 'already_resolved',
  );
  const result = await runGraph(graph, 'count the pumps', ports, opts);
  const done: DeviceRun = { run, records: j.records, values: Object.fromEntries(j.blobs), result };
  return { ...done, issued: () => issued };
}

/** The same journal under a new run id, every record signed again by the device, `change` applied to each. */
async function rewritten(signer: Signer, r: DeviceRun, change: (rec: JournalRecord) => JournalRecord | null): Promise<DeviceRun> {
  const run = await newEdgeRun(signer.kid);
  const j = memoryJournal(run.run_id, signer);
  for (const rec of r.records.map((x) => change(structuredClone(x)))) {
    if (rec === null) continue;
    const { run_id: _r, seq: _s, prev_hash: _p, sig: _g, ...fields } = rec as JournalRecord & { prev_hash?: string; sig?: string };
    await j.port.append(
      { ...fields, kind: rec.kind as JournalKind },
      { input: r.values[rec.input_hash], output: r.values[rec.output_hash] },
    );
  }
  return { run, records: j.records, values: r.values, result: r.result };
}

test('a journal with a lost outcome resolved on the device imports and replays; one the device was not entitled to resolve is refused', {
  timeout: 60_000,
}, async () => {
  const t = await inProcessCell({ config: { toolSources: [files] } });
  try {
    const must = async (path: string, body: unknown) => {
      const r = await t.request('POST', path, { token: t.adminKey, body });
      assert.ok(r.status < 300, r.text);
      return r.body;
    };
    await must(`${A}/roles`, { name: 'field-operator', permissions: ['agent_teams.write', 'agent_teams.read'] });
    await must(`${A}/roles`, { name: 'field-reader', permissions: ['agent_teams.read'] });
    const op = (await must(`${A}/principals`, { kind: 'service', name: 'operator', roles: ['field-operator'] })).id as string;
    const reader = (await must(`${A}/principals`, { kind: 'service', name: 'reader', roles: ['field-reader'] })).id as string;
    const k = await generateEd25519();
    const reg = await t.request('POST', `${A}/edge/devices`, { token: t.adminKey, body: { name: 'field', public_jwk: k.publicJwk } });
    assert.equal(reg.status, 201, reg.text);
    const signer = signerFromJwk(k.kid, k.privateJwk);
    const kb = await t.request('POST', `${A}/edge/key-bundles`, { token: t.adminKey, body: { device_id: k.kid } });
    assert.equal(kb.status, 201, kb.text);
    const version = Number(kb.headers.get('x-bundle-version'));
    const cap = { allowed_tools: [TOOL], permission_mode: 'auto', clearance_level: 0, egress_allowlist: ['mcp:files'] };
    const d = await crewOnDevice(t, k.kid, reg.body.trust.keys, cap);
    const importOf = async (r: DeviceRun) =>
      t.request('POST', `${A}/edge/journals`, {
        token: t.adminKey,
        rawBody: await exportRun(signer, r, { crewId: d.crewId }),
        headers: { 'content-type': 'application/vnd.agent-cell.signed' },
      });

    // retry: the call is issued again (the same step, its effect key); record: it is not, the operator's value is its result.
    for (const ask of [{ resolution: 'retry' }, { resolution: 'record', result: { count: 1 } }] as const) {
      const r = await resolvedRun(signer, d.graph, d.graphHash, op, ask, version);
      assert.equal(r.result.outcome, 'completed', JSON.stringify(r.result));
      // Both seats call counter: the first seat's call once more for a retry, the second seat's once.
      assert.equal(r.issued(), ask.resolution === 'retry' ? 3 : 2);
      const ok = await importOf(r);
      assert.equal(ok.status, 201, `${ask.resolution}: ${ok.text}`);
      const shown = (await t.request('GET', `${A}/edge/journals/${r.run.run_id}`, { token: t.adminKey })).body;
      const records = (shown.records ?? shown.journal?.records) as JournalRecord[];
      assert.deepEqual(
        records.filter((x) => x.kind === 'outcome_resolved').map((x) => [x.data?.['by'], x.data?.['resolution'], x.data?.['key_bundle']]),
        [[op, ask.resolution, version]],
      );
    }

    const honest = await resolvedRun(signer, d.graph, d.graphHash, op, { resolution: 'retry' }, version);
    const resolved = (x: JournalRecord) => x.kind === 'outcome_resolved';
    const forged: [string, (x: JournalRecord) => JournalRecord | null, RegExp, (x: JournalRecord) => boolean][] = [
      [
        'an operator the bundle carried without agent_teams.write',
        (x) => (resolved(x) ? { ...x, data: { ...x.data, by: reader } } : x),
        /is not a principal key bundle \d+ carried with agent_teams.write/,
        resolved,
      ],
      [
        'a key bundle this cell never issued to the device',
        (x) => (resolved(x) ? { ...x, data: { ...x.data, key_bundle: version + 1000 } } : x),
        /issued no key bundle version/,
        resolved,
      ],
      [
        'a call that followed a resolution no record holds',
        (x) => (resolved(x) ? null : x),
        /followed a resolution no outcome_resolved record/,
        (x) => x.kind === 'step' && x.data?.['resolution'] !== undefined,
      ],
    ];
    for (const [what, change, why, named] of forged) {
      const f = await rewritten(signer, honest, change);
      const r = await importOf(f);
      assert.equal(r.status, 403, `${what}: ${r.text}`);
      assert.equal(r.body.details.reason, 'resolution_not_entitled', what);
      assert.match(r.body.message, why, what);
      assert.equal(r.body.details.seq, f.records.find(named)!.seq, what);
    }
    // The honest journal re-signed under a new run id imports: the refusals above are the changes, not the rewrite.
    assert.equal((await importOf(await rewritten(signer, honest, (x) => x))).status, 201);
  } finally {
    await t.close();
  }
});
