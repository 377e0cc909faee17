/**
 * Keeps a keep-alive connection usable when the cell answers a request before
 * reading its body (401 on a large POST, 400 on an oversize one, …).
 *
 * HTTP/1.1 puts the next request after this one's body on the same socket, so
 * an unread body must be read to its end before the connection can serve
 * again. Node's server discards it by itself only when nothing started reading
 * it; once the body was handed to a web stream (Hono's Request), that stream
 * holds the request paused and the connection stalls until something destroys
 * it (the client's next request then fails with ECONNRESET).
 *
 * So, on every response that finishes while its request body is unread, the
 * rest of the body is read and discarded, up to `maxDrainBytes` and within
 * `drainTimeoutMs`; past either the socket is closed. A request that declares
 * a body larger than `maxDrainBytes` is answered with `Connection: close`
 * instead: the client learns before its next request that it needs a new
 * connection.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';

export interface DrainOptions {
  /** Most bytes of an unread body read and discarded to keep its connection. */
  maxDrainBytes: number;
  /** Longest time spent reading an unread body before its connection is closed. */
  drainTimeoutMs: number;
}

/** Node's own discard: set once the server dumped the body itself (nothing had read it). */
type NodeIncoming = IncomingMessage & { _dumped?: boolean };

export function keepConnectionsOnEarlyAnswers(server: Pick<Server, 'prependListener'>, opts: DrainOptions): void {
  server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
    if (req.complete) return;
    // A request with neither Content-Length nor Transfer-Encoding has no body (RFC 9112 §6.3): nothing to drain.
    const length = req.headers['content-length'];
    if (length === undefined && req.headers['transfer-encoding'] === undefined) return;
    const declared = Number(length);
    if (declared > opts.maxDrainBytes) res.shouldKeepAlive = false;
    // Registered after the server's own 'finish' listener: Node's discard, when it applies, has begun.
    res.once('finish', () => {
      if (req.complete || req.destroyed || (req as NodeIncoming)._dumped) return;
      if (!res.shouldKeepAlive) return; // Node closes the socket after this response.
      drain(req, opts);
    });
  });
}

function drain(req: IncomingMessage, opts: DrainOptions): void {
  let read = 0;
  const close = () => {
    done();
    req.socket?.destroy();
  };
  const timer = setTimeout(close, opts.drainTimeoutMs);
  timer.unref();
  const done = () => {
    clearTimeout(timer);
    req.off('data', onData);
    req.off('end', done);
    req.off('error', done);
  };
  const onData = (chunk: Buffer) => {
    read += chunk.length;
    if (read > opts.maxDrainBytes) close();
  };
  // Whoever held the body (a web stream that paused it) no longer reads it.
  req.removeAllListeners('data');
  req.on('data', onData);
  req.once('end', done);
  req.once('error', done);
  req.resume();
}
