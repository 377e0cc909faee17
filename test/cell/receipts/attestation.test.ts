/**
 * Run attestations and the run log at the cell (issue 41, cell/receipts): a finished crew run's
 * attestation verifies with the cell's published keys alone (DSSE, subjects, the run's leaf in a signed
 * checkpoint); the predicate carries the requester, seats, steps, approvals and outcome; values only for
 * a caller who may read them; the SCITT form verifies; the log's public proofs hold; and a journal
 * rewritten in the store and re-signed with the cell's own key (the log recomputed to match) verifies on
 * its own but is caught by consistency with a checkpoint seen before.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { fromB64std } from '../../../core/base64.ts';
import { verifyAttestation } from '../../../core/attestation/bundle.ts';
import { verifyStatement } from '../../../core/attestation/cose-sign1.ts';
import { verifyDsse } from '../../../core/attestation/dsse.ts';
import { recordHash } from '../../../core/journal/hash.ts';
import { GENESIS_HASH, type JournalRecord } from '../../../core/journal/record.ts';
import { sealRecord } from '../../../core/journal/seal.ts';
import { checkConsistent, verifyCheckpoint } from '../../../core/transparency/checkpoint.ts';
import { nodeHash, rangeHash, verifyInclusion } from '../../../core/transparency/merkle.ts';
import { runLeafHash } from '../../../core/transparency/run-leaf.ts';
import type { FakeOpenAI } from '../../fixtures/openai-server.ts';
import { actor } from '../../helpers/actors.ts';
import type { InProcess } from '../../helpers/inproc.ts';
import { A, T, ok, roleOf, team, type Api, crewFixture } from '../../helpers/teams.ts';

let t: InProcess;
let ai: FakeOpenAI;
let api: Api;
before(async () => {
  ({ t, ai, api } = await crewFixture());
  ai.setResponder((req) => ({ content: `answer of ${roleOf(req)}` }));
});
after(async () => {
  await t.close();
  await ai.close();
});

const LOG = '/.well-known/agent-cell/run-log';

async function settled(runId: string, states = ['completed', 'failed', 'refused', 'cancelled']): Promise<string> {
  for (let i = 0; i < 3000; i++) {
    const state = (await t.modules.runs.runs.getRun(runId))?.state ?? '';
    if (states.includes(state)) return state;
    await new Promise((res) => setTimeout(res, 10));
  }
  assert.fail(`run ${runId} did not settle`);
}

async function keys(): Promise<{ kid: string; jwk: JsonWebKey }[]> {
  const r = await t.request('GET', '/.well-known/cell-keys.json');
  assert.equal(r.status, 200);
  return r.body.keys;
}

async function checkpoint(): Promise<string> {
  const r = await t.request('GET', `${LOG}/checkpoint`);
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type') ?? '', /^text\/plain/);
  return r.text;
}

/** A two-seat crew with a one-approver stage after it; the run is approved by the owner and finishes. */
async function approvedRun(): Promise<{ crew: string; runId: string; approver: string }> {
  const tm = await team(api, 'sequential', [{ role: 'writer' }, { role: 'checker' }], {
    post: [{ kind: 'human_approval', config: { rule: 'quorum', quorum: 1, timeout_ms: 3_600_000, prompt: 'ship it?' } }],
  });
  const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'task' });
  assert.equal(await settled(run.run_id, ['waiting', 'failed', 'refused']), 'waiting');
  // Not finished: no attestation yet.
  const early = await t.request('GET', `${T}/crews/${tm.crew}/runs/${run.run_id}/attestation`, { token: t.adminKey });
  assert.equal(early.status, 409, early.text);
  assert.equal(early.body.details.reason, 'run_not_finished');
  const s = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
  await ok(api, 'POST', `${T}/crews/${tm.crew}/runs/${run.run_id}/approvals/${encodeURIComponent(s.pending_approvals[0].step_id)}`, {
    decision: 'approve',
  });
  assert.equal(await settled(run.run_id), 'completed');
  const who = await t.request('GET', `${A}/whoami`, { token: t.adminKey });
  return { crew: tm.crew, runId: run.run_id, approver: who.body.principal.id };
}

