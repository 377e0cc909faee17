// The same crew at the cell and at the edge (issue 39, "Tests"): a formation of two seats, each granted a tool its
// billet makes the first call name (`tool_choice`: calc for the one, kv.put for the other), runs at the real cell
// process against a fake OpenAI-compatible provider (a real HTTP server), and on the real single executable
// dist/edge in a network namespace with only loopback (`unshare -n`) on the tiny signed GGUF the project builds.
// Both runs have the same graph hash and the same step ids; each journal verifies with the keys its host
// publishes (the cell's `/.well-known/cell-keys.json`, the device's own) and the edge's with the device key the
// cell registered; the edge's journal imports (its calls re-judged against the bundle) and its tool calls show
// at the cell. After the seats, an approval gate (a `human_approval` step naming one approver, a principal of
// the cell whose key the device's key bundle carries) is decided at the cell by its route and at the device by
// the same route of `edge serve`: the same step id, an `approval_received` record each, imported and re-judged.
// Needs `make edge` (dist/cell.mjs, dist/edge, edge-runtime/).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { splitEnvelope } from '../../bundles/envelope.ts';
import type { JournalRecord } from '../../core/journal/record.ts';
import { verifyJournal } from '../../core/journal/verify.ts';
import { startOpenAIServer, type ChatRequestBody } from '../fixtures/openai-server.ts';
import { startCellProcess } from '../helpers/cell-process.ts';
import { until } from '../helpers/until.ts';
import { airgapSkip, deviceWithTinyModel, EDGE, runAirgapped } from './_airgapped.ts';

const A = '/api/public/v1/admin';
const T = `${A}/agent-teams`;

/** The call a seat's first model call must make, by its tool: the fake provider makes it with these arguments. */
const CALLS: Record<string, Record<string, unknown>> = {
  calc: { expression: '6*7' },
  'kv.put': { key: 'pump-7', value: 'seal leaking' },
};

/** The fake provider: the named tool call when the request forces one, else a short answer. */
function respond(req: ChatRequestBody) {
  const forced = (req['tool_choice'] as { function?: { name?: string } } | undefined)?.function?.name;
  if (forced !== undefined && !req.messages.some((m) => m.role === 'tool')) {
    const name = forced.replace('__', '.');
    return {
      tool_calls: [{ id: 'call_0', name: forced, arguments: CALLS[name] ?? {} }],
      usage: { prompt_tokens: 20, completion_tokens: 8 },
    };
  }
  return { content: 'recorded', usage: { prompt_tokens: 30, completion_tokens: 2 } };
}

/** The step ids of a journal's steps, in order (model calls, tool calls, nodes). */
const stepIds = (records: readonly JournalRecord[]) => records.filter((r) => r.kind === 'step').map((r) => r.step_id);

