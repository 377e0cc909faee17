import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { chatCompletion, parseCompletion, retryAfterMs, type ChatDelta } from '../../../cell/ai/openai-client.ts';
import { isServiceError } from '../../../core/errors.ts';
import { startOpenAIServer, type FakeOpenAI } from '../../fixtures/openai-server.ts';

let ai: FakeOpenAI;
before(async () => {
  ai = await startOpenAIServer({ apiKey: 'sk-test' });
});
after(async () => {
  await ai.close();
});

const noSleep = async () => {};

test('a completion with text and usage', async () => {
  ai.setResponder(() => ({ content: 'hello', usage: { prompt_tokens: 3, completion_tokens: 2 } }));
  const r = await chatCompletion(
    { baseUrl: `${ai.url}/v1`, apiKey: 'sk-test' },
    { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
  );
  assert.equal(r.content, 'hello');
  assert.deepEqual(r.usage, { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 });
  assert.equal(ai.requests.at(-1)!.authorization, 'Bearer sk-test');
});

test('tool calls are parsed', async () => {
  ai.setResponder(() => ({ tool_calls: [{ name: 'calc', arguments: { expression: '1+2' } }] }));
  const r = await chatCompletion(
    { baseUrl: `${ai.url}/v1`, apiKey: 'sk-test' },
    { model: 'm', messages: [{ role: 'user', content: 'sum' }] },
  );
  assert.equal(r.tool_calls.length, 1);
  assert.equal(r.tool_calls[0]!.function.name, 'calc');
  assert.deepEqual(JSON.parse(r.tool_calls[0]!.function.arguments), { expression: '1+2' });
});

test('5xx and 429 are retried with backoff, then succeed', async () => {
  const sleeps: number[] = [];
  let n = 0;
  ai.setResponder(() => (++n <= 2 ? (n === 1 ? { status: 503 } : { status: 429, retryAfter: 1 }) : { content: 'third time' }));
  const r = await chatCompletion(
    {
      baseUrl: `${ai.url}/v1`,
      apiKey: 'sk-test',
      retries: 2,
      backoffMs: 10,
      sleep: async (ms) => {
        sleeps.push(ms);
      },
    },
    { model: 'm', messages: [{ role: 'user', content: 'x' }] },
  );
  assert.equal(r.content, 'third time');
  assert.deepEqual(sleeps, [10, 1000]);
});

test('retries exhausted -> service_unavailable with reason, never the provider body', async () => {
  ai.setResponder(() => ({ status: 500 }));
  await assert.rejects(
    chatCompletion({ baseUrl: `${ai.url}/v1`, apiKey: 'sk-test', retries: 1, sleep: noSleep }, { model: 'm', messages: [] }),
    (e: unknown) =>
      isServiceError(e) &&
      e.code === 'service_unavailable' &&
      e.details?.['reason'] === 'provider_error' &&
      !e.message.includes('scripted'),
  );
});

test('a wrong key is rejected without retry', async () => {
  const before = ai.requests.length;
  await assert.rejects(
    chatCompletion({ baseUrl: `${ai.url}/v1`, apiKey: 'wrong', retries: 2, sleep: noSleep }, { model: 'm', messages: [] }),
    (e: unknown) => isServiceError(e) && e.details?.['reason'] === 'provider_rejected' && e.details?.['provider_status'] === 401,
  );
  assert.equal(ai.requests.length, before);
});

test('a timeout maps to provider_timeout', async () => {
  ai.setResponder(() => ({ content: 'late', delayMs: 400 }));
  await assert.rejects(
    chatCompletion(
      { baseUrl: `${ai.url}/v1`, apiKey: 'sk-test', retries: 0, headersTimeoutMs: 100, bodyTimeoutMs: 100, sleep: noSleep },
      { model: 'm', messages: [] },
    ),
    (e: unknown) => isServiceError(e) && e.details?.['reason'] === 'provider_timeout',
  );
});

test('an unreachable provider maps to provider_unreachable', async () => {
  await assert.rejects(
    chatCompletion({ baseUrl: 'http://127.0.0.1:1/v1', retries: 0, sleep: noSleep }, { model: 'm', messages: [] }),
    (e: unknown) => isServiceError(e) && e.details?.['reason'] === 'provider_unreachable',
  );
});

test('unreadable bodies are refused', () => {
  assert.throws(
    () => parseCompletion({ choices: [] }),
    (e: unknown) => isServiceError(e) && e.details?.['reason'] === 'provider_bad_response',
  );
  assert.throws(
    () => parseCompletion('x'),
    (e: unknown) => isServiceError(e),
  );
});

test('streaming (optional): deltas and split tool-call arguments are assembled, usage kept', async () => {
  ai.setResponder(() => ({ content: 'streamed answer', usage: { prompt_tokens: 7, completion_tokens: 3 } }));
  const r = await chatCompletion(
    { baseUrl: `${ai.url}/v1`, apiKey: 'sk-test', stream: true },
    { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
  );
  assert.equal(r.content, 'streamed answer');
  assert.deepEqual(r.usage, { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 });
  assert.equal(ai.requests.at(-1)!.body['stream'], true);
  ai.setResponder(() => ({
    tool_calls: [
      { name: 'calc', arguments: { expression: '12*12' } },
      { name: 'clock__now', arguments: {} },
    ],
  }));
  const t2 = await chatCompletion(
    { baseUrl: `${ai.url}/v1`, apiKey: 'sk-test', stream: true },
    { model: 'm', messages: [{ role: 'user', content: 'x' }] },
  );
  assert.deepEqual(
    t2.tool_calls.map((c) => [c.function.name, JSON.parse(c.function.arguments)]),
    [
      ['calc', { expression: '12*12' }],
      ['clock__now', {}],
    ],
  );
  assert.equal(t2.finish_reason, 'tool_calls');
});

test('streaming: each fragment reaches onDelta as it is read; a retry after a broken stream starts over with restart', async () => {
  const pieces = ['al', 'pha ', 'beta'];
  ai.setResponder(() => ({
    content: pieces.join(''),
    pieces,
    tool_calls: [{ name: 'calc', arguments: { expression: '1+1' } }],
  }));
  const got: ChatDelta[] = [];
  const r = await chatCompletion(
    { baseUrl: `${ai.url}/v1`, apiKey: 'sk-test', stream: true, onDelta: (d) => got.push(d) },
    { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
  );
  assert.equal(r.content, 'alpha beta');
  assert.deepEqual(
    got.filter((d) => !d.tool_call).map((d) => d.text),
    pieces,
  );
  const args = got.filter((d) => d.tool_call);
  assert.deepEqual(args[0]!.tool_call, { index: 0, id: r.tool_calls[0]!.id, name: 'calc' });
  assert.equal(args.map((d) => d.text).join(''), r.tool_calls[0]!.function.arguments);

  // The first answer breaks after one piece; the retry streams the whole answer, its first fragment marked restart.
  const before = ai.requests.length;
  const seen: ChatDelta[] = [];
  // The break waits until the client has read the first piece.
  const firstRead = async () => {
    while (seen.length === 0) await new Promise((r) => setTimeout(r, 5));
  };
  ai.setResponder((_req, i) => ({
    content: pieces.join(''),
    pieces,
    ...(i === before ? { breakAfter: 1, beforePiece: (k: number) => (k === 1 ? firstRead() : undefined) } : {}),
  }));
  const again = await chatCompletion(
    { baseUrl: `${ai.url}/v1`, apiKey: 'sk-test', stream: true, retries: 1, sleep: noSleep, onDelta: (d) => seen.push(d) },
    { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
  );
  assert.equal(again.content, 'alpha beta');
  assert.equal(ai.requests.length - before, 2);
  assert.deepEqual(
    seen.map((d) => [d.text, d.restart === true]),
    [
      ['al', false],
      ['al', true],
      ['pha ', false],
      ['beta', false],
    ],
  );
});

/** Aborts `ac` once the fake server has received a request after the first `before`, plus a moment. */
async function abortOnceArrived(ac: AbortController, before: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (ai.requests.length <= before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  await new Promise((r) => setTimeout(r, 50));
  ac.abort(new Error('cancelled'));
}

test('cancellation: an abort signal interrupts a slow call at once and is never retried', async () => {
  ai.setResponder(() => ({ content: 'too late', delayMs: 30_000 }));
  const before = ai.requests.length;
  const ac = new AbortController();
  const call = chatCompletion(
    { baseUrl: `${ai.url}/v1`, apiKey: 'sk-test', retries: 3, backoffMs: 10, signal: ac.signal },
    { model: 'm', messages: [{ role: 'user', content: 'slow' }] },
  );
  // Aborted once the server holds the request (a fixed delay could fire before it arrives on a busy machine).
  await abortOnceArrived(ac, before);
  const t0 = Date.now();
  await assert.rejects(call, (e: unknown) => isServiceError(e) && e.details?.['reason'] === 'cancelled');
  assert.ok(Date.now() - t0 < 5_000, `interrupted at once (${Date.now() - t0} ms)`);
  assert.equal(ai.requests.length - before, 1, 'no retry after a cancel');
});

test('cancellation: an abort during the retry backoff ends the wait at once', async () => {
  ai.setResponder(() => ({ status: 503 }));
  const before = ai.requests.length;
  const ac = new AbortController();
  const call = chatCompletion(
    { baseUrl: `${ai.url}/v1`, apiKey: 'sk-test', retries: 3, backoffMs: 60_000, signal: ac.signal },
    { model: 'm', messages: [{ role: 'user', content: 'x' }] },
  );
  // Aborted once the first attempt was answered (the client then waits out a 60 s backoff).
  await abortOnceArrived(ac, before);
  const t0 = Date.now();
  await assert.rejects(call, (e: unknown) => isServiceError(e) && e.details?.['reason'] === 'cancelled');
  assert.ok(Date.now() - t0 < 5_000, `backoff interrupted (${Date.now() - t0} ms)`);
  assert.equal(ai.requests.length - before, 1);
  // Already aborted: no request at all.
  await assert.rejects(
    chatCompletion({ baseUrl: `${ai.url}/v1`, apiKey: 'sk-test', signal: AbortSignal.abort() }, { model: 'm', messages: [] }),
    (e: unknown) => isServiceError(e) && e.details?.['reason'] === 'cancelled',
  );
  assert.equal(ai.requests.length - before, 1);
});

/** A provider that answers every request with these event-stream bytes, written in these pieces, each flushed apart. */
async function rawStream(pieces: string[]): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', async () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const p of pieces) {
        res.write(p);
        // Each piece its own read at the client: the next one after this one left the socket.
        await new Promise<void>((r) => setImmediate(r));
      }
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

test('streaming by the event-stream rules: CR-only line ends, multi-line data, comments, lines split across reads; the id kept', async () => {
  const chunk = (o: unknown) => JSON.stringify(o);
  const p = await rawStream([
    ': a comment, then CR-only line ends\r',
    `data: ${chunk({ id: 'chatcmpl-raw1', model: 'm-1', choices: [{ delta: { content: 'Hel' } }] })}\r\r`,
    // One chunk's JSON over two data: lines (the event's data is both, joined by a line feed), CRLF ends.
    `data: {"choices":[{"delta":\r\ndata: {"content":"lo"},"finish_reason":"stop"}]}\r\n\r\n`,
    // A line split across two reads, a CR at the end of one read and its LF at the start of the next.
    `data: ${chunk({ choices: [], usage: { prompt_tokens: 4, completion_tokens: 2 } })}\r`,
    '\n\r\n',
    'data: [DONE]\n\n',
  ]);
  try {
    const deltas: ChatDelta[] = [];
    const r = await chatCompletion(
      { baseUrl: `${p.url}/v1`, stream: true, onDelta: (d) => deltas.push(d) },
      { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
    );
    assert.equal(r.content, 'Hello');
    assert.deepEqual(
      deltas.map((d) => d.text),
      ['Hel', 'lo'],
    );
    assert.equal(r.finish_reason, 'stop');
    assert.deepEqual(r.usage, { prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 });
    assert.equal(r.id, 'chatcmpl-raw1', 'the answer id: gen_ai.response.id');
    assert.equal(r.model, 'm-1');
  } finally {
    await p.close();
  }
});

test('streaming: a stream that ends without the blank line after its last event still ends that event', async () => {
  const p = await rawStream([`data: ${JSON.stringify({ choices: [{ delta: { content: 'last' }, finish_reason: 'stop' }] })}`]);
  try {
    const r = await chatCompletion({ baseUrl: p.url, stream: true }, { model: 'm', messages: [] });
    assert.equal(r.content, 'last');
  } finally {
    await p.close();
  }
});

test('the answer id of a whole (not streamed) answer is kept', async () => {
  ai.setResponder(() => ({ content: 'x' }));
  const r = await chatCompletion({ baseUrl: `${ai.url}/v1`, apiKey: 'sk-test' }, { model: 'm', messages: [] });
  assert.match(r.id ?? '', /^chatcmpl-\d+$/);
});

test('Retry-After as an HTTP-date is waited for (RFC 9110 §10.2.3)', async () => {
  const sleeps: number[] = [];
  let n = 0;
  // Whole seconds (an HTTP-date has no fraction): between 2 and 3 s from now when the client reads it.
  const at = new Date(Math.ceil(Date.now() / 1000) * 1000 + 3000).toUTCString();
  ai.setResponder(() => (++n === 1 ? { status: 503, retryAfter: at } : { content: 'after the date' }));
  const r = await chatCompletion(
    {
      baseUrl: `${ai.url}/v1`,
      apiKey: 'sk-test',
      retries: 1,
      backoffMs: 10,
      sleep: async (ms) => {
        sleeps.push(ms);
      },
    },
    { model: 'm', messages: [] },
  );
  assert.equal(r.content, 'after the date');
  assert.equal(sleeps.length, 1);
  assert.ok(sleeps[0]! > 1000 && sleeps[0]! <= 4000, `waited ${sleeps[0]} ms for ${at}`);
});

test('retryAfterMs: delay-seconds, the three HTTP-date forms, a past date, and what is neither', () => {
  const now = Date.parse('Wed, 21 Oct 2015 07:27:58 GMT');
  assert.equal(retryAfterMs('120', now), 120_000);
  assert.equal(retryAfterMs('Wed, 21 Oct 2015 07:28:00 GMT', now), 2000, 'IMF-fixdate');
  assert.equal(retryAfterMs('Wednesday, 21-Oct-15 07:28:00 GMT', now), 2000, 'RFC 850');
  assert.equal(retryAfterMs('Wed Oct 21 07:28:00 2015', now), 2000, 'asctime: GMT though it does not say so');
  assert.equal(retryAfterMs('Wed, 21 Oct 2015 07:00:00 GMT', now), 0, 'a date past: no wait');
  for (const bad of [undefined, '', '-1', '1.5', 'soon', 'Wed, 21 Oct 2015 07:28:00 +0200', '2015-10-21T07:28:00Z'])
    assert.equal(retryAfterMs(bad, now), null, String(bad));
});