test("a crew run's attestation verifies with the published keys and carries what an auditor asks", async () => {
  const { crew, runId, approver } = await approvedRun();
  const r = await t.request('GET', `${T}/crews/${crew}/runs/${runId}/attestation`, { token: t.adminKey });
  assert.equal(r.status, 200, r.text);
  const v = await verifyAttestation(r.body, await keys());
  assert.equal(v.ok, true, v.ok ? '' : v.reason);
  if (!v.ok) return;
  const journal = await t.modules.runs.runs.readJournal(runId, 0, 100_000);
  assert.equal(v.attestation.journal_head, recordHash(journal.at(-1)!));
  assert.equal(v.attestation.keyid, t.modules.iam.iam.signer().kid);
  const p = v.attestation.statement.predicate as Record<string, any>;
  assert.equal(p.run.run_id, runId);
  assert.equal(p.crew.crew_id, crew);
  assert.equal(p.crew.formation_version, (await ok(api, 'GET', `${T}/crews/${crew}/runs/${runId}`)).formation_version);
  assert.ok(p.crew.formation_version >= 1);
  assert.equal(p.requester.principal, approver);
  assert.equal(p.steps.length, journal.length);
  assert.deepEqual(
    p.steps.map((s: any) => [s.seq, s.input_hash, s.output_hash]),
    journal.map((j) => [j.seq, j.input_hash, j.output_hash]),
  );
  assert.deepEqual(p.seats.map((s: any) => s.role_label).sort(), ['checker', 'writer']);
  assert.equal(p.models.length, 2);
  const approval = p.approvals.find((a: any) => a.by === approver);
  assert.ok(approval, JSON.stringify(p.approvals));
  assert.equal(approval.decision, 'approve');
  // The digest of the input approved and the chain that decided, as the signed record carries them.
  assert.match(approval.input_hash, /^sha256:[0-9a-f]{64}$/);
  assert.ok(Array.isArray(approval.chain) && approval.chain.length >= 1, JSON.stringify(approval));
  assert.ok(p.actors.some((a: any) => a.role === 'approver' && a.id === approver));
  assert.equal(p.outcome.state, 'completed');
  assert.equal(p.values_included, false);
  assert.ok(p.period.started_at && p.period.finished_at);
  // The log holds the run once; its entry is the run's head.
  const e = await t.request('GET', `${A}/run-log/entries?limit=1000`, { token: t.adminKey });
  assert.equal(e.status, 200, e.text);
  const mine = e.body.entries.filter((x: any) => x.run_id === runId);
  assert.equal(mine.length, 1);
  assert.equal(mine[0].journal_head, recordHash(journal.at(-1)!));
  assert.equal(mine[0].source, 'cell:cell-test');
  // The same run under the jobs route; the envelope alone; the SCITT signed statement.
  const j = await t.request('GET', `${A}/jobs/runs/${runId}/attestation`, { token: t.adminKey });
  assert.equal((await verifyAttestation(j.body, await keys())).ok, true);
  const d = await t.request('GET', `${A}/jobs/runs/${runId}/attestation?format=dsse`, { token: t.adminKey });
  assert.equal(d.headers.get('content-type'), 'application/vnd.dsse.envelope.v1+json');
  const byKid = new Map((await keys()).map((k) => [k.kid, k.jwk]));
  assert.equal((await verifyDsse(d.body, (kid) => byKid.get(kid))).ok, true);
  const res = await t.app.request(
    `${A}/jobs/runs/${runId}/attestation`,
    { headers: { authorization: `Bearer ${t.adminKey}`, accept: 'application/cose' } },
    {
      incoming: { socket: { remoteAddress: '127.0.0.1' } },
    } as never,
  );
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'application/cose');
  const cose = await verifyStatement(new Uint8Array(await res.arrayBuffer()), (kid) => byKid.get(kid));
  assert.equal(cose.ok, true, cose.ok ? '' : cose.reason);
  if (cose.ok) {
    assert.equal(cose.header.sub, runId);
    assert.equal(cose.header.contentType, 'application/vnd.in-toto+json');
    assert.equal(JSON.parse(new TextDecoder().decode(cose.payload)).predicate.run.run_id, runId);
  }
  // Refusals: another crew's path, an unknown run, a malformed format.
  assert.equal((await t.request('GET', `${T}/crews/crw_nope/runs/${runId}/attestation`, { token: t.adminKey })).status, 404);
  assert.equal((await t.request('GET', `${A}/jobs/runs/run_00000000000000000000/attestation`, { token: t.adminKey })).status, 404);
  assert.equal((await t.request('GET', `${A}/jobs/runs/${runId}/attestation?format=pdf`, { token: t.adminKey })).status, 400);
});

