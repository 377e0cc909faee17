/**
 * Receipts (issue 41), on an in-process cell (embedded store, this machine's disk):
 *  1. exporting the attestation of a finished 10,000-step run (GET …/attestation: the journal read,
 *     the in-toto statement, the DSSE signature, the inclusion proof and a signed checkpoint), target
 *     ≤ 1 s; and the SCITT form;
 *  2. verifying it with core's verifier (the DSSE signature, the statement, the leaf in the checkpoint),
 *     target ≤ 1 s; and with the command line (`node dist/cell.mjs attestation verify`, process start
 *     included) when dist/cell.mjs is built;
 *  3. the run log's cost, against a step's: a step's journal append (the path the log never touches),
 *     a run's end (its `run_finished` record, now with the queued head), and the sequencer's append per
 *     run head (after the run's end, off its path).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { verifyAttestation } from '../core/attestation/bundle.ts';
import { contentHash } from '../core/canonical.ts';
import { recordHash } from '../core/journal/hash.ts';
import { GENESIS_HASH, type JournalRecord } from '../core/journal/record.ts';
import { sealRecord } from '../core/journal/seal.ts';
import { nativeSha256 } from '../runtime/native-hash.ts';
import { inProcessCell, type InProcess } from '../test/helpers/inproc.ts';
import { fmt } from './_util.ts';

const STEPS = 10_000;
const A = '/api/public/v1/admin';
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function time<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t0 = performance.now();
  const value = await fn();
  return { ms: performance.now() - t0, value };
}

/** A queued job run of this cell, with the graph hash of `graph`. */
function queuedRun(t: InProcess, graph: unknown) {
  return t.core.store.write((tx) =>
    t.modules.runs.runs.recordRunTx(tx, {
      kind: 'job',
      job_type: 'compute',
      workspace_id: 'bench',
      requester: 'usr_bench',
      spec: {},
      graph_hash: contentHash({ g: graph }),
      at: t.clock.now(),
    }),
  );
}

/** A finished job run of `n` journal records (sealed with the cell's key, written in one transaction, then ended). */
export async function bigRun(t: InProcess, n: number): Promise<string> {
  const runs = t.modules.runs.runs;
  const run = await queuedRun(t, 'bench');
  const signer = t.modules.iam.iam.signer();
  const records: JournalRecord[] = [];
  let prev = GENESIS_HASH;
  for (let i = 1; i <= n - 1; i++) {
    const r = await sealRecord(
      {
        run_id: run.run_id,
        seq: i,
        step_id: i === 1 ? 'run' : `agent:seat${i % 50}/model/${i}`,
        kind: i === 1 ? 'run_started' : 'step',
        graph_hash: contentHash({ g: 'bench' }),
        input_hash: contentHash({ in: i }),
        output_hash: contentHash({ out: i }),
        at: t.clock.now() + i,
        ...(i > 1 ? { data: { seat: `seat${i % 50}`, agent_id: `agt_${i % 50}`, usage: 40 } } : {}),
        cell_id: 'cell-test',
        epoch: 0,
      },
      prev,
      signer,
    );
    records.push(r);
    prev = recordHash(r);
  }
  await t.core.store.write(async (tx) => {
    for (let i = 0; i < records.length; i += 500) {
      const part = records.slice(i, i + 500);
      await tx.run(
        `INSERT INTO journal (run_id, seq, kind, record) VALUES ${part.map(() => '(?, ?, ?, ?)').join(', ')}`,
        part.flatMap((r) => [r.run_id, r.seq, r.kind, JSON.stringify(r)]),
      );
    }
  });
  await runs.finishRun(run.run_id, 'completed', { output: { done: true } });
  return run.run_id;
}

