/**
 * Attestations of device runs and the device's run log, with the real programs (issue 41):
 * `edge attestation export` writes a run's statement signed by the device key with its inclusion in the
 * device's own run log; `edge attestation verify`, `node dist/cell.mjs attestation verify` and Debian's
 * securesystemslib (test/attestation/verify_dsse.py) accept it with the device's public key and refuse
 * a changed copy; the SCITT form verifies too. `edge journal export` carries the run's place in the
 * device's log (format 3) and the cell's import adds the run to the cell's run log. The cell's command
 * line checks consistency with a checkpoint seen before and refuses a log rewritten since.
 * Needs `node scripts/build.mjs` first (dist/edge.mjs, dist/cell.mjs).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { newEdgeRun } from '../../bundles/run-id.ts';
import { signerFromJwk } from '../../bundles/codec.ts';
import { b64std } from '../../core/base64.ts';
import { contentHash } from '../../core/canonical.ts';
import { recordHash } from '../../core/journal/hash.ts';
import { GENESIS_HASH, type JournalRecord } from '../../core/journal/record.ts';
import { sealRecord } from '../../core/journal/seal.ts';
import { signCheckpoint } from '../../core/transparency/checkpoint.ts';
import { inProcessCell, type InProcess } from '../helpers/inproc.ts';
import { crewOnDevice, deviceRun as runOnDevice } from './_device-run.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const EDGE = join(ROOT, 'dist', 'edge.mjs');
const CELL = join(ROOT, 'dist', 'cell.mjs');
const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const A = '/api/public/v1/admin';

let dir: string;
let data: string;
let t: InProcess;
let device: { device_id: string; public_jwk: JsonWebKey; private_jwk: JsonWebKey };

function run(bin: string, args: string[]): { status: number; out: string } {
  const r = spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', cwd: dir });
  return { status: r.status ?? -1, out: `${r.stdout}${r.stderr}` };
}

/** A finished run of `n` steps as the device keeps it (run.json, journal.json), signed by the device key. */
async function deviceRun(n: number): Promise<string> {
  const ids = await newEdgeRun(device.device_id);
  const signer = signerFromJwk(device.device_id, device.private_jwk);
  const graph = contentHash({ crew: 'field' });
  const records: JournalRecord[] = [];
  const values: Record<string, unknown> = { [contentHash('go')]: 'go' };
  let prev = GENESIS_HASH;
  for (let i = 1; i <= n; i++) {
    const out = { step: i };
    values[contentHash(out)] = out;
    const kind = i === 1 ? 'run_started' : i === n ? 'run_finished' : 'step';
    const r = await sealRecord(
      {
        run_id: ids.run_id,
        seq: i,
        step_id: i === n ? 'run/end' : `agent:b${i}/model/0`,
        kind,
        graph_hash: graph,
        input_hash: contentHash('go'),
        output_hash: contentHash(out),
        at: 1_767_225_600_000 + i,
        ...(kind === 'step'
          ? { data: { seat: `b${i}`, agent_id: `agt_${i}`, usage: 7 } }
          : kind === 'run_finished'
            ? { data: { outcome: 'completed' } }
            : {}),
        cell_id: device.device_id,
        epoch: 0,
      },
      prev,
      signer,
    );
    records.push(r);
    prev = recordHash(r);
  }
  const rd = join(data, 'runs', ids.run_id);
  const { mkdirSync } = await import('node:fs');
  mkdirSync(rd, { recursive: true });
  const now = 1_767_225_600_000;
  writeFileSync(
    join(rd, 'run.json'),
    JSON.stringify({
      run_id: ids.run_id,
      run_nonce: ids.run_nonce,
      crew_id: 'crw_field',
      graph_hash: graph,
      requester: 'usr_field',
      input: 'go',
      state: 'completed',
      output: { step: n },
      reason: null,
      steps: n,
      created_at: now,
      updated_at: now + n,
    }),
  );
  writeFileSync(join(rd, 'journal.json'), JSON.stringify({ records, values }));
  return ids.run_id;
}

/**
 * A finished run of a crew the cell carried to the device (a crew bundle), on core's engine as the device
 * runs it, kept as the device keeps it: the cell imports a journal only when it replays on a graph it
 * carried (docs/edge.md, "Journal export").
 */
async function carriedRun(): Promise<string> {
  const crew = await crewOnDevice(
    t,
    device.device_id,
    (JSON.parse(readFileSync(join(dir, 'trust.json'), 'utf8')) as { trust: { keys: { kid: string; jwk: JsonWebKey }[] } }).trust.keys,
  );
  const r = await runOnDevice(signerFromJwk(device.device_id, device.private_jwk), crew.graph, crew.graphHash);
  assert.equal(r.result.outcome, 'completed');
  const rd = join(data, 'runs', r.run.run_id);
  const { mkdirSync } = await import('node:fs');
  mkdirSync(rd, { recursive: true });
  const now = 1_767_225_600_000;
  writeFileSync(
    join(rd, 'run.json'),
    JSON.stringify({
      ...r.run,
      crew_id: crew.crewId,
      graph_hash: crew.graphHash,
      requester: 'usr_field',
      input: 'inspect the pump',
      state: 'completed',
      output: r.result.output,
      reason: null,
      steps: r.result.steps,
      created_at: now,
      updated_at: now,
    }),
  );
  writeFileSync(join(rd, 'journal.json'), JSON.stringify({ records: r.records, values: r.values }));
  return r.run.run_id;
}

