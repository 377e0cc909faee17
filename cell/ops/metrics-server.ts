/**
 * `GET /metrics` on its own port (`--metrics-port`), bound to loopback only:
 * metrics name routes, principals' activity and the cell's load, so they are
 * not served on the public listener; a scraper on the same host (or a
 * sidecar) reads them without a credential. Anything else on that port is 404.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { CellMetrics } from './metrics.ts';

export const METRICS_HOST = '127.0.0.1';

export interface MetricsServer {
  url: string;
  close(): Promise<void>;
}

export function serveMetrics(metrics: CellMetrics, port: number): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not_found","message":"no such resource"}');
      return;
    }
    metrics.expose().then(
      (text) => {
        res.writeHead(200, { 'content-type': metrics.registry.contentType, 'cache-control': 'no-store' });
        res.end(req.method === 'HEAD' ? undefined : text);
      },
      () => {
        res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"internal_error","message":"metrics failed"}');
      },
    );
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, METRICS_HOST, () => {
      server.off('error', reject);
      const { port: bound } = server.address() as AddressInfo;
      resolve({
        url: `http://${METRICS_HOST}:${bound}/metrics`,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeAllConnections();
          }),
      });
    });
  });
}