test('values: only for a caller holding the values read permission; the read rules of the run otherwise', async () => {
  const { crew, runId } = await approvedRun();
  const teamsReader = await actor(t, { permissions: ['agent_teams.read'] });
  const noRead = await actor(t, { permissions: ['catalog.read'] });
  const plain = await t.request('GET', `${T}/crews/${crew}/runs/${runId}/attestation`, { token: teamsReader.key });
  assert.equal(plain.status, 200, plain.text);
  const withValues = await t.request('GET', `${T}/crews/${crew}/runs/${runId}/attestation?values=true`, { token: teamsReader.key });
  assert.equal(withValues.status, 403, withValues.text);
  assert.equal(withValues.body.details.reason, 'values_not_readable');
  assert.equal((await t.request('GET', `${T}/crews/${crew}/runs/${runId}/attestation`, { token: noRead.key })).status, 403);
  assert.equal((await t.request('GET', `${A}/jobs/runs/${runId}/attestation`, { token: teamsReader.key })).status, 403);
  const full = await t.request('GET', `${T}/crews/${crew}/runs/${runId}/attestation?values=true`, { token: t.adminKey });
  assert.equal(full.status, 200);
  const v = await verifyAttestation(full.body, await keys());
  assert.equal(v.ok, true);
  if (!v.ok) return;
  const p = v.attestation.statement.predicate as Record<string, any>;
  assert.equal(p.values_included, true);
  for (const s of p.steps) assert.ok(Object.hasOwn(p.values, s.output_hash), `value of ${s.step_id}`);
  assert.ok(Object.values(p.values).some((x) => JSON.stringify(x).includes('answer of writer')));
  assert.equal(JSON.stringify(plain.body).includes('answer of writer'), false, 'no value without values=true');
});

test('the public run log: checkpoints verify, inclusion by leaf hash, consistency between sizes; bad sizes refused', async () => {
  const origin = `agent-cell/${t.core.config.groupId}`;
  const older = await checkpoint();
  const { runId } = await approvedRun();
  const newer = await checkpoint();
  const ks = await keys();
  const a = await verifyCheckpoint(older, origin, ks);
  const b = await verifyCheckpoint(newer, origin, ks);
  assert.ok(a.ok && b.ok);
  if (!a.ok || !b.ok) return;
  assert.ok(b.checkpoint.size > a.checkpoint.size);
  const c = await t.request('GET', `${LOG}/consistency?first=${a.checkpoint.size}&second=${b.checkpoint.size}`);
  assert.equal(c.status, 200, c.text);
  assert.equal((await checkConsistent(older, newer, origin, ks, c.body)).ok, true);
  const journal = await t.modules.runs.runs.readJournal(runId, 0, 100_000);
  const run = await t.modules.runs.runs.getRun(runId);
  const leaf = runLeafHash({ run_id: runId, journal_head: recordHash(journal.at(-1)!), graph_hash: run!.graph_hash! });
  const inc = await t.request('GET', `${LOG}/inclusion/${Buffer.from(leaf).toString('hex')}?tree_size=${b.checkpoint.size}`);
  assert.equal(inc.status, 200, inc.text);
  assert.equal(
    verifyInclusion(leaf, inc.body.leaf_index, b.checkpoint.size, inc.body.inclusion_proof.map(fromB64std), b.checkpoint.root),
    true,
  );
  for (const q of [
    `consistency?first=2&second=${b.checkpoint.size + 5}`,
    'consistency?first=3&second=1',
    `inclusion/${'0'.repeat(64)}?tree_size=${b.checkpoint.size + 1}`,
  ]) {
    const r = await t.request('GET', `${LOG}/${q}`);
    assert.equal(r.status, 400, `${q}: ${r.text}`);
    assert.equal(r.body.details.reason, 'log_size_unknown');
  }
  assert.equal((await t.request('GET', `${LOG}/inclusion/${'0'.repeat(64)}`)).status, 404);
  assert.equal((await t.request('GET', `${LOG}/inclusion/xyz?tree_size=1`)).status, 400);
  assert.equal((await t.request('GET', `${A}/run-log/entries`)).status, 401, 'the entries name runs: a credential is needed');
});

