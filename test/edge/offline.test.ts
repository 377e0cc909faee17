// Offline crew runs at the edge: bundled crew on the tiny local model, budgets, device-signed journal, export.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { emptyDeviceState } from '../../bundles/accept.ts';
import { openJournalExport } from '../../bundles/journal-export.ts';
import { edgeRunId } from '../../bundles/run-id.ts';
import { findRuntime } from '../../runtime/local-model.ts';
import { prepareOffline } from '../../edge/offline.ts';
import { journalCommand } from '../../edge/journal-cli.ts';
import { existsSync, readFileSync } from 'node:fs';
import { readState } from '../../edge/files.ts';
import { join } from 'node:path';
import { edgeWorld, T0 } from './_edge-fixtures.ts';
import { start } from './_offline-app.ts';

let skip: string | false = false;
try {
  findRuntime();
} catch {
  skip = 'edge-runtime/ is not installed (npm install --prefix edge-runtime --omit=optional)';
}

/** The frames of an SSE body until it ends: id (or undefined), event, data. */
async function frames(res: Response): Promise<{ id: string | undefined; event: string; data: any }[]> {
  const text = await res.text();
  const out: { id: string | undefined; event: string; data: any }[] = [];
  for (const raw of text.split('\n\n')) {
    let id: string | undefined;
    let event = 'message';
    let data = '';
    for (const line of raw.split('\n')) {
      if (line.startsWith('id: ')) id = line.slice(4);
      else if (line.startsWith('event: ')) event = line.slice(7);
      else if (line.startsWith('data: ')) data += line.slice(6);
    }
    if (data !== '') out.push({ id, event, data: JSON.parse(data) });
  }
  return out;
}

