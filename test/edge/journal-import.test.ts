// Journals carried back from a device (issue 36, finding 14 and the fork lineage): only a run that
// ended is exported and imported, its outcome is the one its records end with, a `completed` journal
// replays to completion on the graph the cell carried to the device, a stored prefix is completed by
// the journal that extends it, and a fork's claimed parent must be imported and its lineage verify.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inProcessCell, type InProcess } from '../helpers/inproc.ts';
import { generateEd25519, signerFromJwk } from '../../bundles/codec.ts';
import { openJournalExport } from '../../bundles/journal-export.ts';
import { contentHash } from '../../core/canonical.ts';
import { memoryJournal } from '../../core/journal/memory.ts';
import type { JournalRecord } from '../../core/journal/record.ts';
import { journalCommand } from '../../edge/journal-cli.ts';
import { compiledCrew } from './_edge-fixtures.ts';
import { crewOnDevice, deviceRun, exportRun, type DeviceRun } from './_device-run.ts';

const A = '/api/public/v1/admin';
const SIGNED = { 'content-type': 'application/vnd.agent-cell.signed' };

async function device(t: InProcess) {
  const k = await generateEd25519();
  const r = await t.request('POST', `${A}/edge/devices`, { token: t.adminKey, body: { name: 'field', public_jwk: k.publicJwk } });
  assert.equal(r.status, 201, r.text);
  const signer = signerFromJwk(k.kid, k.privateJwk);
  return { k, signer, ...(await crewOnDevice(t, k.kid, r.body.trust.keys)) };
}

const post = (t: InProcess, text: string) => t.request('POST', `${A}/edge/journals`, { token: t.adminKey, rawBody: text, headers: SIGNED });
const stored = async (t: InProcess, runId: string) => t.row('SELECT outcome, record_count FROM edge_journals WHERE run_id = ?', [runId]);
const refusals = async (t: InProcess) =>
  (await t.rows("SELECT details FROM audit WHERE action = 'edge.journal.import' AND outcome = 'refused' ORDER BY seq")).map(
    (r) => JSON.parse(String(r['details'])).reason as string,
  );

/** The run's records up to (not including) its end, and that prefix ended by hand with a `run_finished` of `outcome`. */
async function cutShort(signer: ReturnType<typeof signerFromJwk>, r: DeviceRun, keep: number, output: unknown) {
  const prefix = r.records.slice(0, keep);
  const blobs = new Map(Object.entries(r.values));
  const j = memoryJournal(r.run.run_id, signer, { records: [...prefix], blobs });
  const last = r.records.at(-1)!;
  await j.port.append(
    {
      step_id: 'run/end',
      kind: 'run_finished',
      graph_hash: last.graph_hash,
      input_hash: last.input_hash,
      output_hash: contentHash(output),
      at: last.at,
      data: { outcome: 'completed' },
    },
    { input: r.values[last.input_hash], output },
  );
  return { ...r, records: j.records, values: Object.fromEntries(j.blobs) };
}

