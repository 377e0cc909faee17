// console/src/sse.ts: the event-stream format (HTML standard §9.2.6) fed in
// awkward chunks, and `follow` reconnecting with Last-Event-ID, stopping on
// 204, on a refusal and on 'stop'.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { follow, SseParser, StreamRefused, type SseEvent } from '../../console/src/sse.ts';

test('parser: events, comments, multi-line data, ids kept across events, retry, CR/LF/CRLF split anywhere', () => {
  const stream =
    'retry: 1500\r\n: heartbeat\r\n\r\nid: 1\r\nevent: step\r\ndata: {"a":1}\r\n\r\ndata: line one\rdata: line two\r\rid: 7\nevent: run_finished\ndata:no-space\n\nevent: ignored\n\n';
  // Every way of cutting the stream in two gives the same events.
  for (let cut = 0; cut <= stream.length; cut++) {
    const p = new SseParser();
    const got: SseEvent[] = [...p.push(stream.slice(0, cut)), ...p.push(stream.slice(cut))];
    assert.deepEqual(
      got,
      [
        { id: '1', event: 'step', data: '{"a":1}' },
        { id: '1', event: 'message', data: 'line one\nline two' },
        { id: '7', event: 'run_finished', data: 'no-space' },
      ],
      `cut at ${cut}`,
    );
    assert.equal(p.retry, 1500);
    assert.equal(p.lastEventId, '7');
  }
  // One character at a time.
  const p = new SseParser();
  const one = [...stream].flatMap((ch) => p.push(ch));
  assert.equal(one.length, 3);
  // An id with NUL is ignored; a field without a colon is a field with an empty value.
  const q = new SseParser();
  assert.deepEqual(q.push('id: a\0b\ndata\n\n'), [{ id: '', event: 'message', data: '' }]);
});

function streamOf(chunks: string[]): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(c) {
      for (const ch of chunks) c.enqueue(enc.encode(ch));
      c.close();
    },
  });
}

test('follow: resumes with the last event id after the stream ends, stops on run_finished', async () => {
  const asked: string[] = [];
  const seen: string[] = [];
  const bodies = [
    ['id: 1\nevent: step\ndata: 1\n\nid: 2\nev', 'ent: step\ndata: 2\n\n'],
    ['id: 3\nevent: run_finished\ndata: 3\n\n', 'id: 4\nevent: step\ndata: never read\n\n'],
  ];
  const ac = new AbortController();
  await follow({
    signal: ac.signal,
    lastEventId: '0',
    open: async (last) => {
      asked.push(last);
      return new Response(streamOf(bodies.shift()!), { status: 200 });
    },
    onEvent: (ev) => {
      seen.push(`${ev.id}:${ev.event}`);
      return ev.event === 'run_finished' ? 'stop' : undefined;
    },
    sleep: async () => undefined,
  });
  assert.deepEqual(asked, ['0', '2'], 'the second request resumes after event 2');
  assert.deepEqual(seen, ['1:step', '2:step', '3:run_finished']);
});

test('follow: 204 ends quietly; a refusal ends with onError; failures back off then give up', async () => {
  const ac = new AbortController();
  let errors: unknown[] = [];
  await follow({
    signal: ac.signal,
    open: async () => new Response(null, { status: 204 }),
    onEvent: () => undefined,
    onError: (e) => errors.push(e),
  });
  assert.equal(errors.length, 0);

  await follow({
    signal: ac.signal,
    open: async () => new Response('{"error":"forbidden"}', { status: 403 }),
    onEvent: () => undefined,
    onError: (e) => errors.push(e),
  });
  assert.equal(errors.length, 1);
  assert.ok(errors[0] instanceof StreamRefused);
  assert.equal((errors[0] as StreamRefused).response.status, 403);

  errors = [];
  const waits: number[] = [];
  let calls = 0;
  await follow({
    signal: ac.signal,
    maxFailures: 4,
    open: async () => {
      calls++;
      throw new TypeError('network down');
    },
    onEvent: () => undefined,
    onError: (e) => errors.push(e),
    sleep: async (ms) => {
      waits.push(ms);
    },
  });
  assert.equal(calls, 4);
  assert.deepEqual(waits, [1000, 2000, 4000], 'exponential back-off between failed connections');
  assert.equal((errors[0] as Error).message, 'network down');
});

test('follow: an abort ends following at once', async () => {
  const ac = new AbortController();
  let opened = 0;
  const done = follow({
    signal: ac.signal,
    open: async (_last, signal) => {
      opened++;
      // A stream that never ends until aborted.
      return new Response(
        new ReadableStream({
          start(c) {
            signal.addEventListener('abort', () => c.error(new Error('aborted')));
          },
        }),
        { status: 200 },
      );
    },
    onEvent: () => undefined,
  });
  await new Promise((r) => setTimeout(r, 20));
  ac.abort();
  await done;
  assert.equal(opened, 1);
});
