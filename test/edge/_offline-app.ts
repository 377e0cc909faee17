// The offline gateway of a device in process (edge/gateway.ts + edge/offline.ts) over an edgeWorld's files:
// requests with the world's key, a run driven to its end, an SSE request.
import assert from 'node:assert/strict';
import { createEdgeApp } from '../../edge/gateway.ts';
import { mountOffline } from '../../edge/offline.ts';
import { offlineRuntime, SECRET, type edgeWorld } from './_edge-fixtures.ts';

export async function start(w: Awaited<ReturnType<typeof edgeWorld>>) {
  // Ample: runToEnd polls a run until it ends (the gateway's rate limit has tests of its own).
  const { rt, setup } = await offlineRuntime(w, { capacity: 10_000, refillPerSecond: 1000 });
  const app = createEdgeApp(rt, (a, guard) => mountOffline(a, guard, rt, setup));
  /** A request with the world's key (or `secret`); `socket` adds to the connection's (a TLS client certificate). */
  const req = async (method: string, path: string, body?: unknown, secret = SECRET, socket: Record<string, unknown> = {}) => {
    const r = await app.request(
      path,
      {
        method,
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      },
      { incoming: { socket: { remoteAddress: '127.0.0.1', ...socket } } },
    );
    return { status: r.status, body: (await r.json()) as any };
  };
  const runToEnd = async (input: unknown) => {
    const p = await req('POST', '/api/public/v1/admin/agent-teams/crews/crw_1/runs', { input });
    assert.equal(p.status, 202, JSON.stringify(p.body));
    for (let i = 0; i < 200; i++) {
      const g = await req('GET', `/api/public/v1/admin/agent-teams/crews/crw_1/runs/${p.body.run_id}`);
      if (g.body.state !== 'running') return g.body;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error('run did not finish');
  };
  const sse = (path: string, headers: Record<string, string> = {}) =>
    app.request(
      path,
      { headers: { authorization: `Bearer ${SECRET}`, ...headers } },
      { incoming: { socket: { remoteAddress: '127.0.0.1' } } },
    );
  return { setup, req, runToEnd, sse };
}
