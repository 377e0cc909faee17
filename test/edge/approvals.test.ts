// Human approvals on the device (issue #39, section 3), on the real edge program (`node dist/edge.mjs
// serve`, the signed tiny model): a crew held by a two-person approval and then by a named approver's waits
// offline; approvers authenticate with the key bundle's credentials (an API key; the cell's DPoP-bound
// access token for the device) through the gateway's one gate; core's rule judges each decision as at the
// cell; each decision is a device-signed journal record. `edge approvals list` reads the data dir while the
// device serves. Across a SIGKILL the approvals stay pending and a decision completes the run; a newer key
// bundle that revokes an approver's key refuses it; a restart past the timeout ends the run approval_timeout.
// Needs `node scripts/build.mjs` (dist/edge.mjs) and edge-runtime/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, type ChildProcess } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, SignJWT, type JWK } from 'jose';
import { generateEd25519 } from '../../bundles/codec.ts';
import { buildKeyBundle } from '../../bundles/key-bundle.ts';
import { verifyJournal } from '../../core/journal/verify.ts';
import { edgeWorld, OTHER_SECRET, SECRET, T0, TOKEN_ISSUER } from './_edge-fixtures.ts';
import { EDGE, edgeProgramMissing as why, serveWorld, stopEdge, untilRun } from './_edge-process.ts';

const run = promisify(execFile);

/** usr_3: an approver with agent_teams (approve included). */
const APPROVER_SECRET = 'svck_live_' + 'A'.repeat(43);
/** usr_4: may read and run crews, not approve. */
const NO_APPROVE_SECRET = 'svck_live_' + 'W'.repeat(43);
/** A key no bundle carries. */
const STRANGER_SECRET = 'svck_live_' + 'Z'.repeat(43);
const HOUR = 3_600_000;
const RUNS = '/api/public/v1/admin/agent-teams/crews/crw_1/runs';
const ENDED = (r: any) => ['completed', 'failed', 'refused', 'cancelled'].includes(r.state);

type World = Awaited<ReturnType<typeof edgeWorld>>;

const serve = (w: World, keysPath: string, offsetMs: number) => serveWorld(w, { offsetMs, keysPath });
const kill = (p: ChildProcess) => stopEdge(p, 'SIGKILL');

async function call(
  url: string,
  method: string,
  path: string,
  o: { secret?: string; body?: unknown; headers?: Record<string, string>; raw?: string } = {},
): Promise<{ status: number; body: any }> {
  const r = await fetch(url + path, {
    method,
    headers: { authorization: `Bearer ${o.secret ?? SECRET}`, 'content-type': 'application/json', ...o.headers },
    ...(o.raw !== undefined ? { body: o.raw } : o.body !== undefined ? { body: JSON.stringify(o.body) } : {}),
  });
  return { status: r.status, body: await r.json() };
}

const until = (url: string, runId: string, pred: (r: any) => boolean) =>
  untilRun(async () => (await call(url, 'GET', `${RUNS}/${runId}`)).body, pred);

const approvalPath = (runId: string, step: string) => `${RUNS}/${runId}/approvals/${encodeURIComponent(step)}`;
const reasonOf = (r: { status: number; body: any }) => `${r.status} ${r.body.details?.reason ?? r.body.error ?? 'ok'}`;