test("an offline crew run streams the local model's tokens as delta frames; the journal holds the same text", {
  skip,
  timeout: 60_000,
}, async () => {
  const w = await edgeWorld();
  const e = await start(w);
  try {
    const p = await e.req('POST', '/api/public/v1/admin/agent-teams/crews/crw_1/runs', { input: 'check the pump' });
    assert.equal(p.status, 202);
    const res = await e.sse(`/api/public/v1/admin/jobs/runs/${p.body.run_id}/events/sse`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
    const fs = await frames(res);
    const records = fs.filter((f) => f.event !== 'delta');
    assert.deepEqual(
      records.map((f) => Number(f.id)),
      records.map((_, i) => i + 1),
      'every record, seq as id',
    );
    assert.equal(records.at(-1)!.event, 'run_finished');
    const deltas = fs.filter((f) => f.event === 'delta');
    assert.ok(deltas.length > 0, 'the model streamed');
    assert.ok(
      deltas.every((d) => d.id === undefined),
      'deltas carry no id',
    );
    const { readRun } = await import('../../edge/runs.ts');
    const stored = readRun(w.dir, p.body.run_id)!;
    for (const stepId of new Set(deltas.map((d) => d.data.step_id as string))) {
      let text = '';
      for (const d of deltas.filter((x) => x.data.step_id === stepId)) {
        assert.ok(d.data.index <= text.length);
        text = text.slice(0, d.data.index) + d.data.text;
      }
      const rec = stored.journal.records.find((r) => r.kind === 'step' && r.step_id === stepId)!;
      assert.equal((stored.journal.values[rec.output_hash] as { content: string }).content, text, 'the journal holds the streamed text');
      assert.ok(
        fs.indexOf(fs.find((f) => f.event === 'step' && f.data.step_id === stepId)!) >
          fs.indexOf(deltas.find((d) => d.data.step_id === stepId)!),
      );
    }
    // After the run: the journal's records after Last-Event-ID, no deltas; nothing left is 204.
    const again = await frames(await e.sse(`/api/public/v1/admin/jobs/runs/${p.body.run_id}/events/sse`, { 'last-event-id': '2' }));
    assert.deepEqual(
      again.map((f) => Number(f.id)),
      records.slice(2).map((f) => Number(f.id)),
    );
    const done = await e.sse(`/api/public/v1/admin/jobs/runs/${p.body.run_id}/events/sse`, { 'last-event-id': String(records.length) });
    assert.equal(done.status, 204);
    assert.equal((await e.sse('/api/public/v1/admin/jobs/runs/run_nope/events/sse')).status, 404);
  } finally {
    await e.setup.model?.dispose();
    rmSync(w.dir, { recursive: true, force: true });
  }
});

test('a bundled crew runs offline on the local model, deterministically, with a device-signed journal', {
  skip,
  timeout: 60_000,
}, async () => {
  const w = await edgeWorld();
  const e = await start(w);
  try {
    const r1 = await e.runToEnd('check the pump');
    assert.equal(r1.state, 'completed', JSON.stringify(r1));
    const r2 = await e.runToEnd('check the pump');
    assert.equal(r2.state, 'completed');
    assert.deepEqual(r2.output, r1.output, 'greedy decoding: same input, same output');
    assert.ok(r1.journal_records >= 4);
    for (const f of ['created_at', 'updated_at'])
      assert.match(r1[f], /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/, `${f}: ISO 8601 UTC, as the cell answers`);
    const j = await e.req('GET', `/api/public/v1/admin/jobs/runs/${r1.run_id}/journal`);
    assert.equal(j.status, 200);
    assert.ok(j.body.records.every((r: { signer_kid: string }) => r.signer_kid === w.device.device_id));
    // Token accounting: every model step's usage was charged to the agent's ledger.
    const usage = j.body.records
      .filter((r: { data?: { usage?: number } }) => typeof r.data?.usage === 'number')
      .reduce((a: number, r: { data: { usage: number } }) => a + r.data.usage, 0);
    // Kept in the sealed state (edge/files.ts), no file of its own.
    const spent = readState(w.dir, w.device).spent ?? {};
    assert.equal(existsSync(join(w.dir, 'budgets.json')), false);
    assert.ok(usage > 0);
    assert.equal((spent['agt_a'] ?? 0) + (spent['agt_b'] ?? 0), 2 * usage, 'two identical runs charged exactly their recorded usage');
    // Export and verify the journal exactly as the cell does.
    const out = join(w.dir, 'export.json');
    const orig = process.stdout.write.bind(process.stdout);
    process.stdout.write = (() => true) as typeof process.stdout.write;
    try {
      await journalCommand(['export', r1.run_id, '--data', w.dir, '--out', out]);
    } finally {
      process.stdout.write = orig;
    }
    const opened = await openJournalExport(readFileSync(out, 'utf8'), { kid: w.device.device_id, jwk: w.device.public_jwk }, 'cell-a');
    assert.equal(opened.payload.run.outcome, 'completed');
    assert.equal(opened.payload.records.length, r1.journal_records);
    // The run id is this device's, derived from the nonce the export carries (what the cell checks on import).
    assert.equal(opened.payload.format_version, 3);
    assert.equal(await edgeRunId(w.device.device_id, opened.payload.run.run_nonce!), r1.run_id);
    // The finished run is in the device's own run log, and the export carries its inclusion (verified by openJournalExport).
    assert.equal(opened.payload.log?.origin, `agent-cell-edge/${w.device.device_id}`);
    // Permissions and unknown crews at the edge gateway.
    assert.equal((await e.req('POST', '/api/public/v1/admin/agent-teams/crews/crw_other/runs', {})).status, 404);
  } finally {
    await e.setup.model?.dispose();
    rmSync(w.dir, { recursive: true, force: true });
  }
});

test('an offline run honours the budget: a ledger too small refuses the run', { skip, timeout: 60_000 }, async () => {
  const w = await edgeWorld({ budgets: { agt_a: 5, agt_b: 100_000 } });
  const e = await start(w);
  try {
    const r = await e.runToEnd('x');
    assert.equal(r.state, 'refused');
    assert.equal(r.reason, 'budget_exceeded');
    const w2 = await edgeWorld({ budgets: { agt_b: 100_000 } });
    const e2 = await start(w2);
    try {
      const r2 = await e2.runToEnd('x');
      assert.equal(r2.state, 'refused');
      assert.equal(r2.reason, 'no_budget_ledger');
    } finally {
      await e2.setup.model?.dispose();
      rmSync(w2.dir, { recursive: true, force: true });
    }
  } finally {
    await e.setup.model?.dispose();
    rmSync(w.dir, { recursive: true, force: true });
  }
});

test("a tampered model refuses to start; a validly signed but different model is not the crew's", { skip, timeout: 60_000 }, async () => {
  const w = await edgeWorld();
  try {
    const { writeFileSync } = await import('node:fs');
    const { makeTinyGguf } = await import('../../scripts/make-tiny-gguf.ts');
    const { buildModelManifest } = await import('../../bundles/model-manifest.ts');
    const { sha256Hex } = await import('../../bundles/codec.ts');
    const other = makeTinyGguf(7);
    writeFileSync(w.modelPath, other);
    const prep = () =>
      prepareOffline({
        dir: w.dir,
        device: w.device,
        trust: w.trust,
        state: emptyDeviceState(w.device.device_id),
        clock: { now: () => T0 },
        crewBundle: w.crewPath,
        model: w.modelPath,
        modelManifest: w.manifestPath,
      });
    await assert.rejects(prep(), (err) => (err as { details?: { reason?: string } }).details?.reason === 'model_tampered');
    writeFileSync(
      w.manifestPath,
      await buildModelManifest({
        publisher: 'pub',
        signer: w.pubSigner,
        issuedAt: T0,
        model: { name: 'other', format: 'gguf', size: other.length, sha256: await sha256Hex(other) },
      }),
    );
    await assert.rejects(prep(), (err) => (err as { details?: { reason?: string } }).details?.reason === 'model_mismatch');
  } finally {
    rmSync(w.dir, { recursive: true, force: true });
  }
});

test('a signed crew bundle whose graph the compiler does not reproduce is refused', async () => {
  const w = await edgeWorld();
  try {
    const { writeFileSync } = await import('node:fs');
    const { buildCrewBundle } = await import('../../bundles/crew-bundle.ts');
    const graph = structuredClone(w.crew.graph) as { limits: { default_max_tokens: number } };
    graph.limits.default_max_tokens = 100_000;
    writeFileSync(
      w.crewPath,
      await buildCrewBundle({
        issuer: 'cell-a',
        signer: w.cellSigner,
        audience: w.devKid,
        version: 2,
        issuedAt: T0,
        expiresAt: null,
        crew: { ...w.crew, graph },
        model: null,
      }),
    );
    await assert.rejects(
      prepareOffline({
        dir: w.dir,
        device: w.device,
        trust: w.trust,
        state: emptyDeviceState(w.device.device_id),
        clock: { now: () => T0 },
        crewBundle: w.crewPath,
        model: undefined,
        modelManifest: undefined,
      }),
      (err) => (err as { details?: { reason?: string } }).details?.reason === 'graph_hash_mismatch',
    );
  } finally {
    rmSync(w.dir, { recursive: true, force: true });
  }
});

test('a run interrupted on the device continues from its journal when the gateway starts again', { skip, timeout: 60_000 }, async () => {
  const w = await edgeWorld();
  const e = await start(w);
  try {
    const done = await e.runToEnd('check the valve');
    assert.equal(done.state, 'completed');
    const { writeFileSync } = await import('node:fs');
    const dir = join(w.dir, 'runs', done.run_id);
    const journal = JSON.parse(readFileSync(join(dir, 'journal.json'), 'utf8'));
    const full = journal.records.length;
    // As if the device died after its first step (its model call's result): the run is still 'running', its journal
    // cut short. (Cut inside a call, after its intent, the call would be issued again: another intent record.)
    const cut = journal.records.findIndex((x: { kind: string }) => x.kind === 'step') + 1;
    writeFileSync(join(dir, 'journal.json'), JSON.stringify({ records: journal.records.slice(0, cut), values: journal.values }));
    writeFileSync(
      join(dir, 'run.json'),
      JSON.stringify({ ...JSON.parse(readFileSync(join(dir, 'run.json'), 'utf8')), state: 'running', output: null }),
    );
    await e.setup.model?.dispose();
    const e2 = await start(w);
    try {
      let r: any;
      for (let i = 0; i < 200; i++) {
        r = (await e2.req('GET', `/api/public/v1/admin/agent-teams/crews/crw_1/runs/${done.run_id}`)).body;
        if (r.state !== 'running') break;
        await new Promise((res) => setTimeout(res, 25));
      }
      assert.equal(r.state, 'completed');
      assert.deepEqual(r.output, done.output, 'the recovered run ends where the original did');
      assert.equal(r.journal_records, full);
      const out = join(w.dir, 'recovered.json');
      const orig = process.stdout.write.bind(process.stdout);
      process.stdout.write = (() => true) as typeof process.stdout.write;
      try {
        await journalCommand(['export', done.run_id, '--data', w.dir, '--out', out]);
      } finally {
        process.stdout.write = orig;
      }
      await openJournalExport(readFileSync(out, 'utf8'), { kid: w.device.device_id, jwk: w.device.public_jwk }, 'cell-a');
    } finally {
      await e2.setup.model?.dispose();
    }
  } finally {
    rmSync(w.dir, { recursive: true, force: true });
  }
});