test("a journal rewritten in the store and re-signed with the cell's own key is caught by consistency with an earlier checkpoint", async () => {
  const { crew, runId } = await approvedRun();
  const first = await t.request('GET', `${T}/crews/${crew}/runs/${runId}/attestation`, { token: t.adminKey });
  const ks = await keys();
  assert.equal((await verifyAttestation(first.body, ks)).ok, true);
  const seen = first.body.log.checkpoint as string;

  // Whoever holds the store and the cell's key rewrites the run's output and re-signs the whole chain...
  const journal = await t.modules.runs.runs.readJournal(runId, 0, 100_000);
  const signer = t.modules.iam.iam.signer();
  const rewritten: JournalRecord[] = [];
  let prev = GENESIS_HASH;
  for (const r of journal) {
    const { sig: _s, prev_hash: _p, signer_kid: _k, v: _v, ...fields } = r as JournalRecord & { cell_id: string; epoch: number };
    const changed = r.kind === 'run_finished' ? { ...fields, output_hash: `sha256:${'1'.repeat(64)}` } : fields;
    const sealed = await sealRecord(changed as never, prev, signer);
    prev = recordHash(sealed);
    rewritten.push(sealed);
  }
  await t.core.store.write(async (tx) => {
    for (const r of rewritten)
      await tx.run('UPDATE journal SET record = ? WHERE run_id = ? AND seq = ?', [JSON.stringify(r), runId, r.seq]);
  });
  // ...and recomputes the run log so that it holds the new head: every node above the run's leaf.
  const leafRow = await t.row('SELECT idx, graph_hash FROM run_log_leaves WHERE run_id = ?', [runId]);
  const idx = Number(leafRow!['idx']);
  const newLeaf = runLeafHash({ run_id: runId, journal_head: prev, graph_hash: String(leafRow!['graph_hash']) });
  const size = Number((await t.row('SELECT size FROM run_log_head WHERE id = 1'))!['size']);
  const nodes = new Map<string, Uint8Array>();
  for (const r of await t.rows('SELECT level, idx, hash FROM run_log_nodes'))
    nodes.set(`${r['level']}:${r['idx']}`, Buffer.from(String(r['hash']), 'hex'));
  nodes.set(`0:${idx}`, newLeaf);
  for (let level = 1, i = idx; ; level++) {
    i = Math.floor(i / 2);
    if (!nodes.has(`${level}:${i}`)) break;
    nodes.set(`${level}:${i}`, nodeHash(nodes.get(`${level - 1}:${i * 2}`)!, nodes.get(`${level - 1}:${i * 2 + 1}`)!));
  }
  const root = rangeHash({ begin: 0, end: size }, (n) => nodes.get(`${n.level}:${n.index}`)!);
  await t.core.store.write(async (tx) => {
    await tx.run('UPDATE run_log_leaves SET journal_head = ?, leaf_hash = ? WHERE run_id = ?', [
      prev,
      Buffer.from(newLeaf).toString('hex'),
      runId,
    ]);
    for (const [k, h] of nodes) {
      const [level, i] = k.split(':').map(Number);
      await tx.run('UPDATE run_log_nodes SET hash = ? WHERE level = ? AND idx = ?', [Buffer.from(h).toString('hex'), level!, i!]);
    }
    await tx.run('UPDATE run_log_head SET root = ? WHERE id = 1', [Buffer.from(root).toString('hex')]);
  });

  // The rewritten run's attestation verifies on its own (the cell's own key signs everything)...
  const second = await t.request('GET', `${T}/crews/${crew}/runs/${runId}/attestation`, { token: t.adminKey });
  const alone = await verifyAttestation(second.body, ks);
  assert.equal(alone.ok, true, alone.ok ? '' : alone.reason);
  assert.notEqual(second.body.log.checkpoint, seen);
  // ...but not against the checkpoint a holder of the first attestation saw: the log does not extend it.
  const newSize = second.body.log.tree_size as number;
  const firstSize = first.body.log.tree_size as number;
  const proof =
    firstSize === newSize ? undefined : (await t.request('GET', `${LOG}/consistency?first=${firstSize}&second=${newSize}`)).body;
  const v = await verifyAttestation(second.body, ks, { previous: seen, ...(proof ? { consistency: proof } : {}) });
  assert.equal(v.ok, false);
  if (!v.ok) assert.match(v.reason, /rewritten|does not extend/);
});

