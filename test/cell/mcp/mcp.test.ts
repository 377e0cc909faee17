// The cell's MCP endpoint in process, with the reference SDK's client: tools listed per caller by
// the routes' own checks (a narrow key sees and calls only what it may), a crew run answered with
// its output and a receipt that verifies against the cell's published keys and the run's journal,
// progress only when asked for, approvals through the client's elicitation (and the requester
// refused on its own two-person step), waiting answered when the client cannot elicit, the client's
// cancel cancelling the run, a published endpoint as a tool, input schemas, sessions bound to their
// caller, Origin checks and authentication.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ErrorCode, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { verifyReceipt } from '../../../core/mcp-receipts/verify.ts';
import type { JournalRecord } from '../../../core/journal/record.ts';
import { actor } from '../../helpers/actors.ts';
import { inProcessFetch, mcpClient, publishedKeys } from '../../helpers/mcp-endpoint.ts';
import { A, T, crewFixture, ok, team, type Api } from '../../helpers/teams.ts';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import type { FakeOpenAI } from '../../fixtures/openai-server.ts';
import { lastUser } from '../../fixtures/openai-server.ts';
import { until } from '../../helpers/until.ts';
import { basic, form } from '../../helpers/oauth.ts';

const URL_ = 'http://127.0.0.1/mcp';
let t: InProcess;
let ai: FakeOpenAI;
let api: Api;
let fetchIn: ReturnType<typeof inProcessFetch>;
const crews: Record<string, string> = {};
const NO_TOOLS = { allowed_tools: [], permission_mode: 'auto', clearance_level: 0 };

before(async () => {
  ({ t, ai, api } = await crewFixture());
  fetchIn = inProcessFetch(t);
  ai.setResponder((req) => ({ content: `echo:${lastUser(req)}` }));
  crews['plain'] = (
    await team(api, 'sequential', [{ role: 'writer', cap: NO_TOOLS }], {
      purpose: 'Writes one line about a topic.',
      input_schema: {
        type: 'object',
        properties: { topic: { type: 'string', maxLength: 50 } },
        required: ['topic'],
        additionalProperties: false,
      },
    })
  ).crew;
  crews['tools'] = (await team(api, 'sequential', [{ role: 'calculator' }])).crew;
  crews['quorum'] = (
    await team(api, 'sequential', [{ role: 'q', cap: NO_TOOLS }], {
      post: [{ kind: 'human_approval', config: { rule: 'quorum', quorum: 1, timeout_ms: 3_600_000, prompt: 'ship it?' } }],
    })
  ).crew;
  crews['twoPerson'] = (
    await team(api, 'sequential', [{ role: 'p', cap: NO_TOOLS }], {
      post: [{ kind: 'human_approval', config: { rule: 'two_person', timeout_ms: 3_600_000 } }],
    })
  ).crew;
});
after(async () => {
  await ai.close();
  await t.close();
});

const structured = (r: unknown) => (r as CallToolResult).structuredContent as Record<string, any>;
const names = async (token: string) => (await (await mcpClient(fetchIn, URL_, token)).listTools()).tools.map((x) => x.name).sort();
const journal = async (runId: string) =>
  (await t.request('GET', `${A}/jobs/runs/${runId}/journal`, { token: t.adminKey })).body.records as JournalRecord[];
/** The run of the plain crew started with `topic`, as the admin sees it. */
const plainRunOf = async (topic: string) => {
  const runs = await t.request('GET', `${T}/crews/${crews['plain']}/runs?limit=1000`, { token: t.adminKey });
  return (runs.body.runs as { run_id: string; input: unknown }[]).find((x) => JSON.stringify(x.input) === JSON.stringify({ topic }))
    ?.run_id;
};
const plainRunState = async (runId: string) =>
  (await t.request('GET', `${T}/crews/${crews['plain']}/runs/${runId}`, { token: t.adminKey })).body.state as string;
/** Holds the model's answers until `release()`; `restore()` releases and answers at once again. */
const holdModel = () => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  ai.setResponder(async (req) => {
    await held;
    return { content: `echo:${lastUser(req)}` };
  });
  return {
    release: () => release(),
    restore: () => {
      release();
      ai.setResponder((req) => ({ content: `echo:${lastUser(req)}` }));
    },
  };
};

