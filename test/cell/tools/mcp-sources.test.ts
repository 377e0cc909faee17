// The lifecycle of catalog sources (cell/tools/sources/): registration and its refusals, list, get,
// change, re-pin, delete (refused while something names a tool), audit records; imported tools under
// the catalog's governance (grant, egress, permission modes); names that cannot travel to a model;
// a server that lost its sessions. The server is the reference SDK's, over Streamable HTTP, no auth.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { jobEnded, mcpCell, SOURCES as S } from '../../helpers/mcp.ts';
import { A, ok, provider, team, T } from '../../helpers/teams.ts';
import { startOpenAIServer, type ChatRequestBody } from '../../fixtures/openai-server.ts';
import { startMcpServer } from '../../fixtures/mcp-server.ts';
import { insertSource } from '../../../cell/tools/sources/repository.ts';

async function refused(t: InProcess, method: string, path: string, body: unknown, status: number, reason?: string) {
  const r = await t.request(method, path, { token: t.adminKey, body });
  assert.equal(r.status, status, `${method} ${path}: ${r.text}`);
  if (reason !== undefined) assert.equal(r.body.details?.reason, reason, r.text);
  return r.body;
}

test('registration refuses what a source may not be, and imports only what survives the trip to a model', {
  timeout: 120_000,
}, async () => {
  const { t, mcp, close } = await mcpCell({
    server: { extraTools: ['get__customer', 'with space', 'ok-tool', { name: 'verbose', description: 'x'.repeat(70 * 1024) }] },
  });
  try {
    const src = await ok({ request: t.request, token: t.adminKey }, 'POST', S, { name: 'crm', url: mcp.url, description: 'CRM' }, [201]);
    assert.deepEqual(
      src.tools.map((x: { name: string }) => x.name),
      ['mcp.crm.lookup', 'mcp.crm.note', 'mcp.crm.ok-tool'],
    );
    assert.deepEqual(src.refused_tools.map((x: { tool: string; reason: string }) => [x.tool, x.reason]).sort(), [
      ['get__customer', 'tool_name_unmappable'],
      ['verbose', 'tool_definition_invalid'],
      ['with space', 'tool_name_unmappable'],
    ]);
    assert.match(src.tools[0].pin, /^sha256:[0-9a-f]{64}$/);
    assert.equal(src.origin, 'api');
    assert.equal(src.definition_max_age_ms, 1000);
    // The audit trail names the import.
    const audit = await ok({ request: t.request, token: t.adminKey }, 'GET', `${A}/audit?limit=100`);
    const created = audit.entries.find((e: { action: string }) => e.action === 'catalog.source.create');
    assert.equal(created.target, src.source_id);
    assert.deepEqual(created.details.tools, ['mcp.crm.lookup', 'mcp.crm.note', 'mcp.crm.ok-tool']);

    await refused(t, 'POST', S, { name: 'crm', url: mcp.url }, 409, 'name_taken');
    await refused(t, 'POST', S, { name: 'Bad_Name', url: mcp.url }, 400);
    await refused(t, 'POST', S, { name: 'x1', url: 'ftp://127.0.0.1/mcp' }, 400, 'source_url_invalid');
    await refused(t, 'POST', S, { name: 'x2', url: 'http://user:pw@127.0.0.1/mcp' }, 400, 'source_url_invalid');
    await refused(t, 'POST', S, { name: 'x3', url: 'http://mcp.example.com/mcp' }, 400, 'source_url_invalid');
    await refused(t, 'POST', S, { name: 'x4', url: `${mcp.url}#frag` }, 400, 'source_url_invalid');
    await refused(t, 'POST', S, { name: 'x5', url: 'http://10.1.2.3/mcp' }, 403, 'egress_private_address');
    // No server there.
    await refused(t, 'POST', S, { name: 'x6', url: 'http://127.0.0.1:9/mcp' }, 503, 'source_unreachable');
    // A server that names no authorization server is not one that trusts the cell.
    await refused(t, 'POST', S, { name: 'x7', url: mcp.url, auth: { type: 'cell' } }, 400, 'source_not_protected');
    await refused(
      t,
      'POST',
      S,
      {
        name: 'x8',
        url: mcp.url,
        auth: {
          type: 'client_credentials',
          token_endpoint: `${mcp.origin}/token`,
          client_id: 'c',
          client_secret_id: `sec_${'0'.repeat(20)}`,
        },
      },
      400,
      'unknown_secret',
    );
    // A raw secret is never accepted.
    await refused(
      t,
      'POST',
      S,
      {
        name: 'x9',
        url: mcp.url,
        auth: { type: 'client_credentials', token_endpoint: `${mcp.origin}/token`, client_id: 'c', client_secret: 'raw' },
      },
      400,
    );
    // A stdio source cannot be registered through the API.
    await refused(t, 'POST', S, { name: 'x10', transport: 'stdio', command: 'sh' }, 400);
    assert.equal((await ok({ request: t.request, token: t.adminKey }, 'GET', S)).total, 1, 'no refusal wrote a source');
  } finally {
    await close();
  }
});

