// A device's side of a journal import, without the device program: the cell's crew carried in a crew
// bundle, a run of its graph on core's engine with a scripted model (as the edge runs it), the journal
// signed by the device key, and the export the device would write. For the cell's import tests.
import assert from 'node:assert/strict';
import { openCrewBundle, type CrewContent } from '../../bundles/crew-bundle.ts';
import { buildJournalExport } from '../../bundles/journal-export.ts';
import { newEdgeRun } from '../../bundles/run-id.ts';
import type { Signer } from '../../bundles/codec.ts';
import { contentHash } from '../../core/canonical.ts';
import { runGraph } from '../../core/engine/run.ts';
import type { EnginePorts, Graph, ModelPort, RunResult, ToolsPort } from '../../core/engine/types.ts';
import { recordHash } from '../../core/journal/hash.ts';
import { memoryJournal } from '../../core/journal/memory.ts';
import { journalDecisions } from '../../edge/approvals.ts';
import type { JournalKind, JournalRecord } from '../../core/journal/record.ts';
import type { InProcess } from '../helpers/inproc.ts';

const A = '/api/public/v1/admin';
const T = `${A}/agent-teams`;

async function must(t: InProcess, method: string, path: string, body?: unknown): Promise<any> {
  const r = await t.request(method, path, { token: t.adminKey, ...(body !== undefined ? { body } : {}) });
  assert.ok(r.status >= 200 && r.status < 300, `${method} ${path} -> ${r.status} ${r.text}`);
  return r.body;
}

/** A two-seat sequential crew of the cell, carried to `deviceId` in a crew bundle: the graph the device runs. */
export async function crewOnDevice(
  t: InProcess,
  deviceId: string,
  trust: { kid: string; jwk: JsonWebKey }[],
  cap: Record<string, unknown> = { allowed_tools: [], permission_mode: 'auto', clearance_level: 0 },
  /** More of the formation (its `pre` and `post` stages). */
  formation: Record<string, unknown> = {},
): Promise<{ crewId: string; graph: Graph; graphHash: string; workspaceId: string | null; crew: CrewContent }> {
  const f = await must(t, 'POST', `${T}/formations`, { name: `field-${Math.random().toString(16).slice(2, 8)}`, ...formation });
  const assignments: Record<string, string> = {};
  for (const role of ['inspector', 'reviewer']) {
    const b = await must(t, 'POST', `${T}/formations/${f.formation_id}/billets`, {
      role_label: role,
      required_skills: [],
      authority_cap: cap,
    });
    const a = await must(t, 'POST', `${T}/agents`, { source: 'scratch', role_label: role, authority_template: cap });
    assignments[b.billet_id] = a.agent_id;
  }
  const crew = await must(t, 'POST', `${T}/crews`, { formation_id: f.formation_id, assignments });
  const bundle = await t.request('POST', `${A}/edge/crew-bundles`, {
    token: t.adminKey,
    body: { device_id: deviceId, crew_id: crew.crew_id },
  });
  assert.equal(bundle.status, 201, bundle.text);
  const opened = await openCrewBundle(bundle.text, trust);
  const c = opened.payload.crew;
  return { crewId: crew.crew_id, graph: c.graph as Graph, graphHash: c.graph_hash, workspaceId: c.workspace_id ?? null, crew: c };
}

export interface DeviceRun {
  run: { run_id: string; run_nonce: string };
  records: JournalRecord[];
  values: Record<string, unknown>;
  result: RunResult;
}

/** A scripted model: every call answers `seat says <input>`, with usage. */
export const echoModel: ModelPort = {
  async complete(req) {
    const last = req.messages.at(-1)?.content ?? '';
    return { content: `${req.agent.seat} says ${String(last).slice(0, 40)}`, usage: { input_tokens: 3, output_tokens: 4 } };
  },
};

/**
 * Runs `graph` as a device would (device-signed journal, a budget that always grants), optionally as a
 * fork of `parent` at its record `at` (a `forked` record, then copies of the parent's reused steps).
 */