test('tools/list shows each caller what it may call, and no more', async () => {
  const all = await names(t.adminKey);
  for (const c of Object.values(crews)) assert.ok(all.includes(`crew_${c}`), c);
  assert.ok(all.includes('run_status') && all.includes('journal_verify') && all.includes('approval_decide'));
  const reader = await actor(t, { permissions: ['agent_teams.read'] });
  assert.deepEqual(await names(reader.key), ['run_status']);
  // Calling a crew it was not shown: the run route's permission, refused the same way.
  const asReader = await (await mcpClient(fetchIn, URL_, reader.key)).callTool({
    name: `crew_${crews['plain']}`,
    arguments: { topic: 'x' },
  });
  assert.equal(asReader.isError, true);
  assert.equal(JSON.parse((asReader.content as { text: string }[])[0]!.text).details.required_permission, 'agent_teams.write');
  const decideAsReader = await (await mcpClient(fetchIn, URL_, reader.key)).callTool({
    name: 'approval_decide',
    arguments: { run_id: 'run_00000000000000000000', step_id: 's', decision: 'approve' },
  });
  assert.equal(JSON.parse((decideAsReader.content as { text: string }[])[0]!.text).details.required_permission, 'agent_teams.approve');
  // May run crews, but its ceiling holds no tool: only the crews whose seats hold none.
  const narrow = await actor(t, {
    permissions: ['agent_teams.write', 'agent_teams.read'],
    authority: { allowed_tools: [], permission_mode: 'auto', clearance_level: 0 },
  });
  const seen = await names(narrow.key);
  assert.ok(seen.includes(`crew_${crews['plain']}`));
  assert.ok(!seen.includes(`crew_${crews['tools']}`), 'a crew whose seat holds tools the caller lacks is not listed');
  // Calling it anyway is the run route's refusal, audited.
  const c = await mcpClient(fetchIn, URL_, narrow.key);
  const r = await c.callTool({ name: `crew_${crews['tools']}`, arguments: { input: 'x' } });
  assert.equal(r.isError, true);
  const env = JSON.parse((r.content as { text: string }[])[0]!.text);
  assert.equal(env.error, 'forbidden');
  assert.equal(env.details.reason, 'wider_than_caller');
  const audit = await t.request('GET', `${A}/audit?actor=${narrow.id}&action=crew.run`, { token: t.adminKey });
  assert.ok(
    (audit.body.entries as { outcome: string }[]).some((e) => e.outcome === 'refused'),
    audit.text,
  );
  // A name that is no tool of this cell is the protocol's invalid-params error.
  await assert.rejects(c.callTool({ name: 'crew_crw_00000000000000000000', arguments: {} }), (e: unknown) => {
    assert.ok(e instanceof McpError);
    assert.equal(e.code, ErrorCode.InvalidParams);
    return true;
  });
});

test('a crew call answers its output with a receipt that verifies offline against the published keys and the journal', async () => {
  const c = await mcpClient(fetchIn, URL_, t.adminKey);
  const tool = (await c.listTools()).tools.find((x) => x.name === `crew_${crews['plain']}`)!;
  assert.equal(tool.description?.includes('Writes one line about a topic.'), true);
  assert.deepEqual(tool.inputSchema.required, ['topic']);
  const progress: string[] = [];
  const r = await c.callTool({ name: tool.name, arguments: { topic: 'tides' } }, undefined, {
    onprogress: (p) => progress.push(p.message ?? ''),
  });
  assert.equal(r.isError, undefined);
  const s = structured(r);
  assert.equal(s.state, 'completed');
  assert.match(String(s.output), /tides/);
  assert.ok(progress.includes('run_finished run'), 'each record is a progress notification');
  const keys = await publishedKeys(fetchIn, 'http://127.0.0.1');
  const v = await verifyReceipt(s.receipt, keys, { output: s.output, journal: await journal(s.run_id) });
  assert.equal(v.ok, true, JSON.stringify(v));
  assert.equal(s.receipt.run_id, s.run_id);
  // The same run over the HTTP API is the same run.
  const run = await t.request('GET', `${T}/crews/${crews['plain']}/runs/${s.run_id}`, { token: t.adminKey });
  assert.equal(run.body.graph_hash, s.receipt.graph_hash);
  // A receipt over another output does not verify.
  assert.equal((await verifyReceipt(s.receipt, keys, { output: 'something else' })).ok, false);
});

