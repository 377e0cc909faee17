/**
 * Traces on the OpenTelemetry GenAI conventions (issue 25), end to end: the
 * real cell process exports over OTLP/HTTP (the official SDK, protobuf) to a
 * real receiver (test/fixtures/otlp-receiver.ts decodes what arrives), while
 * a crew runs against the fake OpenAI server. Asserted on the decoded spans:
 * the tree of a crew run (request → run → steps → chat and tool spans, with
 * their attributes), the caller's `traceparent` as the request span's parent,
 * no prompt text, secret or key without the operator's opt-in and the text
 * with it, and a run driven again after its cell was killed continuing the
 * same trace. The conventions' details: the resource (the SDK's default, the
 * operator's OTEL_RESOURCE_ATTRIBUTES, the cell's identity), the versioned
 * tracer, `invoke_agent {crew name}` with provider and token usage, the
 * run's reason as `error.type`, `gen_ai.response.id`, `gen_ai.tool.type`,
 * `url.scheme`, unmatched routes and unknown methods. Needs `node scripts/build.mjs` first.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { startCellProcess, type CellProcess } from '../helpers/cell-process.ts';
import { startOpenAIServer, type FakeOpenAI } from '../fixtures/openai-server.ts';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../fixtures/otlp-receiver.ts';
import { T, ok, provider, roleOf, team, type Api } from '../helpers/teams.ts';
import { httpApi, until, verifiedJournal } from './_runs.ts';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';
const SECRET_INPUT = 'classified-task-7f3a';
const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/**
 * Env of a cell exporting to `receiver`, batches sent every 100 ms; the operator's resource attributes,
 * one of which (service.instance.id) the cell's own identity overrides.
 */
function otelEnv(receiver: OtlpReceiver, extra: Record<string, string> = {}): Record<string, string> {
  return {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_SERVICE_NAME: 'cell-under-test',
    OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=ci,service.namespace=cells,service.instance.id=spoofed',
    OTEL_BSP_SCHEDULE_DELAY: '100',
    ...extra,
  };
}