test('the same crew with tool calls at the cell and at an air-gapped edge: same graph, same steps, journals that verify and import', {
  skip: airgapSkip('the cell/edge crew agreement', { runtime: true }),
  timeout: 240_000,
}, async () => {
  const work = mkdtempSync(join(tmpdir(), 'edge-agree-crew-'));
  const dev = join(work, 'device');
  const ai = await startOpenAIServer({ apiKey: 'sk-fake', respond });
  const cell = await startCellProcess();
  try {
    const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
      const r = await fetch(cell.url + path, {
        method,
        headers: { authorization: `Bearer ${cell.adminKey}`, 'content-type': 'application/json', ...headers },
        ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
      });
      const text = await r.text();
      return { status: r.status, text, body: r.headers.get('content-type')?.includes('json') ? JSON.parse(text) : undefined };
    };
    const ok = async (method: string, path: string, body?: unknown) => {
      const r = await call(method, path, body);
      assert.ok(r.status >= 200 && r.status < 300, `${method} ${path}: ${r.status} ${r.text}`);
      return r;
    };
    const secret = (await ok('POST', `${A}/secrets`, { name: 'fake-openai', value: 'sk-fake' })).body;
    await ok('POST', `${A}/ai/model-providers`, {
      provider_type: 'openai-compatible',
      default_model: 'fake-model',
      base_url: `${ai.url}/v1`,
      api_key_secret_id: secret.secret_id,
      max_retries: 0,
    });

    // The approver: another principal than the requester, with agent_teams.approve, and its key.
    const lead = (await ok('POST', `${A}/principals`, { kind: 'service', name: 'team-lead', roles: ['operator'] })).body;
    const leadKey = (await ok('POST', `${A}/api-keys`, { owner_id: lead.id, name: 'lead-key' })).body.secret as string;

    // The formation: two seats, a tool each, the first call named (so the tiny model makes it too), then the gate.
    const f = (
      await ok('POST', `${T}/formations`, {
        name: 'field-pair',
        coordination_policy: 'sequential',
        limits: { default_max_tokens: 600 },
        post: [
          {
            kind: 'human_approval',
            config: { rule: 'quorum', quorum: 1, approvers: [lead.id], timeout_ms: 3_600_000, prompt: 'Keep the finding?' },
          },
        ],
      })
    ).body;
    const assignments: Record<string, string> = {};
    for (const [role, tool] of [
      // The recorder first: the tiny model's kv.put call fits its budget on a plain input, not on the other seat's noise.
      ['recorder', 'kv.put'],
      ['calculator', 'calc'],
    ] as const) {
      const cap = {
        allowed_tools: [tool],
        permission_mode: 'auto',
        clearance_level: 0,
        egress_allowlist: ['kv:*'],
        data_grant_ids: ['kv:*'],
      };
      const b = (
        await ok('POST', `${T}/formations/${f.formation_id}/billets`, {
          role_label: role,
          required_skills: [],
          authority_cap: cap,
          tool_choice: { name: tool },
        })
      ).body;
      const a = (
        await ok('POST', `${T}/agents`, { source: 'scratch', role_label: role, system_prompt: `ROLE:${role}`, authority_template: cap })
      ).body;
      await ok('POST', `${T}/agents/${a.agent_id}/budget-ledger`, { budget_limit: 100_000 });
      assignments[b.billet_id] = a.agent_id;
    }
    const crew = (await ok('POST', `${T}/crews`, { formation_id: f.formation_id, assignments })).body;

    // At the cell.
    const started = (await ok('POST', `${T}/crews/${crew.crew_id}/runs`, { input: 'Inspect pump 7 and record the finding.' })).body;
    const view = `${T}/crews/${crew.crew_id}/runs/${started.run_id}`;
    const pending = await until('the run to wait for its approval', async () => (await ok('GET', view)).body.pending_approvals?.[0]);
    const decided = await fetch(`${cell.url}${view}/approvals/${encodeURIComponent(pending.step_id)}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${leadKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ decision: 'approve', comment: 'recorded as found' }),
    });
    assert.equal(decided.status, 200, await decided.text());
    const cellRun = await until('the run to end', async () => {
      const r = (await ok('GET', `${A}/jobs/runs/${started.run_id}`)).body;
      return ['queued', 'running', 'waiting'].includes(r.state) ? null : r;
    });
    assert.equal(cellRun.state, 'completed', JSON.stringify(cellRun));
    const cellRecords = (await ok('GET', `${A}/jobs/runs/${started.run_id}/journal`)).body.records as JournalRecord[];
    const cellKeys = (await (await fetch(`${cell.url}/.well-known/cell-keys.json`)).json()) as { keys: { kid: string; jwk: JsonWebKey }[] };
    const byKid = (keys: { kid: string; jwk: JsonWebKey }[]) => (kid: string) => keys.find((k) => k.kid === kid)?.jwk;
    assert.deepEqual(
      await verifyJournal(cellRecords, byKid(cellKeys.keys)),
      { ok: true },
      "the cell's journal verifies with its published keys",
    );

    // The device: its key, trust, the tiny model signed by a publisher it pins, its bundles.
    const init = await deviceWithTinyModel(work, dev, (path, body) => ok('POST', path, body));
    const key = (await ok('POST', `${A}/api-keys`, { name: 'field', scopes: ['agent_teams', 'system.orchestration.admin.read'] })).body
      .secret;
    writeFileSync(join(work, 'keys.bundle.json'), (await ok('POST', `${A}/edge/key-bundles`, { device_id: init.device_id })).text);
    const cb = await ok('POST', `${A}/edge/crew-bundles`, {
      device_id: init.device_id,
      crew_id: crew.crew_id,
      model_manifest: readFileSync(join(work, 'tiny.manifest.json'), 'utf8'),
    });
    writeFileSync(join(work, 'crew.bundle.json'), cb.text);

    // At the edge, air-gapped.
    const o = runAirgapped(
      '_agree-client.ts',
      work,
      {
        edge: EDGE,
        data: dev,
        keyBundle: join(work, 'keys.bundle.json'),
        crewBundle: join(work, 'crew.bundle.json'),
        model: join(work, 'tiny.gguf'),
        manifest: join(work, 'tiny.manifest.json'),
        crewId: crew.crew_id,
        key,
        approverKey: leadKey,
        exportOut: join(work, 'journal.export'),
        cellUrl: cell.url,
      },
      180_000,
    );
    assert.equal(o.start_status, 202, JSON.stringify(o));
    assert.equal(o.export.status, 0, o.export.stderr);
    const exported = readFileSync(join(work, 'journal.export'), 'utf8');
    const payload = JSON.parse(splitEnvelope(exported)!.payload) as {
      run: { graph_hash: string };
      records: JournalRecord[];
      values: Record<string, unknown>;
    };
    const edgeRecords = payload.records;
    assert.equal(o.run.state, 'completed', JSON.stringify(edgeRecords.map((r) => [r.kind, r.step_id, r.data])));

    // Agreement: the graph, the steps, and the calls each seat made.
    assert.equal(payload.run.graph_hash, cellRecords[0]!.graph_hash, 'the same graph hash');
    assert.deepEqual(stepIds(edgeRecords), stepIds(cellRecords), 'the same step ids, in the same order');
    const calls = (records: JournalRecord[]) =>
      records.filter((r) => r.kind === 'step' && typeof r.data?.['tool'] === 'string').map((r) => [r.step_id, r.data!['tool']]);
    assert.deepEqual(calls(edgeRecords), calls(cellRecords));
    // The gate: decided once at each host, by the approver, on the same step.
    const approvals = (records: JournalRecord[]) =>
      records.filter((r) => r.kind === 'approval_received').map((r) => [r.step_id, r.data?.['by'], r.data?.['decision']]);
    assert.equal(o.approval_status, 200);
    assert.equal(approvals(cellRecords).length, 1, JSON.stringify(cellRecords.map((r) => [r.kind, r.step_id, r.data])));
    assert.deepEqual(approvals(edgeRecords), approvals(cellRecords));
    assert.deepEqual(approvals(cellRecords)[0]!.slice(1), [lead.id, 'approve'], 'the lead approved');
    assert.deepEqual(
      calls(cellRecords).map(([, tool]) => tool),
      ['kv.put', 'calc'],
    );
    // The edge's journal verifies with the keys the device publishes, and with the key the cell registered.
    assert.deepEqual(await verifyJournal(edgeRecords, byKid(o.device_keys.keys)), { ok: true });
    assert.deepEqual(await verifyJournal(edgeRecords, (kid) => (kid === init.device_id ? init.public_jwk : undefined)), { ok: true });

    // Back at the cell: the journal imports, and its tool calls show as the run's.
    const imp = await call('POST', `${A}/edge/journals`, exported, { 'content-type': 'application/vnd.agent-cell.signed' });
    assert.equal(imp.status, 201, imp.text);
    const shown = (await ok('GET', `${A}/edge/journals/${o.run.run_id}`)).body;
    assert.deepEqual(calls(shown.records), calls(edgeRecords));
    assert.deepEqual(approvals(shown.records), approvals(edgeRecords), "the device's approval shows with the run");
    for (const r of (shown.records as JournalRecord[]).filter((x) => x.kind === 'step' && typeof x.data?.['tool'] === 'string'))
      assert.equal((shown.values[r.input_hash] as { tool: string }).tool, r.data!['tool'], 'its arguments are shown with it');
    assert.ok(shown.graph?.seats, 'the graph the bundle carried names the seats');
  } finally {
    await cell.stop();
    cell.cleanup();
    await ai.close();
    rmSync(work, { recursive: true, force: true });
  }
});