test('input schemas: the formation declares the input, both the tool and the HTTP route check it', async () => {
  const c = await mcpClient(fetchIn, URL_, t.adminKey);
  const bad = await c.callTool({ name: `crew_${crews['plain']}`, arguments: { topic: 'x'.repeat(51) } });
  assert.equal(bad.isError, true);
  assert.equal(JSON.parse((bad.content as { text: string }[])[0]!.text).details.reason, 'invalid_input');
  const http = await t.request('POST', `${T}/crews/${crews['plain']}/runs`, { token: t.adminKey, body: { input: { nope: 1 } } });
  assert.equal(http.status, 400);
  assert.equal(http.body.details.reason, 'invalid_input');
  // A formation without an input schema takes any input as the argument `input`.
  const tool = (await c.listTools()).tools.find((x) => x.name === `crew_${crews['tools']}`)!;
  assert.deepEqual(Object.keys(tool.inputSchema.properties ?? {}), ['input']);
  const badSchema = await t.request('POST', `${T}/formations`, {
    token: t.adminKey,
    body: { name: 'x', input_schema: { type: 'object', $ref: '#' } },
  });
  assert.equal(badSchema.status, 400);
  assert.equal(badSchema.body.details.reason, 'invalid_input_schema');
});

test('progress notifications are sent only to a client that asked for them', async () => {
  const c = await mcpClient(fetchIn, URL_, t.adminKey);
  let notified = 0;
  c.setNotificationHandler((await import('@modelcontextprotocol/sdk/types.js')).ProgressNotificationSchema, () => {
    notified++;
  });
  const r = await c.callTool({ name: `crew_${crews['plain']}`, arguments: { topic: 'quiet' } });
  assert.equal(structured(r).state, 'completed');
  assert.equal(notified, 0);
});

test('an approval step is asked through the client (elicitation) and decided by the caller', async () => {
  const asked: string[] = [];
  const c = await mcpClient(fetchIn, URL_, t.adminKey, {
    onElicit: (p) => {
      asked.push(p.message);
      return { action: 'accept', content: { decision: 'approve', comment: 'fine' } };
    },
  });
  const r = await c.callTool({ name: `crew_${crews['quorum']}`, arguments: { input: 'ship' } });
  const s = structured(r);
  assert.equal(s.state, 'completed', JSON.stringify(s));
  assert.equal(asked.length, 1);
  assert.match(asked[0]!, /ship it\?/);
  const records = await journal(s.run_id);
  const got = records.find((x) => x.kind === 'approval_received');
  const owner = (await t.request('GET', `${A}/whoami`, { token: t.adminKey })).body.principal.id;
  assert.equal(got?.data?.['by'], owner);
  assert.equal((await verifyReceipt(s.receipt, await publishedKeys(fetchIn, 'http://127.0.0.1'), { journal: records })).ok, true);
});

test('a reject through elicitation refuses the run; a client without elicitation gets the waiting run, then approval_decide', async () => {
  const rejecting = await mcpClient(fetchIn, URL_, t.adminKey, { onElicit: () => ({ action: 'decline' }) });
  const rejected = structured(await rejectingCall(rejecting));
  assert.equal(rejected.state, 'refused');
  assert.equal(rejected.error.reason, 'approval_rejected');

  const plain = await mcpClient(fetchIn, URL_, t.adminKey);
  const w = structured(await plain.callTool({ name: `crew_${crews['quorum']}`, arguments: { input: 'later' } }));
  assert.equal(w.state, 'waiting');
  assert.equal(w.pending_approvals.length, 1);
  assert.match(w.note, /approval_decide/);
  assert.equal((await verifyReceipt(w.receipt, await publishedKeys(fetchIn, 'http://127.0.0.1'))).ok, true);
  const d = structured(
    await plain.callTool({
      name: 'approval_decide',
      arguments: { run_id: w.run_id, step_id: w.pending_approvals[0].step_id, decision: 'approve' },
    }),
  );
  assert.equal(d.run_id, w.run_id);
  const done = await until('the run completes', async () => {
    const s = structured(await plain.callTool({ name: 'run_status', arguments: { run_id: w.run_id } }));
    return s.state === 'completed' ? s : null;
  });
  assert.equal((await verifyReceipt(done.receipt, await publishedKeys(fetchIn, 'http://127.0.0.1'), { output: done.output })).ok, true);
});

function rejectingCall(c: Awaited<ReturnType<typeof mcpClient>>) {
  return c.callTool({ name: `crew_${crews['quorum']}`, arguments: { input: 'no' } });
}

