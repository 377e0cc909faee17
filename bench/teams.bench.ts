/**
 * Agent Teams at the cell level (issue 5): orchestration overhead per step
 * with a model that answers instantly, the journal durable (the real cell
 * store: each record committed and fsync'd before the next step) and signed
 * (the cell's Ed25519 identity key), in steps/s (target >= 1,000), and the
 * ratio to the same run with journaling off.
 *
 * Journaling cannot be switched off at the cell level (driveRun always binds
 * the durable journal), so "journaling off" is core's runGraph on the same
 * compiled graph with the same instant model and budget ports and no journal
 * port. What is compared, line by line:
 *  1. cell: the runs module's driveRun (cell/runs/drive.ts) of a 250-seat sequential graph, one
 *     run at a time: real store, appendJournal (seal + sign + durable commit +
 *     publish), recorded-step lookups, run state rows; model and budget ports
 *     in memory (instant). This is the headline figure.
 *  2. the same with 8 runs at once (durable commits of concurrent runs share
 *     fsyncs: the store's group commit).
 *  3. core runGraph, same graph and ports, no journal (journaling off): the
 *     ratio 1/3 is the cost of the durable signed journal per step.
 *  4. core runGraph with core's in-memory signed journal (signing and hashing
 *     without the store): separates signing from durability.
 *  5. the whole crew path for reference: POST crews/{id}/runs on the admin API
 *     (in-process), a loopback HTTP model server answering at once
 *     (test/fixtures/openai-server.ts), the durable budget ledger (reserve and
 *     commit per model call, two more durable writes per step).
 * The figure checked against the target is 1. Every journal written by 1 and 5
 * is verified against the cell's published keys afterwards.
 */
import { rmSync } from 'node:fs';
import type { RunningCell } from '../cell/server.ts';
import { compileFormation } from '../core/compiler/compile.ts';
import type { BilletInput } from '../core/compiler/types.ts';
import { generateEd25519, signEd25519 } from '../core/crypto/ed25519.ts';
import { runGraph } from '../core/engine/run.ts';
import type { EnginePorts, Graph } from '../core/engine/types.ts';
import { memoryJournal } from '../core/journal/memory.ts';
import { verifyJournal } from '../core/journal/verify.ts';
import { startOpenAIServer } from '../test/fixtures/openai-server.ts';
import { bootInProcessCell } from './_inproc.ts';
import { fmt } from './_util.ts';

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const SEATS = 250;

const boot = () => bootInProcessCell('bench-teams', { rate: { capacity: 1_000_000, refillPerSecond: 1_000_000 } }, { listen: false });

function pipeline(seats: number): { graph: Graph; graphHash: string } {
  const billets: BilletInput[] = Array.from({ length: seats }, (_, i) => ({
    id: `s${String(i).padStart(4, '0')}`,
    role_label: 'worker',
    position: i,
    authority_cap: { clearance_level: 0 },
  }));
  const bindings = Object.fromEntries(billets.map((b) => [b.id, { agent_id: `agt_${b.id}` }]));
  const c = compileFormation({ name: 'pipeline', coordination_policy: 'sequential', limits: { max_steps: 10_000 } }, billets, bindings);
  if (!c.ok) throw new Error(c.message);
  return { graph: c.graph, graphHash: c.graphHash };
}

/** Instant model and in-memory budget (the same for the cell and core runs). */
const instantPorts = () => ({
  model: { complete: async () => ({ content: 'ok', usage: { input_tokens: 1, output_tokens: 1 } }) },
  budget: { hasLedger: async () => true, reserve: async () => ({ ok: true as const, reservation_id: 'r' }), commit: async () => undefined },
});

async function verifyCellJournals(c: RunningCell, runIds: string[]): Promise<number> {
  const keys = new Map(c.modules.iam.iam.identityKeys().map((k) => [k.kid, k.jwk]));
  let n = 0;
  for (const id of runIds) {
    const recs = await c.modules.runs.runs.readJournal(id);
    const v = await verifyJournal(recs, (kid) => keys.get(kid));
    if (!v.ok) throw new Error(`journal of ${id} does not verify: ${JSON.stringify(v)}`);
    n += recs.length;
  }
  return n;
}