test('the air-gapped posture reaches only loopback and what the operator allowed; the floor holds without an allowance', async () => {
  const mcp = await startMcpServer();
  const closed = await inProcessCell();
  const sovereign = await inProcessCell({ config: { posture: 'sovereign', egressAllowPrivate: ['10.0.0.0/8'] } });
  try {
    // Without --egress-allow-private, loopback is refused whatever the caller asks.
    await refused(closed, 'POST', S, { name: 'crm', url: mcp.url }, 403, 'egress_private_address');
    // Sovereign: a public name is refused by the posture before anything is dialled.
    const r = await refused(sovereign, 'POST', S, { name: 'crm', url: 'https://mcp.example.com/mcp' }, 403, 'posture_forbidden');
    assert.equal(r.details.rule, 'sovereign-local-only');
  } finally {
    await closed.close();
    await sovereign.close();
    await mcp.close();
  }
});

test('imported tools obey the floor: grant, egress, and approvals for tools not declared read-only', { timeout: 180_000 }, async () => {
  const { t, mcp, api, close } = await mcpCell();
  const ai = await startOpenAIServer({ apiKey: 'sk-fake' });
  try {
    await provider(api, ai);
    await ok(api, 'POST', S, { name: 'crm', url: mcp.url }, [201]);
    let ask = 'lookup';
    ai.setResponder((req: ChatRequestBody) =>
      req.messages.at(-1)!.role === 'tool'
        ? { content: 'done' }
        : {
            tool_calls: [
              ask === 'lookup'
                ? { name: 'mcp__crm__lookup', arguments: { id: '1' } }
                : { name: 'mcp__crm__note', arguments: { id: '1', text: 'x' } },
            ],
          },
    );
    const run = async (crew: string) => {
      const r = await ok(api, 'POST', `${T}/crews/${crew}/runs`, { input: 'go' });
      await t.modules.teams.teams.settled(r.run_id);
      return ok(api, 'GET', `${T}/crews/${crew}/runs/${r.run_id}`);
    };
    // Egress: the server's origin must be on the seat's allowlist.
    const noEgress = await team(api, 'sequential', [{ role: 'a', cap: { allowed_tools: ['mcp.crm.lookup'], permission_mode: 'auto' } }]);
    let v = await run(noEgress.crew);
    assert.equal(v.state, 'refused');
    assert.equal(v.error.reason, 'egress_denied');
    // The grant: a tool the seat does not hold is refused before anything leaves.
    const lookupOnly = { allowed_tools: ['mcp.crm.lookup'], permission_mode: 'auto-read', egress_allowlist: [mcp.origin] };
    const reader = await team(api, 'sequential', [{ role: 'b', cap: lookupOnly }]);
    ask = 'note';
    v = await run(reader.crew);
    assert.equal(v.error.reason, 'tool_not_granted');
    assert.equal(mcp.calls.length, 0);
    // auto-read: the read-only tool runs, the side-effecting one waits for a human.
    ask = 'lookup';
    v = await run(reader.crew);
    assert.equal(v.state, 'completed', JSON.stringify(v.error));
    const both = { ...lookupOnly, allowed_tools: ['mcp.crm.lookup', 'mcp.crm.note'] };
    const writer = await team(api, 'sequential', [{ role: 'c', cap: both }]);
    ask = 'note';
    v = await run(writer.crew);
    assert.equal(v.state, 'waiting');
    assert.equal(v.pending_approvals[0].kind, 'tool_call');
    assert.deepEqual(
      mcp.calls.map((c) => c.tool),
      ['lookup'],
      'the side-effecting call waits',
    );
    // A governing contract's value gate judges an imported tool's calls as any tool's: a decision, refused.
    const contract = await ok(api, 'POST', `${T}/contracts`, {
      name: 'no-notes',
      rules: [{ name: 'no-notes', expr: 'tool != "mcp.crm.note"' }],
    });
    const gated = await team(api, 'sequential', [
      { role: 'd', cap: { ...both, permission_mode: 'auto', governing_contract_id: contract.contract_id } },
    ]);
    v = await run(gated.crew);
    assert.equal(v.state, 'refused');
    assert.equal(v.error.reason, 'gate_declined');
    assert.equal(mcp.calls.length, 1, 'the gated call never left');
    // Egress: a side-effecting tool acts, so the origin's entry must name POST (the method MCP requests travel
    // with); the entry that lets the seat read (as http.get) lets no call act.
    const readEgress = await team(api, 'sequential', [{ role: 'e', cap: { ...both, permission_mode: 'auto' } }]);
    v = await run(readEgress.crew);
    assert.equal(v.state, 'refused');
    assert.equal(v.error.reason, 'egress_denied');
    assert.equal(v.error.details.method, 'POST');
    assert.equal(v.error.details.destination, mcp.origin);
    assert.equal(mcp.calls.length, 1, 'the call never left');
    const writeEgress = await team(api, 'sequential', [
      { role: 'f', cap: { ...both, permission_mode: 'auto', egress_allowlist: [`POST:${mcp.origin}`] } },
    ]);
    v = await run(writeEgress.crew);
    assert.equal(v.state, 'completed', JSON.stringify(v.error));
    assert.deepEqual(
      mcp.calls.map((c) => c.tool),
      ['lookup', 'note'],
    );
    // An entry naming only POST does not cover reading: the read-only tool needs GET.
    ask = 'lookup';
    const postOnly = await team(api, 'sequential', [
      { role: 'g', cap: { ...lookupOnly, permission_mode: 'auto', egress_allowlist: [`POST:${mcp.origin}`] } },
    ]);
    v = await run(postOnly.crew);
    assert.equal(v.error?.reason, 'egress_denied');
    assert.equal(v.error.details.method, undefined);
    ask = 'note';
    // The server forgot its sessions (a restart): the cell opens a new one and the call goes through once.
    mcp.dropSessions();
    ask = 'lookup';
    v = await run(reader.crew);
    assert.equal(v.state, 'completed', JSON.stringify(v.error));
    assert.deepEqual(
      mcp.calls.map((c) => c.tool),
      ['lookup', 'note', 'lookup'],
    );
  } finally {
    await close();
    await ai.close();
  }
});