export default async function bench(): Promise<void> {
  const t = await inProcessCell();
  const dir = mkdtempSync(join(tmpdir(), 'receipts-bench-'));
  try {
    const runId = await bigRun(t, STEPS);
    const keysDoc = (await t.request('GET', '/.well-known/cell-keys.json')).body as { keys: { kid: string; jwk: JsonWebKey }[] };
    const path = `${A}/jobs/runs/${runId}/attestation`;
    // 1. export (the first request also appends the run's head if the sequencer has not yet).
    const exports: number[] = [];
    let bundle: unknown;
    for (let i = 0; i < 5; i++) {
      const r = await time(() => t.request('GET', path, { token: t.adminKey }));
      if (r.value.status !== 200) throw new Error(`attestation: ${r.value.status} ${r.value.text.slice(0, 200)}`);
      exports.push(r.ms);
      bundle = r.value.body;
    }
    const size = JSON.stringify(bundle).length;
    const scitt: number[] = [];
    for (let i = 0; i < 3; i++) scitt.push((await time(() => t.request('GET', `${path}?format=scitt`, { token: t.adminKey }))).ms);
    console.log(`  export, ${fmt(STEPS)}-record run: ${fmt(median(exports))} ms median of 5 (target ≤ 1,000 ms); ${fmt(size / 1024)} KiB`);
    console.log(`  export as SCITT COSE_Sign1: ${fmt(median(scitt))} ms median of 3`);
    // 2. verify.
    const verifies: number[] = [];
    for (let i = 0; i < 5; i++) {
      const v = await time(() => verifyAttestation(bundle, keysDoc.keys, { sha256: nativeSha256 }));
      if (!v.value.ok) throw new Error(`verify: ${v.value.reason}`);
      verifies.push(v.ms);
    }
    console.log(`  verify with core's verifier: ${fmt(median(verifies), 1)} ms median of 5 (target ≤ 1,000 ms)`);
    const cell = join(import.meta.dirname, '..', 'dist', 'cell.mjs');
    if (existsSync(cell)) {
      writeFileSync(join(dir, 'att.json'), JSON.stringify(bundle));
      writeFileSync(join(dir, 'keys.json'), JSON.stringify(keysDoc));
      const cli: number[] = [];
      for (let i = 0; i < 3; i++) {
        const t0 = performance.now();
        const r = spawnSync(process.execPath, [cell, 'attestation', 'verify', join(dir, 'att.json'), '--keys', join(dir, 'keys.json')]);
        if (r.status !== 0) throw new Error(`cli verify: ${r.stdout}${r.stderr}`);
        cli.push(performance.now() - t0);
      }
      const start: number[] = [];
      for (let i = 0; i < 3; i++) {
        const t0 = performance.now();
        spawnSync(process.execPath, [cell, 'help']);
        start.push(performance.now() - t0);
      }
      console.log(
        `  verify with the command line: ${fmt(median(cli))} ms median of 3, of which starting the program ` +
          `(\`node dist/cell.mjs help\`): ${fmt(median(start))} ms`,
      );
    }
    // 3. the log against a step: a step's append, a run's end, the sequencer's append per head.
    const runs = t.modules.runs.runs;
    const steps: number[] = [];
    const ends: number[] = [];
    const RUNS = 20;
    const PER = 50;
    for (let k = 0; k < RUNS; k++) {
      const run = await queuedRun(t, k);
      const t0 = performance.now();
      for (let i = 0; i < PER; i++) await runs.appendJournal(run.run_id, { step_id: `s${i}`, kind: 'step' }, [{ i }]);
      steps.push((performance.now() - t0) / PER);
      ends.push((await time(() => runs.finishRun(run.run_id, 'completed', { output: null }))).ms);
    }
    const heads = 1000;
    await t.core.store.write(async (tx) => {
      for (let i = 0; i < heads; i++)
        await t.modules.receipts.log.queueTx(
          tx,
          { run_id: `run_bench_${i}`, journal_head: contentHash(i), graph_hash: contentHash('g') },
          'cell:bench',
        );
    });
    const seq = await time(() => t.request('GET', '/.well-known/agent-cell/run-log/checkpoint'));
    console.log(
      `  a step's journal append: ${fmt(median(steps) * 1000)} µs median (${RUNS} runs × ${PER} steps; the log adds no write to it)\n` +
        `  a run's end (run_finished record + its queued head): ${fmt(median(ends) * 1000)} µs median\n` +
        `  the sequencer, after the run's end: ${fmt(heads)} heads appended in ${fmt(seq.ms)} ms (${fmt((seq.ms * 1000) / heads)} µs per run)`,
    );
  } finally {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) await bench();
