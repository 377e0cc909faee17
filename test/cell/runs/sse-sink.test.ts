/**
 * The run event stream's sink on node:http (cell/runs/sse.ts nodeSink), on a real server and client:
 * the frames of one turn leave in one write of the response, after the immediates that turn's
 * microtasks scheduled (a run's next append and model request leave from the check phase, before
 * its frames); a slow client is judged on what is pending in the process too; closing writes what
 * is pending before the end.
 */
import assert from 'node:assert/strict';
import { createServer, get, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { text } from 'node:stream/consumers';
import { test } from 'node:test';
import { MAX_PENDING_BYTES, MIN_WRITE_GAP_MS, nodeSink, type SseSink } from '../../../cell/runs/sse.ts';

/** A server whose one response is a sink handed to `use`; the client's body, read to its end. */
async function withSink(
  use: (sink: SseSink, writes: string[], order: string[]) => void,
): Promise<{ body: string; writes: string[]; order: string[] }> {
  const writes: string[] = [];
  const order: string[] = [];
  const server = createServer((_req, res: ServerResponse) => {
    const write = res.write.bind(res) as (chunk: unknown) => boolean;
    // Every write the sink makes on the response, as text.
    (res as unknown as { write: (chunk: unknown) => boolean }).write = (chunk: unknown) => {
      const written = typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('utf8');
      writes.push(written);
      order.push(`write:${written.length}`);
      return write(chunk);
    };
    use(nodeSink(res), writes, order);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const { port } = server.address() as AddressInfo;
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      get({ host: '127.0.0.1', port, path: '/' }, resolve).on('error', reject);
    });
    const body = await text(res);
    return { body, writes, order };
  } finally {
    await new Promise<void>((r) => server.close(() => r()));
  }
}

test("a turn's frames leave in one write, after the immediates its microtasks scheduled; closing writes what is pending", async () => {
  const { body, writes, order } = await withSink((sink, w, order) => {
    sink.write('retry: 1000\n\n');
    sink.write('event: step\ndata: {"seq":1}\nid: 1\n\n');
    // What a run's driver does next in the same turn: its append or model request, from an immediate.
    void Promise.resolve().then(() => setImmediate(() => order.push(`next call (writes so far: ${w.length})`)));
    sink.write('event: delta\ndata: {"index":0}\n\n');
    assert.equal(w.length, 0, 'nothing is written in the turn that publishes');
    setTimeout(() => {
      // A later turn: its frame, then the last one, written together with it by the close.
      sink.write('event: step\ndata: {"seq":2}\nid: 2\n\n');
      sink.write('event: run_finished\ndata: {"seq":3}\nid: 3\n\n');
      sink.close();
    }, 20);
  });
  assert.deepEqual(writes, [
    'retry: 1000\n\nevent: step\ndata: {"seq":1}\nid: 1\n\nevent: delta\ndata: {"index":0}\n\n',
    'event: step\ndata: {"seq":2}\nid: 2\n\nevent: run_finished\ndata: {"seq":3}\nid: 3\n\n',
  ]);
  assert.equal(order[0], 'next call (writes so far: 0)', 'the immediate scheduled in the turn ran before its frames were written');
  assert.equal(body, writes.join(''), 'the client read every frame, in order, then the end');
});

test('a client falls behind on what is pending in the process, before anything is written', async () => {
  let seen: boolean[] = [];
  await withSink((sink) => {
    const frame = `data: ${'x'.repeat(1024 * 1024)}\n\n`;
    for (let i = 0; i * frame.length <= MAX_PENDING_BYTES; i++) {
      seen.push(sink.behind());
      sink.write(frame);
    }
    seen.push(sink.behind());
    sink.close();
  });
  assert.equal(seen[0], false);
  assert.equal(seen.at(-1), true, 'past MAX_PENDING_BYTES pending: behind');
  seen = [];
});

test('at most one write every MIN_WRITE_GAP_MS: frames that come sooner leave together once it has passed; the close does not wait', async () => {
  const stamps: number[] = [];
  let third = 0;
  let afterClose = -1;
  const { writes, body } = await withSink((sink, w) => {
    // When each write is made.
    const push = w.push.bind(w);
    w.push = (...x: string[]) => {
      stamps.push(performance.now());
      return push(...x);
    };
    const whenWritten = (n: number, then: () => void) => {
      const look = () => (w.length >= n ? then() : setImmediate(look));
      look();
    };
    sink.write('event: step\ndata: {"seq":1}\nid: 1\n\n');
    whenWritten(1, () => {
      // Two more turns' frames right after that write: within the interval, held.
      sink.write('event: step\ndata: {"seq":2}\nid: 2\n\n');
      setImmediate(() => {
        sink.write('event: step\ndata: {"seq":3}\nid: 3\n\n');
        third = performance.now();
        whenWritten(2, () => {
          // Within the interval of that write again: held, until the close writes it at once.
          sink.write('event: step\ndata: {"seq":4}\nid: 4\n\n');
          sink.write('event: run_finished\ndata: {"seq":5}\nid: 5\n\n');
          sink.close();
          afterClose = w.length;
        });
      });
    });
  });
  assert.equal(afterClose, 3, 'the close wrote what was pending at once');
  assert.equal(body, writes.join(''), 'the client read every frame, in order, then the end');
  // Judged only when this machine made the frames within the interval (a loaded one may not). The
  // event loop's timers keep milliseconds from the start of a turn: the hold is the interval to ~2 ms.
  if (third - stamps[0]! < MIN_WRITE_GAP_MS - 3) {
    assert.deepEqual(
      [...writes],
      [
        'event: step\ndata: {"seq":1}\nid: 1\n\n',
        'event: step\ndata: {"seq":2}\nid: 2\n\nevent: step\ndata: {"seq":3}\nid: 3\n\n',
        'event: step\ndata: {"seq":4}\nid: 4\n\nevent: run_finished\ndata: {"seq":5}\nid: 5\n\n',
      ],
    );
    const waited = stamps[1]! - stamps[0]!;
    assert.ok(waited >= MIN_WRITE_GAP_MS - 3, `the held frames waited for the interval: ${waited} ms`);
  }
});