test('change, re-pin and delete: immutable fields, removal of a pin, in_use while something names a tool', {
  timeout: 120_000,
}, async () => {
  const { t, mcp, api, close } = await mcpCell();
  const other = await startMcpServer({ jsonResponse: true });
  try {
    const src = await ok(api, 'POST', S, { name: 'crm', url: mcp.url }, [201]);
    const id = src.source_id as string;
    assert.equal((await ok(api, 'GET', `${S}/${id}`)).name, 'crm');
    assert.equal((await ok(api, 'GET', `${S}?limit=1`)).sources.length, 1);
    await refused(t, 'GET', `${S}/src_nope`, undefined, 404);
    await refused(t, 'PATCH', `${S}/${id}`, { name: 'renamed' }, 400, 'immutable_field');
    await refused(t, 'PATCH', `${S}/${id}`, { url: 'http://127.0.0.1:9/mcp' }, 503, 'source_unreachable');
    const moved = await ok(api, 'PATCH', `${S}/${id}`, { url: other.url, definition_max_age_ms: 0, description: 'moved' });
    assert.equal(moved.url, other.url);
    assert.equal(moved.definition_max_age_ms, 0);
    assert.equal(moved.tools.length, 2, 'pins stay');
    // The new server answers in plain JSON rather than SSE: the call goes through all the same.
    const call = await ok(api, 'POST', `${A}/jobs/runs`, {
      job_type: 'single',
      workspace_id: 'w',
      spec: { tool: 'mcp.crm.lookup', args: { id: '5' }, authority: { egress_allowlist: [other.origin] } },
    });
    const done = await jobEnded(api, call.run_id);
    assert.equal(done.state, 'completed', JSON.stringify(done));
    assert.deepEqual(done.output.structuredContent, { id: '5', name: 'Customer 5' });
    assert.deepEqual(
      other.calls.map((c) => c.tool),
      ['lookup'],
    );
    // Two changes read the same source: the second to write is refused, nothing lost silently.
    const both = await Promise.all([
      t.request('PATCH', `${S}/${id}`, { token: t.adminKey, body: { url: mcp.url } }),
      t.request('PATCH', `${S}/${id}`, { token: t.adminKey, body: { url: mcp.url, timeout_ms: 5000 } }),
    ]);
    assert.deepEqual(both.map((r) => r.status).sort(), [200, 409], both.map((r) => r.text).join('\n'));
    assert.equal(both.find((r) => r.status === 409)!.body.details.reason, 'concurrent_update');
    // A blueprint and a formation name one tool: the source cannot go, nor that pin; the other pin can.
    await ok(api, 'POST', `${T}/blueprints`, { name: 'bp', role_label: 'r', authority_template: { allowed_tools: ['mcp.crm.lookup'] } });
    const f = await ok(api, 'POST', `${T}/formations`, { name: 'uses-crm' });
    await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
      role_label: 'r',
      required_skills: [],
      authority_cap: { allowed_tools: ['mcp.crm.lookup'] },
    });
    const busy = await refused(t, 'DELETE', `${S}/${id}`, undefined, 409, 'in_use');
    assert.equal(busy.details.used_by.blueprints.length, 1);
    assert.deepEqual(busy.details.used_by.formations, [f.formation_id]);
    await refused(t, 'POST', `${S}/${id}/pins`, { pins: { lookup: null } }, 409, 'in_use');
    const fewer = await ok(api, 'POST', `${S}/${id}/pins`, { pins: { note: null } });
    assert.deepEqual(
      fewer.tools.map((x: { tool: string }) => x.tool),
      ['lookup'],
    );
    assert.equal(
      (await ok(api, 'GET', `${A}/ai/tool-registry?limit=1000`)).tools.some((x: { name: string }) => x.name === 'mcp.crm.note'),
      false,
    );
    // Re-importing it takes the hash its review shows.
    const review = await ok(api, 'GET', `${S}/${id}/review`);
    const note = review.tools.find((x: { tool: string }) => x.tool === 'note');
    assert.equal(note.status, 'new');
    assert.equal((await ok(api, 'POST', `${S}/${id}/pins`, { pins: { note: note.live_pin } })).tools.length, 2);
    await refused(t, 'POST', `${S}/${id}/pins`, { pins: { nosuch: null } }, 400, 'unknown_tool');
    // An unknown tool in an authority is refused at authoring; an imported one is accepted.
    await refused(
      t,
      'POST',
      `${T}/blueprints`,
      { name: 'bp2', role_label: 'r', authority_template: { allowed_tools: ['mcp.crm.nosuch'] } },
      400,
      'unknown_tool',
    );
  } finally {
    await close();
    await other.close();
  }
});