test('the requester never approves its own two-person step, whatever the client answers', async () => {
  const c = await mcpClient(fetchIn, URL_, t.adminKey, { onElicit: () => ({ action: 'accept', content: { decision: 'approve' } }) });
  const s = structured(await c.callTool({ name: `crew_${crews['twoPerson']}`, arguments: { input: 'mine' } }));
  assert.equal(s.state, 'waiting');
  assert.match(s.note, /requester_cannot_approve/);
  const records = await journal(s.run_id);
  assert.equal(
    records.some((x) => x.kind === 'approval_received'),
    false,
    'no decision was recorded',
  );
  // Another approver, through the tool, counts; the run still needs a second one.
  const approver = await actor(t, { permissions: ['agent_teams.approve', 'agent_teams.read'] });
  const other = await mcpClient(fetchIn, URL_, approver.key);
  const after = structured(
    await other.callTool({
      name: 'approval_decide',
      arguments: { run_id: s.run_id, step_id: s.pending_approvals[0].step_id, decision: 'approve' },
    }),
  );
  assert.equal(after.pending_approvals[0].decisions.length, 1);
});

/** A principal that may run the tool-less crews and approve their steps, with its role's name. */
const runnerApprover = () =>
  actor(t, {
    permissions: ['agent_teams.write', 'agent_teams.read', 'agent_teams.approve'],
    authority: { allowed_tools: [], permission_mode: 'auto', clearance_level: 0 },
  });

test('a decision made in a call is made with the authority the caller holds then, not when the call began', async () => {
  const a = await runnerApprover();
  const c = await mcpClient(fetchIn, URL_, a.key, {
    // While the call waits on the step, the caller's role loses agent_teams.approve; then it answers "approve".
    onElicit: async () => {
      const r = await t.request('PATCH', `${A}/roles/${a.role}`, {
        token: t.adminKey,
        body: { permissions: ['agent_teams.write', 'agent_teams.read'] },
      });
      assert.equal(r.status, 200, r.text);
      return { action: 'accept', content: { decision: 'approve' } };
    },
  });
  const s = structured(await c.callTool({ name: `crew_${crews['quorum']}`, arguments: { input: 'narrowed' } }));
  assert.equal(s.state, 'waiting', JSON.stringify(s));
  assert.match(s.note, /refused \(forbidden\)/);
  assert.equal(
    (await journal(s.run_id)).some((x) => x.kind === 'approval_received'),
    false,
    'no decision was recorded',
  );
});

test('a credential revoked while its call waits on an approval ends the call with the refusal; the run waits on', {
  timeout: 60_000,
}, async () => {
  const a = await runnerApprover();
  let runId: string | undefined;
  const c = await mcpClient(fetchIn, URL_, a.key, {
    // While the call waits on the step, the key is revoked; the answer the client then posts is refused at the gateway.
    onElicit: async (p) => {
      runId = /run (\S+),/.exec(p.message)?.[1];
      const r = await t.request('POST', `${A}/api-keys/${a.keyId}/revoke`, { token: t.adminKey });
      assert.equal(r.status, 200, r.text);
      return { action: 'accept', content: { decision: 'approve' } };
    },
  });
  const r = await c.callTool({ name: `crew_${crews['quorum']}`, arguments: { input: 'revoked' } });
  assert.equal(r.isError, true, JSON.stringify(r));
  const env = JSON.parse((r.content as { text: string }[])[0]!.text);
  assert.equal(env.error, 'unauthorized');
  assert.ok(runId);
  const run = await t.request('GET', `${T}/crews/${crews['quorum']}/runs/${runId}`, { token: t.adminKey });
  assert.equal(run.body.state, 'waiting', 'the run is neither approved nor cancelled');
  assert.equal(
    (await journal(runId!)).some((x) => x.kind === 'approval_received'),
    false,
  );
});

test('an OAuth token for /mcp revoked while its call waits on an approval ends the call; no decision is recorded', {
  timeout: 60_000,
}, async () => {
  const a = await runnerApprover();
  // The key serves as the client secret (client_credentials); the token is for /mcp.
  const tok = await form(
    t,
    '/oauth/token',
    { grant_type: 'client_credentials', resource: `${t.modules.oauth.api.publicBase()}/mcp` },
    basic(a.keyId, a.key),
  );
  assert.equal(tok.status, 200, tok.text);
  let runId: string | undefined;
  const c = await mcpClient(fetchIn, URL_, tok.body.access_token, {
    onElicit: async (p) => {
      runId = /run (\S+),/.exec(p.message)?.[1];
      const r = await form(t, '/oauth/revoke', { token: tok.body.access_token }, basic(a.keyId, a.key));
      assert.equal(r.status, 200, r.text);
      return { action: 'accept', content: { decision: 'approve' } };
    },
  });
  const r = await c.callTool({ name: `crew_${crews['quorum']}`, arguments: { input: 'token revoked' } });
  assert.equal(r.isError, true, JSON.stringify(r));
  assert.equal(JSON.parse((r.content as { text: string }[])[0]!.text).error, 'unauthorized');
  assert.ok(runId);
  assert.equal(
    (await journal(runId!)).some((x) => x.kind === 'approval_received'),
    false,
  );
});

