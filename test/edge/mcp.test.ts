// /mcp at the edge, in process: the reference SDK's client lists the device's crew as a tool for a key
// of the bundle that may run it (and nothing for one that may not), calls it offline on the tiny local
// model, and gets the output with a receipt signed by the device key, which verifies offline with the
// key the device publishes and the run's journal. A 401 names the device's protected resource metadata.
// The cell's access tokens for the device (aud edge:<device_id>) are judged offline against the key
// bundle's token trust at /mcp as on the device's API: honoured within their scope, refused revoked
// (the bundle's denylist) or addressed to another audience.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { verifyReceipt } from '../../core/mcp-receipts/verify.ts';
import { findRuntime } from '../../runtime/local-model.ts';
import { createEdgeApp } from '../../edge/gateway.ts';
import { mountMcp } from '../../edge/mcp.ts';
import { mountOffline } from '../../edge/offline.ts';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { importJWK, SignJWT } from 'jose';
import { generateEd25519 } from '../../bundles/codec.ts';
import { mcpClient, publishedKeys, type FetchLike } from '../helpers/mcp-endpoint.ts';
import { edgeWorld, NARROW_SECRET, offlineRuntime, SECRET, T0, TOKEN_ISSUER } from './_edge-fixtures.ts';

let skip: string | false = false;
try {
  findRuntime();
} catch {
  skip = 'edge-runtime/ is not installed (npm install --prefix edge-runtime --omit=optional)';
}

/** The device's gateway in process, with its crew, model and key bundle (`tokens`: also the cell's token trust). */
async function edgeMcp(
  tokens?: NonNullable<Parameters<typeof edgeWorld>[0]>['tokens'],
  hold?: Promise<void>,
  calls: { n: number } = { n: 0 },
) {
  const w = await edgeWorld({ narrowKey: true, otherOwnerKey: true, ...(tokens ? { tokens } : {}) });
  const { rt, setup } = await offlineRuntime(w, { capacity: 1000, refillPerSecond: 100 });
  if (hold !== undefined && setup.model) {
    // Every local model call waits for `hold` first: a test holds the run mid-call.
    const m = setup.model;
    const [chat, complete] = [m.chat.bind(m), m.complete.bind(m)];
    m.chat = async (...a: Parameters<typeof m.chat>) => {
      calls.n++;
      await hold;
      return chat(...a);
    };
    m.complete = async (...a: Parameters<typeof m.complete>) => {
      calls.n++;
      await hold;
      return complete(...a);
    };
  }
  const app = createEdgeApp(rt, (a, guard) => mountMcp(a, guard, rt, mountOffline(a, guard, rt, setup), w.device.public_jwk));
  const fetchIn: FetchLike = async (url, init) =>
    app.request(String(url), init, { incoming: { socket: { remoteAddress: '127.0.0.1' } } } as never);
  return { w, fetchIn, cleanup: () => rmSync(w.dir, { recursive: true, force: true }) };
}

const url = 'http://127.0.0.1/mcp';