test('approvals on the device: judged as at the cell, credentials from the key bundle, durable across a SIGKILL', {
  skip: why(),
  timeout: 300_000,
}, async () => {
  // The cell's token signing key (the bundle's token trust) and a client's DPoP key.
  const signing = await generateEd25519();
  const tokenKey = await importJWK(signing.privateJwk as JWK, 'EdDSA');
  const x = (signing.publicJwk as { x: string }).x;
  const dpop = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
  const dpopPub = await exportJWK(dpop.publicKey);
  const w = await edgeWorld({
    maxTokens: 4,
    otherOwnerKey: true,
    tokens: { keys: [{ kid: signing.kid, x }] },
    extraKeys: [
      { key_id: 'key_4', owner_id: 'usr_3', secret: APPROVER_SECRET, scopes: ['agent_teams'] },
      { key_id: 'key_5', owner_id: 'usr_4', secret: NO_APPROVE_SECRET, scopes: ['agent_teams.read', 'agent_teams.write'] },
      // usr_5's own key (never presented here) makes it a principal of the bundle: its tokens' subject.
      { key_id: 'key_6', owner_id: 'usr_5', secret: 'svck_live_' + 'F'.repeat(43), scopes: ['agent_teams'] },
    ],
    stages: {
      pre: [
        { kind: 'human_approval', config: { rule: 'two_person', timeout_ms: HOUR, prompt: 'Open the valve?' } },
        { kind: 'human_approval', config: { rule: 'quorum', quorum: 1, approvers: ['usr_2'], timeout_ms: HOUR } },
      ],
    },
  });
  // usr_5 holds no key on the device: it decides with the cell's access token for the device, DPoP-bound.
  const token = await new SignJWT({
    iss: TOKEN_ISSUER,
    sub: 'usr_5',
    aud: `edge:${w.device.device_id}`,
    client_id: 'field-client',
    scope: 'agent_teams.approve agent_teams.read',
    jti: 'tok-dpop',
    iat: T0 / 1000,
    exp: T0 / 1000 + 6 * 3600,
    cnf: { jkt: await calculateJwkThumbprint(dpopPub) },
  })
    .setProtectedHeader({ alg: 'EdDSA', typ: 'at+jwt', kid: signing.kid })
    .sign(tokenKey);
  const proofFor = async (htu: string, iat: number) =>
    new SignJWT({
      htm: 'POST',
      htu,
      iat,
      jti: crypto.randomUUID(),
      ath: Buffer.from(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(token))).toString('base64url'),
    })
      .setProtectedHeader({ alg: 'EdDSA', typ: 'dpop+jwt', jwk: dpopPub })
      .sign(dpop.privateKey);
  // The device's clock reads a second after the bundles were issued, and runs on from there.
  const offset = T0 + 1000 - Date.now();
  const approve = (url: string, runId: string, step: string, secret: string, comment?: string) =>
    call(url, 'POST', approvalPath(runId, step), { secret, body: { decision: 'approve', ...(comment ? { comment } : {}) } });
  let waitingRun: string;
  let timingOutRun: string;
  try {
    const e1 = await serve(w, w.keysPath, offset);
    try {
      const p = await call(e1.url, 'POST', RUNS, { body: { input: 'Inspect pump 7.' } });
      assert.equal(p.status, 202, JSON.stringify(p.body));
      const id = p.body.run_id as string;
      // The run waits offline on its first approval, listed in the cell's shape.
      let v = await until(e1.url, id, (r) => r.state === 'waiting' || ENDED(r));
      assert.equal(v.state, 'waiting', JSON.stringify(v));
      assert.equal(v.pending_approvals.length, 1, JSON.stringify(v));
      const pa = v.pending_approvals[0];
      assert.deepEqual(
        { step_id: pa.step_id, kind: pa.kind, rule: pa.rule, approvers: pa.approvers, quorum: pa.quorum, prompt: pa.prompt },
        { step_id: 'pre:0', kind: 'human_approval', rule: 'two_person', approvers: [], quorum: 2, prompt: 'Open the valve?' },
      );
      assert.match(pa.input_hash, /^sha256:[0-9a-f]{64}$/);
      // Due an hour after the step was first reached (a recorded time, just before the request was written).
      const dueIn = Date.parse(pa.due) - Date.parse(pa.requested_at);
      assert.ok(dueIn <= HOUR && dueIn > HOUR - 1000, `${pa.due} ${pa.requested_at}`);
      assert.deepEqual(pa.decisions, []);

      // Refusals, each with the cell's status and reason; none is recorded.
      assert.equal(reasonOf(await approve(e1.url, id, 'pre:0', SECRET)), '403 requester_cannot_approve');
      assert.equal(reasonOf(await approve(e1.url, id, 'pre:0', STRANGER_SECRET)), '401 unknown_key');
      const noPerm = await approve(e1.url, id, 'pre:0', NO_APPROVE_SECRET);
      assert.equal(noPerm.status, 403, JSON.stringify(noPerm.body));
      assert.equal(noPerm.body.details.required_permission, 'agent_teams.approve');
      assert.equal(reasonOf(await approve(e1.url, id, 'pre:1', OTHER_SECRET)), '404 not_found');
      const bad = await call(e1.url, 'POST', approvalPath(id, 'pre:0'), { secret: OTHER_SECRET, body: { decision: 'maybe' } });
      assert.equal(bad.status, 400, JSON.stringify(bad.body));
      const extra = await call(e1.url, 'POST', approvalPath(id, 'pre:0'), {
        secret: OTHER_SECRET,
        body: { decision: 'approve', by: 'usr_9' },
      });
      assert.equal(extra.status, 400, JSON.stringify(extra.body));
      assert.deepEqual((await call(e1.url, 'GET', `${RUNS}/${id}`)).body.pending_approvals[0].decisions, []);

      // One approver decides; a second voice of the same principal is refused.
      const d1 = await approve(e1.url, id, 'pre:0', OTHER_SECRET, 'checked the gauge');
      assert.equal(d1.status, 200, JSON.stringify(d1.body));
      assert.deepEqual(
        d1.body.pending_approvals[0].decisions.map((d: any) => [d.principal, d.decision, d.comment, d.input_hash]),
        [['usr_2', 'approve', 'checked the gauge', pa.input_hash]],
      );
      assert.equal(reasonOf(await approve(e1.url, id, 'pre:0', OTHER_SECRET)), '409 already_decided');

      // usr_5's DPoP-bound token: refused without its proof (and as a bearer token), honoured with it.
      const htu = e1.url + approvalPath(id, 'pre:0');
      const noProof = await call(e1.url, 'POST', approvalPath(id, 'pre:0'), {
        headers: { authorization: `DPoP ${token}` },
        body: { decision: 'approve' },
      });
      assert.equal(noProof.status, 401, JSON.stringify(noProof.body));
      const asBearer = await call(e1.url, 'POST', approvalPath(id, 'pre:0'), { secret: token, body: { decision: 'approve' } });
      assert.equal(asBearer.status, 401, JSON.stringify(asBearer.body));
      const withProof = await call(e1.url, 'POST', approvalPath(id, 'pre:0'), {
        headers: { authorization: `DPoP ${token}`, dpop: await proofFor(htu, Math.floor((T0 + 2000) / 1000)) },
        body: { decision: 'approve', comment: 'second person' },
      });
      assert.equal(withProof.status, 200, JSON.stringify(withProof.body));

      // Two distinct people approved: the run goes on to the named approver's step.
      v = await until(e1.url, id, (r) => r.pending_approvals.some((a: any) => a.step_id === 'pre:1') || ENDED(r));
      assert.deepEqual(v.pending_approvals[0].approvers, ['usr_2']);
      assert.equal(reasonOf(await approve(e1.url, id, 'pre:1', APPROVER_SECRET)), '403 not_an_approver');
      assert.equal((await approve(e1.url, id, 'pre:1', OTHER_SECRET)).status, 200);
      v = await until(e1.url, id, ENDED);
      assert.equal(v.state, 'completed', JSON.stringify(v));
      assert.deepEqual(v.pending_approvals, []);
      assert.deepEqual(
        v.decisions.map((d: any) => [d.step_id, d.principal, d.decision]),
        [
          ['pre:0', 'usr_2', 'approve'],
          ['pre:0', 'usr_5', 'approve'],
          ['pre:1', 'usr_2', 'approve'],
        ],
      );
      // Each decision is a device-signed journal record naming the approver, the digest and the key bundle.
      const j = (await call(e1.url, 'GET', `/api/public/v1/admin/jobs/runs/${id}/journal`)).body.records as any[];
      assert.equal((await verifyJournal(j, () => w.device.public_jwk)).ok, true);
      const recs = j.filter((r) => r.kind === 'approval_received');
      assert.deepEqual(
        recs.map((r) => [
          r.step_id,
          r.data.by,
          r.data.chain,
          r.data.input_hash === pa.input_hash || r.step_id === 'pre:1',
          r.data.key_bundle,
        ]),
        [
          ['pre:0', 'usr_2', ['usr_2'], true, 1],
          ['pre:0', 'usr_5', ['usr_5'], true, 1],
          ['pre:1', 'usr_2', ['usr_2'], true, 1],
        ],
      );
      const approved = j.find((r) => r.kind === 'decision' && r.step_id === 'pre:0');
      assert.deepEqual(approved.data.approved_by, ['usr_2', 'usr_5']);
      assert.equal(approved.data.requester, 'usr_1');

      // An ended run takes no decision: a cancelled run's pending step is 409 run_terminal.
      const c = (await call(e1.url, 'POST', RUNS, { body: { input: 'Inspect pump 8.' } })).body.run_id as string;
      await until(e1.url, c, (r) => r.state === 'waiting');
      assert.equal((await call(e1.url, 'POST', `${RUNS}/${c}/cancel`)).status, 200);
      await until(e1.url, c, ENDED);
      assert.equal(reasonOf(await approve(e1.url, c, 'pre:0', OTHER_SECRET)), '409 run_terminal');

      // A counted rejection refuses the run, naming who rejected it and why.
      const rj = (await call(e1.url, 'POST', RUNS, { body: { input: 'Inspect pump 11.' } })).body.run_id as string;
      await until(e1.url, rj, (r) => r.state === 'waiting');
      const no = await call(e1.url, 'POST', approvalPath(rj, 'pre:0'), {
        secret: OTHER_SECRET,
        body: { decision: 'reject', comment: 'pressure too high' },
      });
      assert.equal(no.status, 200, JSON.stringify(no.body));
      const refused = await until(e1.url, rj, ENDED);
      assert.deepEqual([refused.state, refused.reason], ['refused', 'approval_rejected']);
      assert.deepEqual(
        refused.decisions.map((d: any) => [d.principal, d.decision, d.comment]),
        [['usr_2', 'reject', 'pressure too high']],
      );

      // Two more runs wait on their first approval when the device is killed.
      waitingRun = (await call(e1.url, 'POST', RUNS, { body: { input: 'Inspect pump 9.' } })).body.run_id;
      timingOutRun = (await call(e1.url, 'POST', RUNS, { body: { input: 'Inspect pump 10.' } })).body.run_id;
      await until(e1.url, waitingRun, (r) => r.state === 'waiting');
      await until(e1.url, timingOutRun, (r) => r.state === 'waiting');
      assert.equal((await approve(e1.url, waitingRun, 'pre:0', OTHER_SECRET)).status, 200);

      // The CLI lists them from the data dir while the device serves.
      const listed = JSON.parse((await run(process.execPath, [EDGE, 'approvals', 'list', '--data', w.dir])).stdout);
      assert.deepEqual(
        listed.approvals.map((a: any) => [a.run_id, a.step_id, a.decisions.length]).sort(),
        [
          [waitingRun, 'pre:0', 1],
          [timingOutRun, 'pre:0', 0],
        ].sort(),
      );
    } finally {
      await kill(e1.proc);
    }

    // A newer key bundle revokes usr_3's key; the device starts again with it, at the same time.
    const v2 = join(w.dir, 'keys.v2.bundle');
    writeFileSync(
      v2,
      await buildKeyBundle({
        issuer: 'cell-a',
        signer: w.cellSigner,
        audience: w.device.device_id,
        version: 2,
        issuedAt: T0 + 500,
        expiresAt: T0 + 86_400_000,
        records: w.keyRecords.map((r) => (r.key_id === 'key_4' ? { ...r, status: 'revoked' as const } : r)),
        tombstones: [],
        tokens: { issuer: TOKEN_ISSUER, keys: [{ kid: signing.kid, x, kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA' }], revoked: [] },
      }),
    );
    const e2 = await serve(w, v2, offset + 5000);
    try {
      const still = (await call(e2.url, 'GET', `${RUNS}/${waitingRun}`)).body;
      assert.equal(still.state, 'waiting');
      assert.deepEqual(
        still.pending_approvals.map((a: any) => [a.step_id, a.decisions.map((d: any) => d.principal)]),
        [['pre:0', ['usr_2']]],
      );
      // usr_3 could approve under bundle 1; its key is revoked in bundle 2.
      assert.equal(reasonOf(await approve(e2.url, waitingRun, 'pre:0', APPROVER_SECRET)), '401 revoked');
      // usr_4 is a second person, but without the permission to decide.
      assert.equal((await approve(e2.url, waitingRun, 'pre:0', NO_APPROVE_SECRET)).status, 403);
      const htu = e2.url + approvalPath(waitingRun, 'pre:0');
      const d = await call(e2.url, 'POST', approvalPath(waitingRun, 'pre:0'), {
        headers: { authorization: `DPoP ${token}`, dpop: await proofFor(htu, Math.floor((T0 + 7000) / 1000)) },
        body: { decision: 'approve' },
      });
      assert.equal(d.status, 200, JSON.stringify(d.body));
      await until(e2.url, waitingRun, (r) => r.pending_approvals.some((a: any) => a.step_id === 'pre:1'));
      assert.equal((await approve(e2.url, waitingRun, 'pre:1', OTHER_SECRET)).status, 200);
      const done = await until(e2.url, waitingRun, ENDED);
      assert.equal(done.state, 'completed', JSON.stringify(done));
      assert.equal((await call(e2.url, 'GET', `${RUNS}/${timingOutRun}`)).body.state, 'waiting');
    } finally {
      await kill(e2.proc);
    }

    // Started again past the approval's timeout: the durable timer ends the run as at the cell.
    const e3 = await serve(w, v2, offset + HOUR + 60_000);
    try {
      const out = await until(e3.url, timingOutRun, ENDED);
      assert.equal(out.state, 'refused', JSON.stringify(out));
      assert.equal(out.reason, 'approval_timeout');
      assert.deepEqual(out.pending_approvals, []);
      const j = (await call(e3.url, 'GET', `/api/public/v1/admin/jobs/runs/${timingOutRun}/journal`)).body.records as any[];
      assert.equal(j.find((r) => r.kind === 'decision' && r.step_id === 'pre:0')?.data.decision, 'timeout');
      assert.equal((await verifyJournal(j, () => w.device.public_jwk)).ok, true);
      const listed = JSON.parse((await run(process.execPath, [EDGE, 'approvals', 'list', '--data', w.dir])).stdout);
      assert.deepEqual(listed.approvals, []);
    } finally {
      await kill(e3.proc);
    }
  } finally {
    rmSync(w.dir, { recursive: true, force: true });
  }
});