test('a run that ended before the run log existed joins it when it is first attested', async () => {
  const graph = `sha256:${'ab'.repeat(32)}`;
  const run = await t.core.store.write((tx) =>
    t.modules.runs.runs.recordRunTx(tx, {
      kind: 'job',
      job_type: 'compute',
      workspace_id: 'old',
      requester: 'usr_old',
      spec: {},
      graph_hash: graph,
      at: t.clock.now(),
    }),
  );
  const signer = t.modules.iam.iam.signer();
  const first = await sealRecord(
    {
      run_id: run.run_id,
      seq: 1,
      step_id: 'run',
      kind: 'run_started',
      graph_hash: graph,
      input_hash: graph,
      output_hash: graph,
      at: t.clock.now(),
      cell_id: 'cell-test',
      epoch: 0,
    },
    GENESIS_HASH,
    signer,
  );
  const last = await sealRecord(
    {
      run_id: run.run_id,
      seq: 2,
      step_id: 'run',
      kind: 'run_finished',
      graph_hash: graph,
      input_hash: graph,
      output_hash: graph,
      at: t.clock.now(),
      data: { outcome: 'completed' },
      cell_id: 'cell-test',
      epoch: 0,
    },
    recordHash(first),
    signer,
  );
  // Written as a store from before the log holds it: the records and the terminal state, no queued head.
  await t.core.store.write(async (tx) => {
    for (const r of [first, last])
      await tx.run('INSERT INTO journal (run_id, seq, kind, record) VALUES (?, ?, ?, ?)', [r.run_id, r.seq, r.kind, JSON.stringify(r)]);
    await tx.run("UPDATE runs SET state = 'completed', finished_at = ? WHERE run_id = ?", [t.clock.now(), run.run_id]);
  });
  assert.equal((await t.rows('SELECT run_id FROM run_log_leaves WHERE run_id = ?', [run.run_id])).length, 0);
  const r = await t.request('GET', `${A}/jobs/runs/${run.run_id}/attestation`, { token: t.adminKey });
  assert.equal(r.status, 200, r.text);
  const v = await verifyAttestation(r.body, await keys());
  assert.equal(v.ok, true, v.ok ? '' : v.reason);
  if (v.ok) assert.equal(v.attestation.journal_head, recordHash(last));
  assert.equal((await t.rows('SELECT run_id FROM run_log_leaves WHERE run_id = ?', [run.run_id])).length, 1);
});