/** Starts a crew run with a `traceparent` header; returns its id. */
async function startRun(cell: CellProcess, crew: string, traceId: string, input: string): Promise<string> {
  const res = await fetch(`${cell.url}${T}/crews/${crew}/runs`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${cell.adminKey}`,
      'content-type': 'application/json',
      traceparent: `00-${traceId}-${CALLER_SPAN}-01`,
    },
    body: JSON.stringify({ input }),
  });
  assert.equal(res.status, 201, await res.clone().text());
  return ((await res.json()) as { run_id: string }).run_id;
}

async function finished(api: Api, crew: string, runId: string): Promise<{ state: string; error: unknown }> {
  return until('the run to finish', async () => {
    const s = await ok(api, 'GET', `${T}/crews/${crew}/runs/${runId}`);
    return ['completed', 'failed', 'refused', 'cancelled'].includes(s.state) ? s : undefined;
  });
}

function one(spans: ReceivedSpan[], pred: (s: ReceivedSpan) => boolean, what: string): ReceivedSpan {
  const found = spans.filter(pred);
  assert.equal(found.length, 1, `${what}: ${found.length} spans among ${spans.map((s) => s.name).join(', ')}`);
  return found[0]!;
}

/** A two-seat crew: the first asks for the calc tool once, then both answer. */
function respond(ai: FakeOpenAI): void {
  ai.setResponder((req) => {
    const role = roleOf(req);
    if (role === 'analyst' && !req.messages.some((m) => m.role === 'tool'))
      return {
        tool_calls: [{ id: 'call_1', name: 'calc', arguments: { expression: '6*7' } }],
        usage: { prompt_tokens: 21, completion_tokens: 4 },
      };
    return { content: `${role} says done`, usage: { prompt_tokens: 13, completion_tokens: 8 } };
  });
}

describe('traces exported over OTLP/HTTP', () => {
  let ai: FakeOpenAI;
  const receivers: OtlpReceiver[] = [];
  const cells: CellProcess[] = [];
  before(async () => {
    ai = await startOpenAIServer({ apiKey: 'sk-fake-secret-key' });
  });
  after(async () => {
    for (const c of cells) {
      await c.kill().catch(() => undefined);
      c.cleanup();
    }
    for (const r of receivers) await r.close();
    await ai.close();
  });

  test('a crew run: request → run → steps → chat and tool spans, the caller as parent, no content by default', {
    timeout: 90_000,
  }, async () => {
    const receiver = await startOtlpReceiver();
    receivers.push(receiver);
    const cell = await startCellProcess({ env: otelEnv(receiver) });
    cells.push(cell);
    const api = httpApi(cell.url, cell.adminKey);
    await provider(api, ai, 'sk-fake-secret-key');
    respond(ai);
    const tm = await team(api, 'sequential', [{ role: 'analyst' }, { role: 'writer' }]);
    const before = ai.requests.length;
    const runId = await startRun(cell, tm.crew, TRACE_ID, SECRET_INPUT);
    const done = await finished(api, tm.crew, runId);
    assert.equal(done.state, 'completed', JSON.stringify(done.error));

    const spans = await until('the run span and three chat spans', async () => {
      const mine = receiver.spans.filter((s) => s.traceId === TRACE_ID);
      return mine.some((s) => s.name.startsWith('invoke_agent')) && mine.filter((s) => s.name.startsWith('chat ')).length === 3
        ? mine
        : undefined;
    });
    const all = receiver.spans;
    assert.ok(receiver.requests.every((r) => r.contentType === 'application/x-protobuf'));
    // The resource: the SDK's default, the operator's OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME over both, the
    // program's version, and the cell's identity, which the operator's attributes do not override.
    const resource = all[0]!.resource;
    assert.equal(resource['service.name'], 'cell-under-test');
    assert.equal(resource['service.version'], VERSION);
    assert.equal(resource['telemetry.sdk.name'], 'opentelemetry');
    assert.equal(resource['telemetry.sdk.language'], 'nodejs');
    assert.equal(resource['deployment.environment.name'], 'ci');
    assert.equal(resource['service.namespace'], 'cells');
    assert.match(String(resource['service.instance.id']), /^cell-/);
    assert.match(String(resource['agent_cell.group.id']), /\S/);
    // The tracer: named and versioned after the program.
    for (const x of all) assert.deepEqual([x.scope, x.scopeVersion], ['agent-cell', VERSION]);

    // The request: a server span, child of the caller's span, named by its route template.
    const http = one(spans, (s) => s.kind === 2 && s.parentSpanId === CALLER_SPAN && s.name.startsWith('POST '), 'the POST request span');
    assert.equal(http.attributes['http.request.method'], 'POST');
    assert.equal(http.attributes['url.scheme'], 'http');
    assert.equal(http.attributes['http.response.status_code'], 201);
    assert.match(String(http.attributes['http.route']), /\/crews\/[^/]*\{?:?crew/i);
    assert.ok(!http.name.includes(tm.crew), `the route template, not the path: ${http.name}`);

    // The run: child of the request, with the run id, the crew and the formation hash.
    // Named after the crew (the agent), not its id; the provider and the tokens of the drive's three calls.
    const run = one(spans, (s) => s.name === `invoke_agent ${tm.crewName}`, 'the run span');
    assert.ok(!run.name.includes(tm.crew));
    assert.equal(run.parentSpanId, http.spanId);
    assert.equal(run.attributes['gen_ai.operation.name'], 'invoke_agent');
    assert.equal(run.attributes['gen_ai.agent.id'], tm.crew);
    assert.equal(run.attributes['gen_ai.agent.name'], tm.crewName);
    assert.equal(run.attributes['gen_ai.provider.name'], 'openai');
    assert.equal(run.attributes['gen_ai.usage.input_tokens'], 21 + 13 + 13);
    assert.equal(run.attributes['gen_ai.usage.output_tokens'], 4 + 8 + 8);
    assert.equal(run.attributes['agent_cell.run.id'], runId);
    assert.equal(run.attributes['agent_cell.crew.id'], tm.crew);
    assert.match(String(run.attributes['agent_cell.formation.hash']), /^sha256:[0-9a-f]{64}$/);
    assert.equal(run.attributes['agent_cell.run.state'], 'completed');
    assert.equal(run.attributes['agent_cell.run.takeover'], false);

    // Steps: children of the run, one per executed node.
    const steps = spans.filter((s) => s.name.startsWith('step '));
    assert.ok(steps.length >= 2, steps.map((s) => s.name).join());
    for (const s of steps) assert.equal(s.parentSpanId, run.spanId, s.name);
    for (const s of steps) assert.equal(s.attributes['agent_cell.step.outcome'], 'completed');
    const analystStep = one(steps, (s) => s.attributes['gen_ai.agent.id'] === tm.agents['analyst'], 'the analyst step');

    // Model calls: chat spans under the step, with the GenAI attributes and the provider's usage.
    const chats = spans.filter((s) => s.name.startsWith('chat '));
    for (const c of chats) {
      assert.equal(c.kind, 3, 'client');
      assert.equal(c.name, 'chat fake-model');
      assert.equal(c.attributes['gen_ai.operation.name'], 'chat');
      assert.equal(c.attributes['gen_ai.provider.name'], 'openai');
      assert.equal(c.attributes['gen_ai.request.model'], 'fake-model');
      assert.match(String(c.attributes['gen_ai.response.id']), /^chatcmpl-\d+$/, "the provider's answer id");
      assert.ok(
        steps.some((s) => s.spanId === c.parentSpanId),
        'a chat span is a child of a step span',
      );
    }
    const analystChats = chats.filter((c) => c.attributes['gen_ai.agent.id'] === tm.agents['analyst']);
    assert.equal(analystChats.length, 2);
    for (const c of analystChats) assert.equal(c.parentSpanId, analystStep.spanId);
    assert.match(String(analystChats[0]!.attributes['gen_ai.agent.name']), /\S/);
    const usage = chats.map((c) => [c.attributes['gen_ai.usage.input_tokens'], c.attributes['gen_ai.usage.output_tokens']]);
    assert.deepEqual(
      usage.sort(),
      [
        [13, 8],
        [13, 8],
        [21, 4],
      ].sort(),
    );
    // The provider was sent the chat span as its parent.
    const sent = ai.requests.slice(before).map((r) => r.traceparent);
    for (const c of chats) assert.ok(sent.includes(`00-${TRACE_ID}-${c.spanId}-01`), `traceparent of ${c.spanId} sent`);

    // The tool call: an execute_tool span under the analyst's step.
    const tool = one(spans, (s) => s.name === 'execute_tool calc', 'the tool span');
    assert.equal(tool.parentSpanId, analystStep.spanId);
    assert.equal(tool.attributes['gen_ai.operation.name'], 'execute_tool');
    assert.equal(tool.attributes['gen_ai.tool.name'], 'calc');
    assert.equal(tool.attributes['gen_ai.tool.type'], 'function');

    // Nothing the operator did not opt in to: no prompt, no input, no answer, no tool arguments, no key.
    const text = JSON.stringify(all.map((s) => ({ n: s.name, a: s.attributes, r: s.resource })));
    for (const forbidden of [SECRET_INPUT, 'ROLE:', 'says done', '6*7', 'sk-fake-secret-key', cell.adminKey]) {
      assert.ok(!text.includes(forbidden), `spans carry ${forbidden}`);
    }
    assert.ok(!text.includes('gen_ai.input.messages'));

    // Spans were exported in batches, not one request per span.
    assert.ok(receiver.requests.length < all.length, `${receiver.requests.length} requests for ${all.length} spans`);

    // A request with no traceparent starts a trace of its own, and its access-log line names it.
    const h = await fetch(`${cell.url}/healthz`);
    const requestId = h.headers.get('x-request-id');
    const line = await until('the healthz access-log line', async () =>
      cell
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => l['request_id'] === requestId),
    );
    assert.match(String(line['trace_id']), /^[0-9a-f]{32}$/);
    const healthz = await until('the healthz span', async () => receiver.spans.find((x) => x.traceId === line['trace_id']));
    assert.equal(healthz.parentSpanId, '');
    assert.equal(healthz.name, 'GET /healthz');

    // No route matched: the span is named by the method alone, without http.route (a path is no name); a method the
    // conventions do not know is _OTHER, named HTTP, its own name kept apart.
    const unmatched = await fetch(`${cell.url}/no/such/place-${TRACE_ID}`);
    assert.equal(unmatched.status, 404);
    const odd = await fetch(`${cell.url}/healthz`, { method: 'PROPFIND' });
    await odd.body?.cancel();
    const lost = await until('the unmatched request span', async () =>
      receiver.spans.find((x) => x.attributes['agent_cell.request_id'] === unmatched.headers.get('x-request-id')),
    );
    assert.equal(lost.name, 'GET');
    assert.equal(lost.attributes['http.route'], undefined);
    assert.equal(lost.attributes['http.response.status_code'], 404);
    assert.notEqual(lost.status.code, 2, 'a 404 is not a server error');
    assert.ok(!JSON.stringify([lost.name, lost.attributes]).includes('no/such/place'), 'the path is nowhere');
    const other = await until('the PROPFIND span', async () =>
      receiver.spans.find((x) => x.attributes['agent_cell.request_id'] === odd.headers.get('x-request-id')),
    );
    assert.equal(other.attributes['http.request.method'], '_OTHER');
    assert.equal(other.attributes['http.request.method_original'], 'PROPFIND');
    assert.match(other.name, /^HTTP( |$)/);

    // A failed run: its span says why in error.type (the run's reason, as the API says), not only that it failed.
    ai.setResponder(() => ({ status: 400 }));
    const failedRun = await startRun(cell, tm.crew, 'cccccccccccccccccccccccccccccccc', 'fail please');
    const failed = await finished(api, tm.crew, failedRun);
    assert.equal(failed.state, 'failed');
    const reason = (failed.error as { reason?: string }).reason;
    assert.match(String(reason), /^[a-z_]+$/);
    const failedSpan = await until('the failed run span', async () =>
      receiver.spans.find((x) => x.name.startsWith('invoke_agent') && x.attributes['agent_cell.run.id'] === failedRun),
    );
    assert.equal(failedSpan.status.code, 2);
    assert.equal(failedSpan.attributes['error.type'], reason);
    respond(ai);

    // A job run: its run span (`job single`) and its step, in the trace of the request that started it.
    const job = await ok(api, 'POST', '/api/public/v1/admin/jobs/runs', {
      job_type: 'single',
      workspace_id: 'w',
      spec: { tool: 'calc', args: { expression: '1+1' } },
    });
    const jobSpan = await until('the job run span', async () =>
      receiver.spans.find((x) => x.name === 'job single' && x.attributes['agent_cell.run.id'] === job.run_id),
    );
    assert.equal(jobSpan.attributes['agent_cell.run.kind'], 'job');
    const jobRequest = receiver.spans.find((x) => x.spanId === jobSpan.parentSpanId);
    assert.equal(jobRequest?.kind, 2, 'child of the request that started it');
    await until('the job step span', async () =>
      receiver.spans.some((x) => x.parentSpanId === jobSpan.spanId && x.name.startsWith('step ')) ? true : undefined,
    );
    await cell.stop();
  });

  test('with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true, chat and tool spans carry the messages', {
    timeout: 90_000,
  }, async () => {
    const receiver = await startOtlpReceiver();
    receivers.push(receiver);
    const cell = await startCellProcess({
      env: otelEnv(receiver, {
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true',
        OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer collector-token-9',
      }),
    });
    cells.push(cell);
    const api = httpApi(cell.url, cell.adminKey);
    await provider(api, ai, 'sk-fake-secret-key');
    respond(ai);
    const tm = await team(api, 'sequential', [{ role: 'analyst' }, { role: 'writer' }]);
    const traceId = 'aaaabbbbccccddddeeeeffff00001111';
    const runId = await startRun(cell, tm.crew, traceId, SECRET_INPUT);
    assert.equal((await finished(api, tm.crew, runId)).state, 'completed');
    const chats = await until('three chat spans', async () => {
      const c = receiver.spans.filter((s) => s.traceId === traceId && s.name.startsWith('chat '));
      return c.length === 3 && receiver.spans.some((s) => s.name === 'execute_tool calc') ? c : undefined;
    });
    const inputs = chats.map(
      (c) => JSON.parse(String(c.attributes['gen_ai.input.messages'])) as { role: string; parts: { type: string; content?: string }[] }[],
    );
    assert.ok(
      inputs.some((msgs) => msgs.some((m) => m.role === 'user' && m.parts.some((p) => p.content?.includes(SECRET_INPUT)))),
      'the run input is in a user message',
    );
    assert.ok(chats.some((c) => String(c.attributes['gen_ai.output.messages']).includes('writer says done')));
    const tool = receiver.spans.find((s) => s.name === 'execute_tool calc')!;
    assert.equal(JSON.parse(String(tool.attributes['gen_ai.tool.call.arguments'])).expression, '6*7');
    assert.match(String(tool.attributes['gen_ai.tool.call.result']), /42/);
    const text = JSON.stringify(receiver.spans.map((s) => s.attributes));
    assert.ok(!text.includes('sk-fake-secret-key'), 'never the provider key');
    // The backend's own credential (OTEL_EXPORTER_OTLP_HEADERS) is sent to it, and logged nowhere.
    assert.ok(receiver.requests.every((r) => r.authorization === 'Bearer collector-token-9'));
    assert.ok(!cell.output().includes('collector-token-9'));
    await cell.stop();
  });

  test('an approval waited on: its span, and the drive it wakes continues the run trace, linked to the approving request', {
    timeout: 90_000,
  }, async () => {
    const receiver = await startOtlpReceiver();
    receivers.push(receiver);
    const cell = await startCellProcess({ env: otelEnv(receiver) });
    cells.push(cell);
    const api = httpApi(cell.url, cell.adminKey);
    await provider(api, ai, 'sk-fake-secret-key');
    ai.setResponder((req) =>
      req.messages.at(-1)!.role === 'tool'
        ? { content: 'stored' }
        : { tool_calls: [{ name: 'kv__put', arguments: { key: 'k', value: 'v' } }] },
    );
    const cap = { allowed_tools: ['kv.put'], permission_mode: 'ask', egress_allowlist: ['kv:*'], data_grant_ids: ['kv:*'] };
    const tm = await team(api, 'sequential', [{ role: 'scribe', cap }]);
    const traceId = 'feedfacefeedfacefeedfacefeedface';
    const runId = await startRun(cell, tm.crew, traceId, 'remember');
    const waiting = await until('the run to wait', async () => {
      const r = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${runId}`);
      return r.state === 'waiting' ? r : undefined;
    });
    const step = waiting.pending_approvals[0].step_id as string;
    const approver = 'abababababababababababababababab';
    const res = await fetch(`${cell.url}${T}/crews/${tm.crew}/runs/${runId}/approvals/${encodeURIComponent(step)}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${cell.adminKey}`,
        'content-type': 'application/json',
        traceparent: `00-${approver}-${CALLER_SPAN}-01`,
      },
      body: JSON.stringify({ decision: 'approve' }),
    });
    assert.equal(res.status, 200, await res.text());
    assert.equal((await finished(api, tm.crew, runId)).state, 'completed');
    const runs = await until('two drives of the run', async () => {
      const r = receiver.spans.filter((s) => s.name === `invoke_agent ${tm.crewName}`);
      return r.length === 2 && receiver.spans.some((s) => s.name.startsWith('approval ')) ? r : undefined;
    });
    const [first, second] = runs.sort((a, b) => (a.startNs < b.startNs ? -1 : 1));
    assert.equal(first!.attributes['agent_cell.run.state'], 'waiting');
    assert.equal(second!.traceId, traceId, 'the run trace, not the approving request');
    assert.equal(second!.parentSpanId, first!.spanId);
    const approving = one(receiver.spans, (s) => s.traceId === approver && s.kind === 2, 'the approving request');
    // Woken by the approving request (linked), or by the first drive's own look at the decisions as it ended (no link).
    if (second!.links.length) assert.deepEqual(second!.links, [{ traceId: approver, spanId: approving.spanId }]);
    // The step that waited: its first span ended `waiting` without an error; the approval, under the second drive.
    const waited = receiver.spans.find((s) => s.parentSpanId === first!.spanId && s.name.startsWith('step '))!;
    assert.equal(waited.attributes['agent_cell.step.outcome'], 'waiting');
    assert.notEqual(waited.status.code, 2);
    const approval = one(receiver.spans, (s) => s.name === `approval ${step}`, 'the approval span');
    assert.equal(approval.traceId, traceId);
    assert.equal(approval.attributes['agent_cell.approval.decision'], 'approve');
    assert.equal(approval.attributes['agent_cell.approval.kind'], 'tool_call');
    const resumedStep = receiver.spans.find((s) => s.spanId === approval.parentSpanId)!;
    assert.equal(resumedStep.parentSpanId, second!.spanId);
    assert.ok(approval.endNs - approval.startNs > 0n, 'from the request to the decision');
    assert.ok(receiver.spans.some((s) => s.name === 'execute_tool kv.put' && s.parentSpanId === resumedStep.spanId));
    await cell.stop();
  });

  test('a run driven again after its cell was killed continues the same trace', { timeout: 120_000 }, async () => {
    const receiver = await startOtlpReceiver();
    receivers.push(receiver);
    const args = ['--cell-id', 'cell-t'];
    const a = await startCellProcess({ args, env: otelEnv(receiver) });
    cells.push(a);
    const apiA = httpApi(a.url, a.adminKey);
    await provider(apiA, ai, 'sk-fake-secret-key');
    let hang = true;
    ai.setResponder((req) => {
      const role = roleOf(req);
      if (role === 'second' && hang) return { content: 'too late', delayMs: 60_000 };
      return { content: `${role} done` };
    });
    const tm = await team(apiA, 'sequential', [{ role: 'first' }, { role: 'second' }]);
    const traceId = '0123456789abcdef0123456789abcdef';
    const runId = await startRun(a, tm.crew, traceId, 'task');
    await until('the second model call', async () => (ai.requests.some((r) => roleOf(r.body) === 'second') ? true : undefined));
    // The request's span was exported (its batch); the first run span dies with the process.
    await until('the request span', async () => (receiver.spans.some((s) => s.traceId === traceId && s.kind === 2) ? true : undefined));
    await a.kill('SIGKILL');
    hang = false;

    const b = await startCellProcess({ dataDir: a.dataDir, args, env: otelEnv(receiver) });
    cells.push(b);
    const apiB = httpApi(b.url, a.adminKey);
    assert.equal((await finished(apiB, tm.crew, runId)).state, 'completed');
    const resumed = await until('the resumed run span', async () =>
      receiver.spans.find((s) => s.name === `invoke_agent ${tm.crewName}` && s.attributes['agent_cell.run.takeover'] === true),
    );
    assert.equal(resumed.traceId, traceId, 'the same trace as the request that started the run');
    // Its parent is the first drive's run span, as the run's journal keeps it.
    const { records } = await verifiedJournal(apiB, b.url, runId);
    const started = records.find((r) => r.kind === 'run_started')!;
    const stored = String(started.data?.['traceparent']);
    assert.match(stored, new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    assert.equal(resumed.parentSpanId, stored.split('-')[2]);
    // The step that was in flight ran again in the resumed drive, in the same trace.
    const chat = await until('the re-issued chat span', async () =>
      receiver.spans.find(
        (s) => s.traceId === traceId && s.name.startsWith('chat ') && s.attributes['gen_ai.agent.id'] === tm.agents['second'],
      ),
    );
    assert.ok(chat);
    await b.stop();
  });
});