before(async () => {
  assert.ok(existsSync(EDGE) && existsSync(CELL), 'run node scripts/build.mjs first');
  dir = mkdtempSync(join(tmpdir(), 'edge-attest-'));
  data = join(dir, 'device');
  const init = run(EDGE, ['init', '--data', data]);
  assert.equal(init.status, 0, init.out);
  device = JSON.parse(readFileSync(join(data, 'device.json'), 'utf8'));
  t = await inProcessCell();
  const reg = await t.request('POST', `${A}/edge/devices`, { token: t.adminKey, body: { name: 'field', public_jwk: device.public_jwk } });
  assert.equal(reg.status, 201, reg.text);
  writeFileSync(join(dir, 'trust.json'), JSON.stringify(reg.body));
  assert.equal(run(EDGE, ['trust', '--data', data, '--file', join(dir, 'trust.json')]).status, 0);
});
after(async () => {
  await t?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('edge attestation export/keys/verify: the device-signed statement with its device-log proof verifies with three verifiers', async () => {
  const first = await deviceRun(3);
  const runId = await deviceRun(4);
  const att = join(dir, 'att.json');
  const ex = run(EDGE, ['attestation', 'export', runId, '--data', data, '--out', att]);
  assert.equal(ex.status, 0, ex.out);
  assert.equal(run(EDGE, ['attestation', 'keys', '--data', data, '--out', join(dir, 'device-keys.json')]).status, 0);
  const v = run(EDGE, ['attestation', 'verify', att, '--keys', join(dir, 'device-keys.json')]);
  assert.equal(v.status, 0, v.out);
  assert.match(v.out, new RegExp(`verified: run ${runId} \\(4 records, completed\\)`));
  assert.match(v.out, new RegExp(`in the log agent-cell-edge/${device.device_id} at leaf 0 of 1`));
  assert.equal(run(CELL, ['attestation', 'verify', att, '--keys', join(dir, 'device-keys.json')]).status, 0);
  const py = spawnSync(PYTHON, [join(ROOT, 'test', 'attestation', 'verify_dsse.py'), att, join(dir, 'device-keys.json')], {
    encoding: 'utf8',
  });
  assert.equal(py.status, 0, py.stdout + py.stderr);
  const doc = JSON.parse(readFileSync(att, 'utf8'));
  assert.equal(JSON.parse(Buffer.from(doc.dsse_envelope.payload, 'base64').toString()).predicate.issuer.kind, 'edge-device');
  // A changed statement, or the cell's keys instead of the device's: refused.
  const st = JSON.parse(Buffer.from(doc.dsse_envelope.payload, 'base64').toString());
  st.predicate.outcome.state = 'failed';
  writeFileSync(
    join(dir, 'bad.json'),
    JSON.stringify({ ...doc, dsse_envelope: { ...doc.dsse_envelope, payload: b64std(Buffer.from(JSON.stringify(st))) } }),
  );
  const bad = run(EDGE, ['attestation', 'verify', join(dir, 'bad.json'), '--keys', join(dir, 'device-keys.json')]);
  assert.equal(bad.status, 3, bad.out);
  assert.match(bad.out, /refused: dsse: the signature/);
  writeFileSync(join(dir, 'cell-keys.json'), (await t.request('GET', '/.well-known/cell-keys.json')).text);
  assert.equal(run(EDGE, ['attestation', 'verify', att, '--keys', join(dir, 'cell-keys.json')]).status, 3);
  // The SCITT form.
  const cose = join(dir, 'att.cose');
  assert.equal(run(EDGE, ['attestation', 'export', runId, '--data', data, '--out', cose, '--format', 'scitt']).status, 0);
  const vc = run(EDGE, ['attestation', 'verify', cose, '--keys', join(dir, 'device-keys.json')]);
  assert.equal(vc.status, 0, vc.out);
  assert.match(vc.out, new RegExp(`signed statement of ${runId}`));
  // The device's log grows with each run exported or finished: the earlier run joins after this one.
  assert.equal(run(EDGE, ['attestation', 'export', first, '--data', data, '--out', join(dir, 'first.json')]).status, 0);
  assert.equal(JSON.parse(readFileSync(join(dir, 'first.json'), 'utf8')).log.leaf_index, 1);
});

test("edge journal export carries the device-log proof; the cell's import puts the run in the cell's run log", async () => {
  const runId = await carriedRun();
  const out = join(dir, 'journal.export');
  const ex = run(EDGE, ['journal', 'export', runId, '--data', data, '--out', out]);
  assert.equal(ex.status, 0, ex.out);
  const text = readFileSync(out, 'utf8');
  const payload = JSON.parse(text.slice(text.indexOf('\n') + 1));
  assert.equal(payload.format_version, 3);
  assert.equal(payload.log.origin, `agent-cell-edge/${device.device_id}`);
  const imp = await t.request('POST', `${A}/edge/journals`, {
    token: t.adminKey,
    rawBody: text,
    headers: { 'content-type': 'application/vnd.agent-cell.signed' },
  });
  assert.equal(imp.status, 201, imp.text);
  // The cell's checkpoint includes the imported run (sequenced once asked for).
  await t.request('GET', '/.well-known/agent-cell/run-log/checkpoint');
  const e = await t.request('GET', `${A}/run-log/entries`, { token: t.adminKey });
  const mine = e.body.entries.filter((x: { run_id: string }) => x.run_id === runId);
  assert.deepEqual(
    mine.map((x: { source: string; journal_head: string }) => [x.source, x.journal_head]),
    [[`edge:${device.device_id}`, recordHash(payload.records.at(-1))]],
  );
});

test("the cell's command line: consistency with a checkpoint seen before holds; against a forged one it is refused", async () => {
  // Two job runs on the cell, an attestation after each; the first one's checkpoint is kept.
  const job = async () => {
    const r = await t.request('POST', `${A}/jobs/runs`, {
      token: t.adminKey,
      body: { job_type: 'compute', workspace_id: 'w', spec: { code: 'return 1;' } },
    });
    assert.equal(r.status, 202, r.text);
    for (let i = 0; i < 3000 && (await t.modules.runs.runs.getRun(r.body.run_id))?.state !== 'completed'; i++)
      await new Promise((x) => setTimeout(x, 10));
    const a = await t.request('GET', `${A}/jobs/runs/${r.body.run_id}/attestation`, { token: t.adminKey });
    assert.equal(a.status, 200, a.text);
    return a.body;
  };
  const one = await job();
  writeFileSync(join(dir, 'one.json'), JSON.stringify(one));
  const keys = join(dir, 'cell-keys.json');
  writeFileSync(keys, (await t.request('GET', '/.well-known/cell-keys.json')).text);
  const seen = join(dir, 'seen.checkpoint');
  const first = run(CELL, ['attestation', 'verify', join(dir, 'one.json'), '--keys', keys, '--save-checkpoint', seen]);
  assert.equal(first.status, 0, first.out);
  const two = await job();
  writeFileSync(join(dir, 'two.json'), JSON.stringify(two));
  const proof = await t.request(
    'GET',
    `/.well-known/agent-cell/run-log/consistency?first=${one.log.tree_size}&second=${two.log.tree_size}`,
  );
  writeFileSync(join(dir, 'proof.json'), proof.text);
  const ok = run(CELL, [
    'attestation',
    'verify',
    join(dir, 'two.json'),
    '--keys',
    keys,
    '--previous',
    seen,
    '--consistency',
    join(dir, 'proof.json'),
  ]);
  assert.equal(ok.status, 0, ok.out);
  assert.match(ok.out, /extends the checkpoint seen before/);
  // A checkpoint of the same size but another root, signed by the cell's own key (what a rewriter would have shown before).
  const signer = t.modules.iam.iam.signer();
  const jwk = t.modules.iam.iam.identityKeys().find((k) => k.kid === signer.kid)!.jwk;
  const origin = one.log.origin as string;
  const forged = await signCheckpoint({ origin, size: one.log.tree_size, root: new Uint8Array(32).fill(7), extensions: [] }, [
    { name: origin, publicJwk: jwk, sign: (b) => signer.sign(b) },
  ]);
  writeFileSync(join(dir, 'forged.checkpoint'), forged);
  const no = run(CELL, [
    'attestation',
    'verify',
    join(dir, 'two.json'),
    '--keys',
    keys,
    '--previous',
    join(dir, 'forged.checkpoint'),
    '--consistency',
    join(dir, 'proof.json'),
  ]);
  assert.equal(no.status, 3, no.out);
  assert.match(no.out, /history rewritten/);
  // A file that is no attestation (refused, exit 3); a missing keys file (exit 1, a file it cannot read); no --keys (2).
  writeFileSync(join(dir, 'junk'), 'junk');
  assert.equal(run(CELL, ['attestation', 'verify', join(dir, 'junk'), '--keys', keys]).status, 3);
  assert.equal(run(CELL, ['attestation', 'verify', join(dir, 'two.json'), '--keys', join(dir, 'nope.json')]).status, 1);
  assert.equal(run(CELL, ['attestation', 'verify', join(dir, 'two.json')]).status, 2);
});