export async function deviceRun(
  signer: Signer,
  graph: Graph,
  graphHash: string,
  o: {
    input?: unknown;
    model?: ModelPort;
    /** The device's tools (edge/tools.ts); none by default. */
    tools?: ToolsPort;
    run?: { run_id: string; run_nonce: string };
    fork?: { parent: DeviceRun; at: number; hash?: string };
  } = {},
): Promise<DeviceRun> {
  const run = o.run ?? (await newEdgeRun(signer.kid));
  const j = memoryJournal(run.run_id, signer);
  const at = 1_767_225_600_000;
  if (o.fork) {
    const p = o.fork.parent;
    const point = p.records[o.fork.at - 1]!;
    const none = contentHash(null);
    await j.port.append(
      {
        step_id: 'run',
        kind: 'forked',
        graph_hash: graphHash,
        input_hash: none,
        output_hash: none,
        at,
        data: { from: { run_id: p.run.run_id, seq: point.seq, record_hash: o.fork.hash ?? recordHash(point) }, step_id: point.step_id },
      },
      { input: null, output: null },
    );
    for (const r of p.records.filter((x) => x.seq < o.fork!.at && x.kind === 'step' && !x.step_id.startsWith(point.step_id))) {
      await j.port.append(
        {
          step_id: r.step_id,
          kind: 'step',
          graph_hash: graphHash,
          input_hash: r.input_hash,
          output_hash: r.output_hash,
          at,
          data: { ...(r.data ?? {}), reused: { run_id: p.run.run_id, seq: r.seq, record_hash: recordHash(r) } },
        },
        { input: p.values[r.input_hash], output: p.values[r.output_hash] },
      );
    }
  }
  const ports: EnginePorts = {
    model: o.model ?? echoModel,
    ...(o.tools ? { tools: o.tools } : {}),
    clock: { now: () => at },
    budget: {
      hasLedger: async () => true,
      reserve: async (_a, amount) => ({ ok: true, reservation_id: 'r', amount }),
      commit: async () => {},
    },
    journal: j.port,
    recorded: j.recorded,
    attempts: j.attempts,
  };
  const result = await runGraph(graph, o.input ?? 'inspect the pump', ports, {
    run_id: run.run_id,
    graph_hash: graphHash,
    requester: 'prn_device_user',
  });
  return { run, records: j.records, values: Object.fromEntries(j.blobs), result };
}

/** The signed export of a device run (its records and outcome as given: a test may change either). */
export function exportRun(
  signer: Signer,
  r: DeviceRun,
  o: { records?: JournalRecord[]; outcome?: string; crewId?: string; audience?: string } = {},
): Promise<string> {
  const records = o.records ?? r.records;
  return buildJournalExport({
    deviceId: signer.kid,
    signer,
    audience: o.audience ?? 'cell-test',
    exportedAt: 5000,
    run: { ...r.run, crew_id: o.crewId ?? 'crew_1', graph_hash: records[0]!.graph_hash, outcome: o.outcome ?? r.result.outcome },
    records,
    values: r.values,
  });
}

/**
 * A device run of `graph` requested by `requester`: it waits on its approval, `deciders` decide it (each an
 * `approval_received` record as edge serve writes it, judged with key bundle `bundle`), and it runs on.
 * (`o.step`: the approval's step id, default `pre:0`; `o.model`, `o.tools`: the device's, as deviceRun takes them.)
 */
export async function approvedRun(
  signer: Signer,
  graph: Graph,
  graphHash: string,
  requester: string,
  deciders: string[],
  bundle: number,
  o: { model?: ModelPort; tools?: ToolsPort; step?: string; input?: unknown } = {},
): Promise<DeviceRun> {
  const STEP = o.step ?? 'pre:0';
  const AT = 1_767_225_600_000;
  const run = await newEdgeRun(signer.kid);
  const j = memoryJournal(run.run_id, signer);
  let asked: string | null = null;
  const ports: EnginePorts = {
    model: o.model ?? echoModel,
    ...(o.tools ? { tools: o.tools } : {}),
    clock: { now: () => AT },
    budget: {
      hasLedger: async () => true,
      reserve: async (_a, amount) => ({ ok: true, reservation_id: 'r', amount }),
      commit: async () => {},
    },
    approvals: {
      decisions: async (stepId) => journalDecisions(j.records, stepId),
      request: async (_s, ask) => {
        asked = ask.input_hash;
      },
    },
    journal: j.port,
    recorded: j.recorded,
    attempts: j.attempts,
  };
  const opts = { run_id: run.run_id, graph_hash: graphHash, requester };
  const first = await runGraph(graph, o.input ?? 'open valve 3', ports, opts);
  assert.equal(first.outcome, 'waiting', JSON.stringify(first));
  const none = contentHash(null);
  for (const by of deciders) {
    await j.port.append(
      {
        step_id: STEP,
        kind: 'approval_received' as JournalKind,
        graph_hash: graphHash,
        input_hash: none,
        output_hash: none,
        at: AT,
        data: { by, chain: [by], decision: 'approve', comment: null, input_hash: asked!, key_bundle: bundle },
      },
      { input: null, output: null },
    );
  }
  const result = await runGraph(graph, o.input ?? 'open valve 3', ports, opts);
  return { run, records: j.records, values: Object.fromEntries(j.blobs), result } satisfies DeviceRun;
}