test('a credential revoked while its call follows a running run ends the call with the refusal; the run goes on', {
  timeout: 60_000,
}, async () => {
  const a = await runnerApprover();
  const model = holdModel();
  try {
    const c = await mcpClient(fetchIn, URL_, a.key);
    let revoking: Promise<void> | undefined;
    // Once the run is under way (its start committed with its first call's reservation), the key is
    // revoked; the model is still held.
    const r = await c.callTool({ name: `crew_${crews['plain']}`, arguments: { topic: 'revoked mid-run' } }, undefined, {
      onprogress: (p) => {
        if (revoking || !p.message?.startsWith('run_started ')) return;
        revoking = (async () => {
          const k = await t.request('POST', `${A}/api-keys/${a.keyId}/revoke`, { token: t.adminKey });
          assert.equal(k.status, 200, k.text);
        })();
      },
    });
    await revoking;
    assert.equal(r.isError, true, JSON.stringify(r));
    const env = JSON.parse((r.content as { text: string }[])[0]!.text);
    assert.equal(env.error, 'unauthorized', JSON.stringify(env));
    const runId = await plainRunOf('revoked mid-run');
    assert.ok(runId);
    // The call ended while the run still ran: it was not cancelled, and finishes once the model answers.
    assert.equal(await plainRunState(runId), 'running');
    model.release();
    await until('the run completes', async () => (await plainRunState(runId)) === 'completed');
  } finally {
    model.restore();
  }
});

test("the client's cancel cancels the run", async () => {
  const model = holdModel();
  try {
    const c = await mcpClient(fetchIn, URL_, t.adminKey);
    const abort = new AbortController();
    const call = c.callTool({ name: `crew_${crews['plain']}`, arguments: { topic: 'stop' } }, undefined, {
      signal: abort.signal,
      onprogress: (p) => {
        if (p.message?.startsWith('run_started ')) abort.abort();
      },
    });
    await assert.rejects(call);
    const runId = await plainRunOf('stop');
    assert.ok(runId);
    await until('the run is cancelled', async () => (await plainRunState(runId)) === 'cancelled');
  } finally {
    model.restore();
  }
});

test('a published endpoint is a tool of the callers holding its scopes', async () => {
  const pub = await ok(api, 'POST', `${A}/jobs/endpoints`, {
    name: 'double',
    job_type: 'compute',
    workspace_id: 'w',
    spec: { code: 'return input.n * 2;' },
    required_scopes: ['system.orchestration.admin.read'],
    input_schema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] },
  });
  const holder = await actor(t, { permissions: ['system.orchestration.admin.read'] });
  const outsider = await actor(t, { permissions: ['agent_teams.read'] });
  assert.ok((await names(holder.key)).includes(`endpoint_${pub.endpoint_id}`));
  assert.ok(!(await names(outsider.key)).includes(`endpoint_${pub.endpoint_id}`));
  const c = await mcpClient(fetchIn, URL_, holder.key);
  const s = structured(await c.callTool({ name: `endpoint_${pub.endpoint_id}`, arguments: { n: 21 } }));
  assert.equal(s.state, 'completed');
  assert.equal(s.output.result, 42);
  assert.equal((await verifyReceipt(s.receipt, await publishedKeys(fetchIn, 'http://127.0.0.1'), { output: s.output })).ok, true);
  const denied = await (await mcpClient(fetchIn, URL_, outsider.key)).callTool({
    name: `endpoint_${pub.endpoint_id}`,
    arguments: { n: 1 },
  });
  assert.equal(denied.isError, true);
  assert.equal(JSON.parse((denied.content as { text: string }[])[0]!.text).details.reason, 'missing_scope');
});

