/**
 * A lean HTTP/1.1 load client for benches whose requests differ one from the
 * next (a fresh DPoP proof each): autocannon rebuilds such a request on every
 * send (its setupRequest), which cost it more CPU than the edge spends
 * answering, so its figure was the client's, not the server's. Here every
 * request's bytes are made before the load starts and each connection sends
 * one, reads the whole answer (Content-Length framed, as the servers measured
 * answer), and sends the next. Used for both sides of a comparison, so both
 * pay the same client.
 */
import { connect } from 'node:net';

export interface RawLoadResult {
  requests: number;
  rps: number;
  non2xx: number;
  /** Latency, ms. */
  p99: number;
}

/** The bytes of `GET path` to `host` with `headers`, keep-alive. */
export function rawGet(host: string, path: string, headers: Record<string, string>): Buffer {
  let head = `GET ${path} HTTP/1.1\r\nHost: ${host}\r\n`;
  for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
  return Buffer.from(head + '\r\n', 'latin1');
}

/**
 * Sends `next()`'s requests over `connections` keep-alive connections until it
 * gives null or `seconds` have passed; resolves once every answer is read.
 */
export async function rawLoad(o: {
  url: string;
  connections: number;
  next: () => Buffer | null;
  seconds?: number;
}): Promise<RawLoadResult> {
  const u = new URL(o.url);
  const deadline = o.seconds === undefined ? Number.POSITIVE_INFINITY : performance.now() + o.seconds * 1000;
  const latencies: number[] = [];
  let non2xx = 0;
  const started = performance.now();
  await Promise.all(
    Array.from(
      { length: o.connections },
      () =>
        new Promise<void>((resolve, reject) => {
          const socket = connect(Number(u.port), u.hostname);
          socket.setNoDelay(true);
          let buf: Buffer = Buffer.alloc(0);
          let sentAt = 0;
          const send = () => {
            const req = performance.now() < deadline ? o.next() : null;
            if (!req) {
              socket.end();
              resolve();
              return;
            }
            sentAt = performance.now();
            socket.write(req);
          };
          socket.on('connect', send);
          socket.on('data', (d: Buffer) => {
            buf = buf.length > 0 ? Buffer.concat([buf, d]) : d;
            const end = buf.indexOf('\r\n\r\n');
            if (end < 0) return;
            const head = buf.toString('latin1', 0, end);
            const m = /\r\ncontent-length: *(\d+)/i.exec(head);
            if (!m) return reject(new Error(`an answer without Content-Length: ${head.slice(0, 200)}`));
            const length = end + 4 + Number(m[1]);
            if (buf.length < length) return;
            const status = Number(head.slice(9, 12));
            if (status < 200 || status > 299) non2xx++;
            latencies.push(performance.now() - sentAt);
            buf = buf.subarray(length);
            send();
          });
          socket.on('error', reject);
        }),
    ),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    requests: latencies.length,
    rps: latencies.length / seconds,
    non2xx,
    p99: Math.round(latencies[Math.floor(latencies.length * 0.99)] ?? 0),
  };
}
