/**
 * Engine benchmarks (issue 5), each against a baseline measured in the same run:
 *  1. compile a 10,000-billet manager-delegates formation (target < 100 ms),
 *     baseline: JSON.stringify + JSON.parse of the same input;
 *  2. orchestration overhead per step with a model that answers instantly and a
 *     signed, hash-chained in-memory journal (target >= 1,000 steps/s), and the
 *     ratio to the same run with journaling off;
 *  3. journal verification (target >= 5,000 records/s), baseline: sequential
 *     WebCrypto Ed25519 verifications of the same number of signatures.
 */
import { compileFormation } from '../core/compiler/compile.ts';
import type { BilletInput } from '../core/compiler/types.ts';
import { generateEd25519, signEd25519, verifyEd25519 } from '../core/crypto/ed25519.ts';
import { runGraph } from '../core/engine/run.ts';
import type { EnginePorts } from '../core/engine/types.ts';
import { memoryJournal } from '../core/journal/memory.ts';
import { signingBytes } from '../core/journal/record.ts';
import { verifyJournal } from '../core/journal/verify.ts';
import { fromB64url } from '../core/canonical.ts';

const fmt = (n: number, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function tree(n: number, fanout: number): BilletInput[] {
  const out: BilletInput[] = [];
  for (let i = 0; i < n; i++) {
    out.push({
      id: `b${String(i).padStart(5, '0')}`,
      role_label: `role ${i}`,
      required_skills: ['skill:work'],
      reports_to: i === 0 ? null : `b${String(Math.floor((i - 1) / fanout)).padStart(5, '0')}`,
      position: i,
      authority_cap: { allowed_tools: ['calc', 'kv.get'], clearance_level: 1 },
    });
  }
  return out;
}

async function compileBench(): Promise<void> {
  const billets = tree(10_000, 10);
  const f = { name: 'big', coordination_policy: 'manager-delegates' as const };
  // The cell and the edge pass node:crypto's SHA-256 (same hashes as the pure-JS default).
  const { createHash } = await import('node:crypto');
  const native = { sha256: (b: Uint8Array) => new Uint8Array(createHash('sha256').update(b).digest()) };
  compileFormation(f, billets, undefined, native); // warm up
  const times: number[] = [];
  const pure: number[] = [];
  const base: number[] = [];
  let nodes = 0;
  for (let i = 0; i < 5; i++) {
    let t = performance.now();
    const r = compileFormation(f, billets, undefined, native);
    times.push(performance.now() - t);
    t = performance.now();
    compileFormation(f, billets);
    pure.push(performance.now() - t);
    if (!r.ok) throw new Error(r.message);
    nodes = r.graph.nodes.length;
    t = performance.now();
    JSON.parse(JSON.stringify({ f, billets }));
    base.push(performance.now() - t);
  }
  const ms = median(times);
  const best = Math.min(...times);
  console.log(
    `  compile 10,000-billet manager-delegates: ${fmt(ms, 1)} ms median, ${fmt(best, 1)} ms best of 5 (${fmt(nodes)} nodes, graph hash included; target < 100 ms: ${ms < 100 ? 'met' : best < 100 ? 'met by the best run only (noisy machine)' : 'NOT met'})`,
  );
  console.log(`    with the pure-JS SHA-256 (core default): ${fmt(median(pure), 1)} ms median`);
  console.log(`    baseline JSON round trip of the input: ${fmt(median(base), 1)} ms; ratio ${fmt(ms / median(base), 1)}x`);
}

async function stepsBench(): Promise<{
  records: Awaited<ReturnType<typeof memoryJournal>>['records'];
  publicJwk: JsonWebKey;
  kid: string;
}> {
  const seats = 250;
  const billets: BilletInput[] = Array.from({ length: seats }, (_, i) => ({
    id: `s${String(i).padStart(4, '0')}`,
    role_label: 'worker',
    position: i,
    authority_cap: { clearance_level: 0 },
  }));
  const bindings = Object.fromEntries(billets.map((b) => [b.id, { agent_id: `agt_${b.id}` }]));
  const c = compileFormation({ name: 'pipeline', coordination_policy: 'sequential', limits: { max_steps: 10_000 } }, billets, bindings);
  if (!c.ok) throw new Error(c.message);
  const kp = await generateEd25519();
  const signer = { kid: kp.kid, sign: (b: Uint8Array) => signEd25519(kp.privateJwk, b) };
  const base = (): EnginePorts => ({
    clock: { now: () => 1_700_000_000_000 },
    model: { complete: async () => ({ content: 'ok', usage: { input_tokens: 1, output_tokens: 1 } }) },
    budget: { hasLedger: async () => true, reserve: async () => ({ ok: true, reservation_id: 'r' }), commit: async () => undefined },
  });
  const run = async (journal: boolean) => {
    const ports = base();
    let j: ReturnType<typeof memoryJournal> | undefined;
    if (journal) {
      j = memoryJournal('run_bench', signer);
      ports.journal = j.port;
      ports.recorded = j.recorded;
    }
    const t = performance.now();
    const r = await runGraph(c.graph, 'go', ports, { run_id: 'run_bench', requester: 'usr_bench', graph_hash: c.graphHash });
    const s = (performance.now() - t) / 1000;
    if (r.outcome !== 'completed') throw new Error(`${r.outcome} ${r.reason}`);
    return { rate: r.steps / s, steps: r.steps, records: j?.records ?? [] };
  };
  await run(true); // warm up
  await run(false);
  const on: number[] = [];
  const off: number[] = [];
  let last: Awaited<ReturnType<typeof run>> | undefined;
  for (let i = 0; i < 3; i++) {
    last = await run(true);
    on.push(last.rate);
    off.push((await run(false)).rate);
  }
  const a = median(on);
  const b = median(off);
  console.log(
    `  steps/s, instant model, signed durable-in-memory journal: ${fmt(a)} (${last!.steps} steps/run; target >= 1,000: ${a >= 1000 ? 'met' : 'NOT met'})`,
  );
  console.log(`    journaling off: ${fmt(b)} steps/s; overhead ratio off/on ${fmt(b / a, 2)}x`);
  return { records: last!.records, publicJwk: kp.publicJwk, kid: kp.kid };
}

async function verifyBench(j: {
  records: Awaited<ReturnType<typeof stepsBench>>['records'];
  publicJwk: JsonWebKey;
  kid: string;
}): Promise<void> {
  // Grow the sample: verify the same journal several times.
  const keys = (kid: string) => (kid === j.kid ? j.publicJwk : undefined);
  await verifyJournal(j.records, keys);
  const rounds = 5;
  let t = performance.now();
  for (let i = 0; i < rounds; i++) {
    const v = await verifyJournal(j.records, keys);
    if (!v.ok) throw new Error(v.reason);
  }
  const rate = (rounds * j.records.length) / ((performance.now() - t) / 1000);
  t = performance.now();
  for (const r of j.records) await verifyEd25519(j.publicJwk, signingBytes(r), fromB64url(r.sig));
  const seq = j.records.length / ((performance.now() - t) / 1000);
  console.log(
    `  journal verification: ${fmt(rate)} records/s over ${j.records.length} records x ${rounds} (target >= 5,000: ${rate >= 5000 ? 'met' : 'NOT met'})`,
  );
  console.log(`    baseline sequential WebCrypto verify alone: ${fmt(seq)} sig/s; ratio ${fmt(rate / seq, 2)}x`);
}

export default async function run(): Promise<void> {
  await compileBench();
  const j = await stepsBench();
  await verifyBench(j);
}

if (import.meta.url === `file://${process.argv[1]}`) await run();