test('journal_verify checks a run journal against the published keys', async () => {
  const c = await mcpClient(fetchIn, URL_, t.adminKey);
  const s = structured(await c.callTool({ name: `crew_${crews['plain']}`, arguments: { topic: 'verify' } }));
  const v = structured(await c.callTool({ name: 'journal_verify', arguments: { run_id: s.run_id } }));
  assert.equal(v.ok, true);
  assert.equal(v.journal_head, s.receipt.journal_head);
});

test("a session is its caller's: another credential gets 404; a foreign Origin 403; no credential 401", async () => {
  const c = await mcpClient(fetchIn, URL_, t.adminKey);
  const sessionId = (c.transport as { sessionId?: string }).sessionId!;
  const other = await actor(t, { permissions: ['agent_teams.read'] });
  const headers = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-session-id': sessionId,
    'mcp-protocol-version': '2025-11-25',
  };
  const body = JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list', params: {} });
  const hijack = await fetchIn(URL_, { method: 'POST', headers: { ...headers, authorization: `Bearer ${other.key}` }, body });
  assert.equal(hijack.status, 404);
  const evil = await fetchIn(URL_, {
    method: 'POST',
    headers: { ...headers, authorization: `Bearer ${t.adminKey}`, origin: 'http://evil.example.com' },
    body,
  });
  assert.equal(evil.status, 403);
  const anonymous = await fetchIn(URL_, { method: 'POST', headers, body });
  assert.equal(anonymous.status, 401);
  assert.equal((await anonymous.json()).error, 'unauthorized');
  const own = await fetchIn(URL_, { method: 'POST', headers: { ...headers, authorization: `Bearer ${t.adminKey}` }, body });
  assert.equal(own.status, 200);
});

/** A raw `initialize` asking for protocol `version`, through `f` with `token`. */
const initialize = (f: ReturnType<typeof inProcessFetch>, token: string, version = '2025-11-25') =>
  f(URL_, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${token}` },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    }),
  });

/** The JSON-RPC message of an answer on its event stream (the last `data:` that holds one; a priming event holds none). */
async function messageOf(r: Response): Promise<Record<string, any>> {
  const data = (await r.text()).split('\n').filter((l) => l.startsWith('data: ') && l.length > 'data: '.length);
  assert.ok(data.length > 0, 'the answer holds a message');
  return JSON.parse(data.at(-1)!.slice('data: '.length));
}

test('the newest protocol revision the SDK implements, earlier ones negotiated', async () => {
  for (const v of ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05']) {
    const r = await initialize(fetchIn, t.adminKey, v);
    assert.equal(r.status, 200, v);
    assert.equal((await messageOf(r)).result.protocolVersion, v, v);
  }
  // A revision the cell does not know (the 2026-07-28 among them): the server answers its newest.
  for (const v of ['2026-07-28', '1999-01-01']) {
    assert.equal((await messageOf(await initialize(fetchIn, t.adminKey, v))).result.protocolVersion, '2025-11-25', v);
  }
});

test("/mcp is behind the rate gates of the API: the budget per address, then the key's own rpm", async () => {
  // The key's rate_limit_rpm counts each HTTP request to /mcp as one request.
  const k = await t.request('POST', `${A}/api-keys`, {
    token: t.adminKey,
    body: { name: 'mcp-rpm', scopes: ['agent_teams.read'], rate_limit_rpm: 3 },
  });
  assert.equal(k.status, 201, k.text);
  for (let i = 0; i < 3; i++) assert.equal((await initialize(fetchIn, k.body.secret)).status, 200);
  const over = await initialize(fetchIn, k.body.secret);
  assert.equal(over.status, 429);
  assert.equal((await over.json()).error, 'rate_limited');
  assert.ok(Number(over.headers.get('retry-after')) >= 1);
  // The budget per client address comes first, whatever the credential.
  const small = await inProcessCell({ config: { rate: { capacity: 3, refillPerSecond: 0.001 } } });
  try {
    const f = inProcessFetch(small);
    for (let i = 0; i < 3; i++) assert.equal((await initialize(f, small.adminKey)).status, 200);
    const limited = await initialize(f, small.adminKey);
    assert.equal(limited.status, 429);
    assert.equal((await limited.json()).error, 'rate_limited');
    assert.ok(Number(limited.headers.get('retry-after')) >= 1);
    // Another address has its own budget.
    assert.equal((await initialize(inProcessFetch(small, '10.0.0.7'), small.adminKey)).status, 200);
  } finally {
    await small.close();
  }
});