test('finding 14: the cell imports only an ended run whose outcome its records end with', async () => {
  const t = await inProcessCell();
  try {
    const d = await device(t);
    const r = await deviceRun(d.signer, d.graph, d.graphHash);
    assert.equal(r.result.outcome, 'completed');
    const prefix = r.records.slice(0, -1);

    // A run waiting for a retry (a prefix of its journal) is not imported: its journal has more to record.
    const waiting = await post(t, await exportRun(d.signer, r, { records: prefix, outcome: 'waiting', crewId: d.crewId }));
    assert.equal(waiting.status, 403, waiting.text);
    assert.equal(waiting.body.details.reason, 'outcome_mismatch');
    // The same prefix signed as completed: it does not end with the run's end.
    const noEnd = await post(t, await exportRun(d.signer, r, { records: prefix, outcome: 'completed', crewId: d.crewId }));
    assert.equal(noEnd.status, 403, noEnd.text);
    assert.equal(noEnd.body.details.reason, 'outcome_mismatch');
    // An outcome other than the one its end records.
    const failed = await post(t, await exportRun(d.signer, r, { outcome: 'failed', crewId: d.crewId }));
    assert.equal(failed.status, 403, failed.text);
    assert.equal(failed.body.details.reason, 'outcome_mismatch');

    // A journal cut after the first seat and ended by hand as completed (signed by the device): the replay
    // on the graph the cell carried reaches the second seat, which it does not record.
    const firstSeat = r.records.findIndex((x) => x.kind === 'step' && x.step_id === d.graph.nodes[0]!.id);
    assert.ok(firstSeat > 0);
    const short = await cutShort(d.signer, r, firstSeat + 1, r.values[r.records[firstSeat]!.output_hash]);
    const shortened = await post(t, await exportRun(d.signer, short, { outcome: 'completed', crewId: d.crewId }));
    assert.equal(shortened.status, 403, shortened.text);
    assert.equal(shortened.body.details.reason, 'outcome_mismatch');
    assert.match(shortened.body.message, /replay|record/);
    // Ended by hand with an output the steps do not give.
    const lied = await cutShort(d.signer, r, r.records.length - 1, 'all clear');
    const liedAt = await post(t, await exportRun(d.signer, lied, { outcome: 'completed', crewId: d.crewId }));
    assert.equal(liedAt.status, 403, liedAt.text);
    assert.equal(liedAt.body.details.reason, 'outcome_mismatch');
    assert.equal(await stored(t, r.run.run_id), undefined, 'nothing was stored for the run');

    // A run of a graph no crew bundle of this cell carried cannot be checked.
    const foreign = compiledCrew();
    const other = await deviceRun(d.signer, foreign.graph, foreign.graph_hash);
    const unknown = await post(t, await exportRun(d.signer, other, { crewId: 'crw_1' }));
    assert.equal(unknown.status, 400, unknown.text);
    assert.equal(unknown.body.details.reason, 'unknown_graph');

    // The whole journal of the run is imported, as completed.
    const ok = await post(t, await exportRun(d.signer, r, { crewId: d.crewId }));
    assert.equal(ok.status, 201, ok.text);
    assert.deepEqual(await stored(t, r.run.run_id), { outcome: 'completed', record_count: r.records.length });
    assert.deepEqual(await refusals(t), [
      'outcome_mismatch',
      'outcome_mismatch',
      'outcome_mismatch',
      'outcome_mismatch',
      'outcome_mismatch',
      'unknown_graph',
    ]);
  } finally {
    await t.close();
  }
});

test('finding 14: a stored prefix (imported from an older edge) is completed by the journal that extends it', async () => {
  const t = await inProcessCell();
  try {
    const d = await device(t);
    const r = await deviceRun(d.signer, d.graph, d.graphHash);
    // What an older cell stored of a run an older edge exported while it waited for a retry.
    const prefixText = await exportRun(d.signer, r, { records: r.records.slice(0, 3), outcome: 'waiting', crewId: d.crewId });
    const prefix = await openJournalExport(prefixText, { kid: d.signer.kid, jwk: d.k.publicJwk }, 'cell-test');
    await t.core.store.write((tx) =>
      tx.run(
        'INSERT INTO edge_journals (run_id, device_id, crew_id, graph_hash, outcome, record_count, hash, export, imported_at, imported_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
        [r.run.run_id, d.signer.kid, d.crewId, d.graphHash, 'waiting', 3, prefix.hash, prefixText, 1, 'prn_old'],
      ),
    );
    // Another journal for the run, not extending the prefix (another input): refused as before.
    const other = await deviceRun(d.signer, d.graph, d.graphHash, { run: r.run, input: 'another task' });
    const dup = await post(t, await exportRun(d.signer, other, { crewId: d.crewId }));
    assert.equal(dup.status, 409, dup.text);
    assert.equal(dup.body.details.reason, 'journal_exists');
    // The finished journal extends it (same chain, more records): it replaces the prefix.
    const ok = await post(t, await exportRun(d.signer, r, { crewId: d.crewId }));
    assert.equal(ok.status, 201, ok.text);
    assert.deepEqual(await stored(t, r.run.run_id), { outcome: 'completed', record_count: r.records.length });
    const read = await t.request('GET', `${A}/edge/journals/${r.run.run_id}`, { token: t.adminKey });
    assert.equal(read.body.records.length, r.records.length);
    const audit = await t.row("SELECT details FROM audit WHERE action = 'edge.journal.import' AND outcome = 'ok'");
    assert.equal(JSON.parse(String(audit!['details'])).extends, 3);
    // And once complete, it is final.
    const again = await post(t, await exportRun(d.signer, other, { crewId: d.crewId }));
    assert.equal(again.status, 409);
  } finally {
    await t.close();
  }
});