test('an MCP client runs the device crew offline and verifies the receipt with the device key', { skip, timeout: 120_000 }, async () => {
  const { w, fetchIn, cleanup } = await edgeMcp();
  try {
    const anonymous = await fetchIn(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(anonymous.status, 401);
    assert.match(
      anonymous.headers.get('www-authenticate')!,
      /resource_metadata="http:\/\/127\.0\.0\.1\/\.well-known\/oauth-protected-resource"/,
    );

    const narrow = await mcpClient(fetchIn, url, NARROW_SECRET);
    assert.deepEqual((await narrow.listTools()).tools, [], 'a key that may not run the crew or read runs is shown nothing');
    const denied = await narrow.callTool({ name: 'crew_crw_1', arguments: { input: 'x' } });
    assert.equal(JSON.parse((denied.content as { text: string }[])[0]!.text).details.required_permission, 'agent_teams.write');

    const c = await mcpClient(fetchIn, url, SECRET);
    const names = (await c.listTools()).tools.map((t) => t.name).sort();
    assert.deepEqual(names, ['crew_crw_1', 'journal_verify', 'run_status']);
    const progress: string[] = [];
    const r = await c.callTool({ name: 'crew_crw_1', arguments: { input: 'inspect the pump' } }, undefined, {
      onprogress: (p) => progress.push(p.message ?? ''),
    });
    const s = r.structuredContent as { run_id: string; state: string; output: unknown; receipt: { issuer: string; kid: string } };
    assert.equal(s.state, 'completed', JSON.stringify(s));
    assert.ok(
      progress.some((m) => m.startsWith('run_finished ')),
      JSON.stringify(progress),
    );
    assert.equal(s.receipt.issuer, w.device.device_id);
    assert.equal(s.receipt.kid, w.device.device_id);
    const journal = (await (
      await fetchIn(`http://127.0.0.1/api/public/v1/admin/jobs/runs/${s.run_id}/journal`, {
        headers: { authorization: `Bearer ${SECRET}` },
      })
    ).json()) as {
      records: never[];
    };
    const keys = await publishedKeys(fetchIn, 'http://127.0.0.1');
    const v = await verifyReceipt(s.receipt, keys, { output: s.output, journal: journal.records });
    assert.equal(v.ok, true, JSON.stringify(v));
    const j = (await c.callTool({ name: 'journal_verify', arguments: { run_id: s.run_id } })).structuredContent as { ok: boolean };
    assert.equal(j.ok, true);
    const status = (await c.callTool({ name: 'run_status', arguments: { run_id: s.run_id } })).structuredContent as { state: string };
    assert.equal(status.state, 'completed');
    await c.close();
  } finally {
    cleanup();
  }
});

test("the cell's access tokens for the device are judged offline at /mcp against the key bundle", { skip, timeout: 120_000 }, async () => {
  const signing = await generateEd25519();
  const key = await importJWK(signing.privateJwk as Parameters<typeof importJWK>[0], 'EdDSA');
  const x = (signing.publicJwk as { x: string }).x;
  const { w, fetchIn, cleanup } = await edgeMcp({ keys: [{ kid: signing.kid, x }], revoked: [['tok-revoked', T0 / 1000 + 3600]] });
  const token = (jti: string, over: Record<string, unknown> = {}) =>
    new SignJWT({
      iss: TOKEN_ISSUER,
      sub: 'usr_1',
      aud: `edge:${w.device.device_id}`,
      client_id: 'device-flow-client',
      scope: 'agent_teams system.orchestration.admin.read',
      jti,
      iat: T0 / 1000,
      exp: T0 / 1000 + 3600,
      ...over,
    })
      .setProtectedHeader({ alg: 'EdDSA', typ: 'at+jwt', kid: signing.kid })
      .sign(key);
  try {
    const c = await mcpClient(fetchIn, url, await token('tok-good'));
    assert.deepEqual((await c.listTools()).tools.map((t) => t.name).sort(), ['crew_crw_1', 'journal_verify', 'run_status']);
    const s = (await c.callTool({ name: 'crew_crw_1', arguments: { input: 'check the valve' } })).structuredContent as {
      state: string;
    };
    assert.equal(s.state, 'completed', JSON.stringify(s));
    await c.close();
    // A delegated token (an `act` chain) starts the run with its actors, as the run route does: the two-person
    // rule then keeps every one of them from approving what the run asks (edge/approvals.ts).
    const delegated = await mcpClient(fetchIn, url, await token('tok-act', { act: { sub: 'usr_2' } }));
    const d = (await delegated.callTool({ name: 'crew_crw_1', arguments: { input: 'check the valve again' } })).structuredContent as {
      run_id: string;
    };
    await delegated.close();
    const file = JSON.parse(readFileSync(join(w.dir, 'runs', d.run_id, 'run.json'), 'utf8')) as {
      requester: string;
      requester_actors?: string[];
    };
    assert.equal(file.requester, 'usr_1');
    assert.deepEqual(file.requester_actors, ['usr_2']);
    // Within its scope only: a token for edge.read is shown nothing, and its call is refused.
    const narrow = await mcpClient(fetchIn, url, await token('tok-narrow', { scope: 'edge.read' }));
    assert.deepEqual((await narrow.listTools()).tools, []);
    await narrow.close();
    const init = (bearer: string) =>
      fetchIn(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${bearer}` },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
        }),
      });
    for (const [what, bearer, reason] of [
      ["revoked (on the bundle's denylist)", await token('tok-revoked'), 'revoked'],
      ["for the cell's API", await token('tok-api', { aud: 'https://cell.example/api/public/v1' }), 'bad_audience'],
      ['expired', await token('tok-old', { exp: T0 / 1000 - 60 }), 'expired'],
    ] as const) {
      const r = await init(bearer);
      assert.equal(r.status, 401, what);
      assert.equal(((await r.json()) as { details: { reason: string } }).details.reason, reason, what);
    }
  } finally {
    cleanup();
  }
});

test("a client's cancel of the call cancels the device's run: it ends cancelled before its next call", {
  skip,
  timeout: 120_000,
}, async () => {
  // The local model's first call is held until the client has cancelled: the run is mid-call when it is cancelled.
  let release = () => {};
  const hold = new Promise<void>((r) => {
    release = r;
  });
  const calls = { n: 0 };
  const { w, fetchIn, cleanup } = await edgeMcp(undefined, hold, calls);
  const runFile = () => {
    const ids = existsSync(join(w.dir, 'runs')) ? readdirSync(join(w.dir, 'runs')) : [];
    return ids.length === 1 ? JSON.parse(readFileSync(join(w.dir, 'runs', ids[0]!, 'run.json'), 'utf8')) : null;
  };
  const until = async (what: string, cond: (r: any) => boolean) => {
    for (let i = 0; i < 800; i++) {
      const r = runFile();
      if (r !== null && cond(r)) return r;
      await new Promise((res) => setTimeout(res, 25));
    }
    throw new Error(`the run never ${what}: ${JSON.stringify(runFile())}`);
  };
  try {
    const c = await mcpClient(fetchIn, url, SECRET);
    const ac = new AbortController();
    const call = c.callTool({ name: 'crew_crw_1', arguments: { input: 'inspect the pump' } }, undefined, { signal: ac.signal });
    await until('started', (r) => r.state === 'running');
    ac.abort();
    await assert.rejects(call);
    await until('had its cancel asked for', (r) => r.cancel_requested_by === 'usr_1');
    release();
    const r = await until('ended', (x) => x.state !== 'running');
    assert.equal(r.state, 'cancelled', JSON.stringify(r));
    // The held call finishes (the cancel can land before it started, or while it is held); no call starts after it.
    assert.ok(calls.n <= 1, `model calls: ${calls.n}`);
    const journal = JSON.parse(readFileSync(join(w.dir, 'runs', r.run_id, 'journal.json'), 'utf8')) as {
      records: { kind: string; data?: { outcome?: string } }[];
    };
    assert.equal(journal.records.at(-1)?.kind, 'run_finished');
    assert.equal(journal.records.at(-1)?.data?.outcome, 'cancelled');
    await c.close();
  } finally {
    release();
    cleanup();
  }
});
