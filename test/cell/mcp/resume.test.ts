// A tool call outlives its stream (MCP transports, "Resumability and Redelivery"): the client's POST
// stream breaks mid-call, the run goes on (a disconnection is not a cancellation), and the client gets
// the answer on a GET with Last-Event-ID. Raw HTTP in process, so the stream can be cut where wanted.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createParser } from 'eventsource-parser';
import { crewFixture, team, T } from '../../helpers/teams.ts';
import { until } from '../../helpers/until.ts';

const NO_TOOLS = { allowed_tools: [], permission_mode: 'auto', clearance_level: 0 };

test('a call whose stream broke is answered on the resumed stream; the run was not cancelled', async () => {
  const { t, ai, api } = await crewFixture();
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  ai.setResponder(async () => {
    await held;
    return { content: 'finished anyway' };
  });
  try {
    const { crew } = await team(api, 'sequential', [{ role: 'w', cap: NO_TOOLS }]);
    const send = (method: string, headers: Record<string, string>, body?: unknown, signal?: AbortSignal) =>
      t.app.request(
        'http://127.0.0.1/mcp',
        {
          method,
          headers: {
            authorization: `Bearer ${t.adminKey}`,
            accept: 'application/json, text/event-stream',
            ...headers,
            ...(body ? { 'content-type': 'application/json' } : {}),
          },
          ...(body ? { body: JSON.stringify(body) } : {}),
          ...(signal ? { signal } : {}),
        },
        { incoming: { socket: { remoteAddress: '127.0.0.1' } } } as never,
      );
    const init = await send(
      'POST',
      {},
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
      },
    );
    const session = init.headers.get('mcp-session-id')!;
    await init.text();
    const h = { 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' };
    await (await send('POST', h, { jsonrpc: '2.0', method: 'notifications/initialized' })).text();
    const call = await send('POST', h, {
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: { name: `crew_${crew}`, arguments: { input: 'x' }, _meta: { progressToken: 'p' } },
    });
    // Read up to the first progress event, note its id, then drop the stream.
    const reader = call.body!.getReader();
    let lastId = '';
    let progressed = false;
    const parser = createParser({
      onEvent: (e) => {
        if (e.id) lastId = e.id;
        if (e.data && JSON.parse(e.data).method === 'notifications/progress') progressed = true;
      },
    });
    while (!progressed) parser.feed(new TextDecoder().decode((await reader.read()).value));
    await reader.cancel();
    assert.ok(lastId, 'events carry ids');
    release();
    // The run goes on and completes.
    const runs = await until('the run completes', async () => {
      const r = await t.request('GET', `${T}/crews/${crew}/runs`, { token: t.adminKey });
      return r.body.runs[0]?.state === 'completed' ? r.body.runs : null;
    });
    assert.equal(runs.length, 1);
    // The answer waits in the session's events: a GET with Last-Event-ID replays it.
    const abort = new AbortController();
    const resumed = await send('GET', { ...h, 'last-event-id': lastId }, undefined, abort.signal);
    assert.equal(resumed.status, 200);
    const r2 = resumed.body!.getReader();
    let answer: any;
    const p2 = createParser({
      onEvent: (e) => {
        if (!e.data) return;
        const m = JSON.parse(e.data);
        if (m.id === 2) answer = m;
      },
    });
    while (!answer) p2.feed(new TextDecoder().decode((await r2.read()).value));
    abort.abort();
    assert.equal(answer.result.structuredContent.state, 'completed');
    assert.equal(answer.result.structuredContent.output, 'finished anyway');
  } finally {
    release();
    await ai.close();
    await t.close();
  }
});