test("journal import: a fork's claimed parent must be imported and its lineage verify", async () => {
  const t = await inProcessCell();
  try {
    const d = await device(t);
    const parent = await deviceRun(d.signer, d.graph, d.graphHash);
    const at = parent.records.find((x) => x.kind === 'step' && x.step_id === d.graph.nodes[1]!.id)!.seq;
    const fork = await deviceRun(d.signer, d.graph, d.graphHash, { fork: { parent, at } });
    assert.equal(fork.result.outcome, 'completed');
    assert.equal(fork.records[0]!.kind, 'forked');
    assert.ok(
      fork.records.some((x) => x.data?.['reused'] !== undefined),
      'the fork reuses the first seat',
    );
    const forkText = await exportRun(d.signer, fork, { crewId: d.crewId });

    const early = await post(t, forkText);
    assert.equal(early.status, 409, early.text);
    assert.equal(early.body.details.reason, 'parent_unknown');
    assert.equal(early.body.details.parent_run_id, parent.run.run_id);

    assert.equal((await post(t, await exportRun(d.signer, parent, { crewId: d.crewId }))).status, 201);
    // A fork whose fork point names another record's hash than the parent's: the lineage does not verify.
    const liar = await deviceRun(d.signer, d.graph, d.graphHash, { fork: { parent, at, hash: `sha256:${'0'.repeat(64)}` } });
    const bad = await post(t, await exportRun(d.signer, liar, { crewId: d.crewId }));
    assert.equal(bad.status, 403, bad.text);
    assert.equal(bad.body.details.reason, 'journal_invalid');
    assert.equal(await stored(t, liar.run.run_id), undefined);

    const ok = await post(t, forkText);
    assert.equal(ok.status, 201, ok.text);
    assert.equal((await stored(t, fork.run.run_id))?.['outcome'], 'completed');
  } finally {
    await t.close();
  }
});

test('finding 14: the device exports a run only once it has ended, with the outcome its journal ends with', async () => {
  const t = await inProcessCell();
  const dir = mkdtempSync(join(tmpdir(), 'edge-export-'));
  try {
    const d = await device(t);
    const r = await deviceRun(d.signer, d.graph, d.graphHash);
    writeFileSync(
      join(dir, 'device.json'),
      JSON.stringify({ format_version: 1, device_id: d.k.kid, public_jwk: d.k.publicJwk, private_jwk: d.k.privateJwk }),
    );
    writeFileSync(join(dir, 'trust.json'), JSON.stringify({ format_version: 1, cell_id: 'cell-test', keys: [], publishers: [] }));
    const write = (state: string, records: JournalRecord[]) => {
      mkdirSync(join(dir, 'runs', r.run.run_id), { recursive: true });
      const run = { ...r.run, crew_id: d.crewId, graph_hash: d.graphHash, requester: 'p', input: null, state, output: null };
      writeFileSync(
        join(dir, 'runs', r.run.run_id, 'run.json'),
        JSON.stringify({ ...run, reason: null, steps: 0, created_at: 1, updated_at: 1 }),
      );
      writeFileSync(join(dir, 'runs', r.run.run_id, 'journal.json'), JSON.stringify({ records, values: r.values }));
    };
    const out = join(dir, 'journal.export');
    const exportIt = () => journalCommand(['export', r.run.run_id, '--data', dir, '--out', out]);
    write('waiting', r.records.slice(0, 3));
    await assert.rejects(exportIt(), /waiting/);
    write('completed', r.records.slice(0, 3));
    await assert.rejects(exportIt(), /cannot be exported/);
    write('completed', r.records);
    await exportIt();
    const ok = await post(t, readFileSync(out, 'utf8'));
    assert.equal(ok.status, 201, ok.text);
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await t.close();
  }
});

test('no journal of a disabled or deleted device is imported', async () => {
  const t = await inProcessCell();
  try {
    const d = await device(t);
    const text = await exportRun(d.signer, await deviceRun(d.signer, d.graph, d.graphHash), { crewId: d.crewId });
    for (const [verb, method, path, reason] of [
      ['disable', 'POST', `${A}/edge/devices/${d.k.kid}/disable`, 'device_disabled'],
      ['delete', 'DELETE', `${A}/edge/devices/${d.k.kid}`, 'device_deleted'],
    ] as const) {
      assert.equal((await t.request(method, path, { token: t.adminKey })).status, 200, verb);
      const r = await post(t, text);
      assert.equal(r.status, 409, r.text);
      assert.equal(r.body.details.reason, reason);
    }
    assert.deepEqual(await refusals(t), ['device_disabled', 'device_deleted']);
    assert.equal((await t.rows('SELECT run_id FROM edge_journals')).length, 0);
  } finally {
    await t.close();
  }
});