/** One cell run (driveRun, durable signed journal): steps, records and seconds. */
async function cellRun(c: RunningCell, g: { graph: Graph; graphHash: string }): Promise<{ runId: string; steps: number; seconds: number }> {
  const runs = c.modules.runs.runs;
  const runId = await c.core.store.write((tx) =>
    runs.createRunTx(tx, {
      kind: 'job',
      job_type: 'agent',
      requester: 'usr_bench',
      spec: {},
      graph_hash: g.graphHash,
      at: c.core.clock.now(),
    }),
  );
  const t = performance.now();
  const r = await runs.driveRun(runId, g.graph, instantPorts(), 'go', { requester: 'usr_bench', graphHash: g.graphHash });
  const seconds = (performance.now() - t) / 1000;
  if (r.state !== 'completed' || !r.result) throw new Error(`cell run ended ${r.state}`);
  return { runId, steps: r.result.steps, seconds };
}

async function coreRun(
  g: { graph: Graph; graphHash: string },
  journal: 'off' | 'memory',
  signer?: { kid: string; sign(b: Uint8Array): Promise<Uint8Array> | Uint8Array },
): Promise<number> {
  const ports: EnginePorts = { clock: { now: () => 1_700_000_000_000 }, ...instantPorts() };
  if (journal === 'memory') {
    const j = memoryJournal('run_bench', signer as never);
    ports.journal = j.port;
    ports.recorded = j.recorded;
  }
  const t = performance.now();
  const r = await runGraph(g.graph, 'go', ports, { run_id: 'run_bench', requester: 'usr_bench', graph_hash: g.graphHash });
  if (r.outcome !== 'completed') throw new Error(`${r.outcome} ${r.reason}`);
  return r.steps / ((performance.now() - t) / 1000);
}

async function crewPath(
  c: RunningCell,
  key: string,
  seats: number,
): Promise<{ rate: number; steps: number; runId: string; modelCalls: number }> {
  const ai = await startOpenAIServer({
    apiKey: 'sk-bench',
    respond: () => ({ content: 'ok', usage: { prompt_tokens: 1, completion_tokens: 1 } }),
  });
  try {
    const req = async (method: string, path: string, body?: unknown): Promise<any> => {
      const res = await c.app.request(
        path,
        {
          method,
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        },
        { incoming: { socket: { remoteAddress: '127.0.0.1' } } } as never,
      );
      const text = await res.text();
      if (res.status >= 300) throw new Error(`${method} ${path} -> ${res.status} ${text}`);
      return JSON.parse(text);
    };
    const A = '/api/public/v1/admin';
    const T = `${A}/agent-teams`;
    const s = await req('POST', `${A}/secrets`, { name: 'bench-key', value: 'sk-bench' });
    await req('POST', `${A}/ai/model-providers`, {
      provider_type: 'openai-compatible',
      default_model: 'fake',
      base_url: `${ai.url}/v1`,
      api_key_secret_id: s.secret_id,
      max_retries: 0,
    });
    const f = await req('POST', `${T}/formations`, {
      name: 'bench-crew',
      coordination_policy: 'sequential',
      limits: { max_steps: 10_000 },
    });
    const assignments: Record<string, string> = {};
    for (let i = 0; i < seats; i++) {
      const b = await req('POST', `${T}/formations/${f.formation_id}/billets`, {
        role_label: `w${i}`,
        required_skills: [],
        authority_cap: { allowed_tools: [], clearance_level: 0 },
      });
      const a = await req('POST', `${T}/agents`, {
        source: 'scratch',
        role_label: `w${i}`,
        system_prompt: 'work',
        authority_template: { allowed_tools: [], clearance_level: 0 },
      });
      await req('POST', `${T}/agents/${a.agent_id}/budget-ledger`, { budget_limit: 1_000_000_000 });
      assignments[b.billet_id] = a.agent_id;
    }
    const crew = await req('POST', `${T}/crews`, { formation_id: f.formation_id, assignments });
    const before = ai.requests.length;
    const t = performance.now();
    const run = await req('POST', `${T}/crews/${crew.crew_id}/runs`, { input: 'go' });
    await c.modules.teams.teams.settled(run.run_id);
    const seconds = (performance.now() - t) / 1000;
    const done = (await c.modules.runs.runs.getRun(run.run_id))!;
    if (done.state !== 'completed') throw new Error(`crew run ended ${done.state}: ${JSON.stringify(done.error)}`);
    const steps = (await c.modules.runs.runs.readJournal(run.run_id)).filter((r) => r.kind === 'step').length;
    return { rate: steps / seconds, steps, runId: run.run_id, modelCalls: ai.requests.length - before };
  } finally {
    await ai.close();
  }
}