test('an answer larger than the cell reads fails the call; a stdio source this cell does not configure is unavailable', {
  timeout: 120_000,
}, async () => {
  const { t, mcp, api, close } = await mcpCell({ server: { extraTools: [{ name: 'dump', answerBytes: 1536 * 1024 }] } });
  const single = (tool: string, egress: string) => ({
    job_type: 'single',
    workspace_id: 'w',
    spec: { tool, args: {}, authority: { egress_allowlist: [egress] } },
  });
  try {
    await ok(api, 'POST', S, { name: 'crm', url: mcp.url, timeout_ms: 60_000 }, [201]);
    const t0 = Date.now();
    const big = await jobEnded(api, (await ok(api, 'POST', `${A}/jobs/runs`, single('mcp.crm.dump', `POST:${mcp.origin}`))).run_id);
    assert.equal(big.state, 'failed');
    assert.equal(big.error.reason, 'tool_result_too_large');
    assert.ok(Date.now() - t0 < 30_000, 'at once, not at the timeout');
    // A stdio source in the store that this cell's configuration does not name (another cell's, or removed).
    await t.core.store.write((tx) =>
      insertSource(tx, {
        source_id: 'src_00000000000000000001',
        name: 'files',
        transport: 'stdio',
        url: null,
        auth: { type: 'none' },
        origin: 'config',
        description: '',
        definition_max_age_ms: 0,
        timeout_ms: 1000,
        bound_by: null,
        created_at: 0,
        created_by: 'system:config',
        updated_at: 0,
      }),
    );
    const r = await t.request('GET', `${S}/src_00000000000000000001/review`, { token: t.adminKey });
    assert.equal(r.status, 503, r.text);
    assert.equal(r.body.details.reason, 'source_not_configured');
  } finally {
    await close();
  }
});
