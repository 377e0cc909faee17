// A tool call under permission mode `ask` on the device (issue #39, section 3): the crew is no longer refused
// as device_tools_unavailable; the seat's call waits offline (a pending approval of kind tool_call, in the
// cell's shape), an approver's decision at the device lets exactly that call run, and the call's step record
// names who approved it. The approver decides with the cell's certificate-bound access token for the device
// (RFC 8705): refused without its client certificate, honoured with it. The tiny local model is forced to call
// (tool_choice required).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { importJWK, SignJWT, type JWK } from 'jose';
import { generateEd25519 } from '../../bundles/codec.ts';
import { certThumbprint } from '../../core/tokens/cnf.ts';
import { findRuntime } from '../../runtime/local-model.ts';
import { edgeWorld, OTHER_SECRET, T0, TOKEN_ISSUER } from './_edge-fixtures.ts';
import { start } from './_offline-app.ts';

let skip: string | false = false;
try {
  findRuntime();
} catch {
  skip = 'edge-runtime/ is not installed (make edge-runtime)';
}

const RUNS = '/api/public/v1/admin/agent-teams/crews/crw_1/runs';

test('a tool call under ask waits on the device and runs once approved there', { skip, timeout: 120_000 }, async () => {
  const signing = await generateEd25519();
  const w = await edgeWorld({
    maxTokens: 24,
    otherOwnerKey: true,
    tokens: { keys: [{ kid: signing.kid, x: (signing.publicJwk as { x: string }).x }] },
    policies: { a: { authority_cap: { allowed_tools: ['clock.now'], permission_mode: 'ask' }, tool_choice: 'required' } },
  });
  try {
    const e = await start(w);
    const p = await e.req('POST', RUNS, { input: 'What time is it?' });
    assert.equal(p.status, 202, JSON.stringify(p.body));
    const id = p.body.run_id as string;
    const next = async () => {
      for (let i = 0; i < 2000; i++) {
        const v = (await e.req('GET', `${RUNS}/${id}`)).body;
        if (v.state !== 'running') return v;
        await new Promise((r) => setTimeout(r, 25));
      }
      assert.fail('the run never stopped running');
    };
    let v = await next();
    assert.equal(v.state, 'waiting', JSON.stringify(v));
    assert.equal(v.pending_approvals.length, 1);
    const pa = v.pending_approvals[0];
    assert.deepEqual([pa.kind, pa.rule, pa.quorum, pa.prompt], ['tool_call', 'quorum', 1, 'tool clock.now']);
    // Nothing ran before the decision.
    const before = (await e.req('GET', `/api/public/v1/admin/jobs/runs/${id}/journal`)).body.records as any[];
    assert.equal(before.filter((r) => r.kind === 'step' && r.data?.tool === 'clock.now').length, 0);
    // usr_2's token for the device, bound to its client certificate (a leaf the client CA verified).
    const leaf = Buffer.from('the approver leaf certificate (DER)');
    const token = await new SignJWT({
      iss: TOKEN_ISSUER,
      sub: 'usr_2',
      aud: `edge:${w.device.device_id}`,
      client_id: 'field-client',
      scope: 'agent_teams.approve',
      jti: 'tok-cert',
      iat: T0 / 1000,
      exp: T0 / 1000 + 3600,
      cnf: { 'x5t#S256': await certThumbprint(leaf) },
    })
      .setProtectedHeader({ alg: 'EdDSA', typ: 'at+jwt', kid: signing.kid })
      .sign(await importJWK(signing.privateJwk as JWK, 'EdDSA'));
    const tls = { getPeerCertificate: () => ({ raw: leaf, subject: { CN: 'approver' } }), authorized: true };
    const path = `${RUNS}/${id}/approvals/${encodeURIComponent(pa.step_id)}`;
    const bare = await e.req('POST', path, { decision: 'approve' }, token);
    assert.equal(`${bare.status} ${bare.body.details?.reason}`, '401 cert_required', JSON.stringify(bare.body));
    const d = await e.req('POST', path, { decision: 'approve', comment: 'read the clock' }, token, tls);
    assert.equal(d.status, 200, JSON.stringify(d.body));
    // The model may call again (each call asks again): approve what it asks until the run ends.
    for (let i = 0; i < 8; i++) {
      v = await next();
      if (v.state !== 'waiting') break;
      for (const a of v.pending_approvals)
        await e.req('POST', `${RUNS}/${id}/approvals/${encodeURIComponent(a.step_id)}`, { decision: 'approve' }, OTHER_SECRET);
    }
    assert.equal(v.state, 'completed', JSON.stringify(v));
    const records = (await e.req('GET', `/api/public/v1/admin/jobs/runs/${id}/journal`)).body.records as any[];
    const call = records.find((r) => r.kind === 'step' && r.step_id === pa.step_id);
    assert.equal(call?.data.tool, 'clock.now', JSON.stringify(call));
    assert.deepEqual(call.data.approved_by, ['usr_2']);
    assert.equal(call.data.approvals[0].comment, 'read the clock');
    assert.equal(call.input_hash, pa.input_hash);
  } finally {
    rmSync(w.dir, { recursive: true, force: true });
  }
});
