/**
 * An in-process cell for fast route tests: the real app and store on a temp
 * directory, no socket, an injectable clock, and the bootstrap admin key.
 *
 * @example
 * const t = await inProcessCell();
 * const r = await t.request('GET', '/api/public/v1/admin/api-keys', { token: t.adminKey });
 * assert.equal(r.status, 200);
 * await t.close();
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CellConfig } from '../../cell/config.ts';
import { manualClock, type Cell, type Clock } from '../../cell/context.ts';
import type { CellModule } from '../../cell/module.ts';
import { startCell, type RunningCell } from '../../cell/server.ts';

export interface InProcess {
  cell: Cell;
  app: RunningCell['app'];
  running: RunningCell;
  adminKey: string;
  clock: ReturnType<typeof manualClock>;
  dir: string;
  request(method: string, path: string, opts?: RequestOpts): Promise<TestResponse>;
  close(): Promise<void>;
}

export interface RequestOpts {
  body?: unknown;
  /** Raw body string (sent as is, with content-type application/json unless headers say otherwise). */
  rawBody?: string;
  token?: string;
  ip?: string;
  headers?: Record<string, string>;
}

export interface TestResponse {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

const quietLog = { info() {}, warn() {}, error() {} };

export async function inProcessCell(opts: { config?: Partial<CellConfig>; clock?: ReturnType<typeof manualClock>; modules?: readonly CellModule[]; log?: boolean } = {}): Promise<InProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'cell-test-'));
  const clock = opts.clock ?? manualClock(Date.UTC(2026, 0, 1));
  const origWrite = process.stdout.write.bind(process.stdout);
  // The bootstrap key is printed once on first start; keep test output clean.
  process.stdout.write = ((chunk: unknown, ...rest: unknown[]) =>
    typeof chunk === 'string' && (chunk.startsWith('bootstrap admin key') || chunk.startsWith('svck_live_')) ? true : origWrite(chunk as string, ...(rest as []))) as typeof process.stdout.write;
  let running: RunningCell;
  try {
    running = await startCell({
      config: { dataDir: dir, cellId: 'cell-test', ...opts.config },
      clock: clock as Clock,
      listen: false,
      ...(opts.modules ? { modules: opts.modules } : {}),
      ...(opts.log ? {} : { log: quietLog }),
    });
  } finally {
    process.stdout.write = origWrite;
  }
  const adminKey = running.cell.services.get('iam.bootstrapKey') as string;
  const request = async (method: string, path: string, o: RequestOpts = {}): Promise<TestResponse> => {
    const headers: Record<string, string> = { ...o.headers };
    if (o.token) headers['authorization'] ??= `Bearer ${o.token}`;
    let body: string | undefined;
    if (o.rawBody !== undefined) body = o.rawBody;
    else if (o.body !== undefined) body = JSON.stringify(o.body);
    if (body !== undefined) headers['content-type'] ??= 'application/json';
    const res = await running.app.request(path, { method, headers, ...(body !== undefined ? { body } : {}) },
      { incoming: { socket: { remoteAddress: o.ip ?? '127.0.0.1' } } } as never);
    const text = await res.text();
    let parsed: unknown = undefined;
    try { parsed = text ? JSON.parse(text) : undefined; } catch { parsed = undefined; }
    return { status: res.status, headers: res.headers, body: parsed, text };
  };
  return {
    cell: running.cell, app: running.app, running, adminKey, clock, dir, request,
    async close() {
      await running.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