export default async function run(): Promise<void> {
  const { c, key, dir } = await boot();
  try {
    const g = pipeline(SEATS);
    // Warm up (JIT, prepared statements, the signing key).
    await cellRun(c, g);
    await coreRun(g, 'off');

    const cellRates: number[] = [];
    const runIds: string[] = [];
    let steps = 0;
    const fsync0 = (c.core.store as unknown as { stats?: { fsyncs: number } }).stats?.fsyncs;
    for (let i = 0; i < 3; i++) {
      const r = await cellRun(c, g);
      cellRates.push(r.steps / r.seconds);
      runIds.push(r.runId);
      steps = r.steps;
    }
    const fsync1 = (c.core.store as unknown as { stats?: { fsyncs: number } }).stats?.fsyncs;
    const cellRate = median(cellRates);

    const K = 8;
    const t = performance.now();
    const conc = await Promise.all(Array.from({ length: K }, () => cellRun(c, g)));
    const concRate = conc.reduce((n, r) => n + r.steps, 0) / ((performance.now() - t) / 1000);
    runIds.push(...conc.map((r) => r.runId));

    const offRates: number[] = [];
    const memRates: number[] = [];
    const kp = await generateEd25519();
    const signer = { kid: kp.kid, sign: (b: Uint8Array) => signEd25519(kp.privateJwk, b) };
    for (let i = 0; i < 3; i++) {
      offRates.push(await coreRun(g, 'off'));
      memRates.push(await coreRun(g, 'memory', signer));
    }
    const offRate = median(offRates);
    const memRate = median(memRates);

    const crew = await crewPath(c, key, 50);
    runIds.push(crew.runId);
    const verified = await verifyCellJournals(c, runIds);

    const fsyncNote = fsync0 !== undefined && fsync1 !== undefined ? `, ${fmt((fsync1 - fsync0) / (3 * steps), 2)} fsyncs/step` : '';
    console.log(
      `  1. cell steps/s, instant model, journal durable (fsync'd store) and signed (cell Ed25519 key), one run at a time: ${fmt(cellRate)} (${steps} steps/run, median of 3${fsyncNote}; target >= 1,000: ${cellRate >= 1000 ? 'met' : 'NOT met'})`,
    );
    console.log(`  2. same, ${K} runs at once (group commit across runs): ${fmt(concRate)} steps/s aggregate`);
    console.log(
      `  3. journaling off (core runGraph, same graph and ports, no journal port): ${fmt(offRate)} steps/s; ratio off/on ${fmt(offRate / cellRate, 2)}x (the durable signed journal costs ${fmt(1000 / cellRate - 1000 / offRate, 3)} ms/step)`,
    );
    console.log(
      `  4. core runGraph with the in-memory signed journal (signing, no store): ${fmt(memRate)} steps/s; ratio off/memory ${fmt(offRate / memRate, 2)}x`,
    );
    console.log(
      `  5. whole crew path for reference (admin API, loopback HTTP model, durable budget ledger reserve+commit per call), ${crew.steps} model steps: ${fmt(crew.rate)} steps/s (${crew.modelCalls} model calls)`,
    );
    console.log(`  journals verified against the cell's published keys: ${fmt(verified)} records, all ok`);
  } finally {
    await c.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run();
