/**
 * An in-process cell for fast route tests: the real app and store on a temp
 * directory, no socket, an injectable clock, and the bootstrap admin key.
 * With CELL_TEST_STORE=postgres the store is a fresh database of its own on
 * the run's PostgreSQL server (test/helpers/postgres.ts), so the same suite
 * runs on both engines.
 *
 * @example
 * const t = await inProcessCell();
 * const r = await t.request('GET', '/api/public/v1/admin/api-keys', { token: t.adminKey });
 * assert.equal(r.status, 200);
 * await t.modules.jobs.scheduler.tick();
 * await t.close();
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CellConfig } from '../../cell/config.ts';
import { manualClock, type CellCore, type Clock } from '../../cell/context.ts';
import { startCell, type Modules, type RunningCell } from '../../cell/server.ts';
import type { Row, SqlValue } from '../../cell/store/types.ts';
import { pgDatabase } from './postgres.ts';

export interface InProcess {
  core: CellCore;
  modules: Modules;
  app: RunningCell['app'];
  running: RunningCell;
  adminKey: string;
  clock: ReturnType<typeof manualClock>;
  dir: string;
  /** Which engine the store runs on (CELL_TEST_STORE). */
  engine: 'embedded' | 'postgres';
  request(method: string, path: string, opts?: RequestOpts): Promise<TestResponse>;
  /** A read of the store, for assertions on what was (not) written. */
  row(sql: string, params?: readonly SqlValue[]): Promise<Row | undefined>;
  rows(sql: string, params?: readonly SqlValue[]): Promise<Row[]>;
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

/** The engine the tests of this run use: CELL_TEST_STORE=postgres, else embedded. */
export const TEST_ENGINE: 'embedded' | 'postgres' = process.env['CELL_TEST_STORE'] === 'postgres' ? 'postgres' : 'embedded';

/** A store URL for one test cell: a new database on the run's PostgreSQL server, or null (embedded). */
export async function testStore(): Promise<{ url: string | null; drop(): Promise<void> }> {
  if (TEST_ENGINE !== 'postgres') return { url: null, drop: async () => {} };
  const db = await pgDatabase();
  return { url: db.url, drop: () => db.drop() };
}

export async function inProcessCell(
  opts: { config?: Partial<CellConfig>; clock?: ReturnType<typeof manualClock>; log?: boolean } = {},
): Promise<InProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'cell-test-'));
  const clock = opts.clock ?? manualClock(Date.UTC(2026, 0, 1));
  const store = await testStore();
  let running: RunningCell;
  try {
    running = await startCell({
      config: { dataDir: dir, cellId: 'cell-test', ...(store.url ? { storeUrl: store.url } : {}), ...opts.config },
      clock: clock as Clock,
      listen: false,
      ...(opts.log ? {} : { log: quietLog }),
    });
  } catch (err) {
    await store.drop();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const adminKey = running.bootstrapSecret ?? '';
  const request = async (method: string, path: string, o: RequestOpts = {}): Promise<TestResponse> => {
    const headers: Record<string, string> = { ...o.headers };
    if (o.token) headers['authorization'] ??= `Bearer ${o.token}`;
    let body: string | undefined;
    if (o.rawBody !== undefined) body = o.rawBody;
    else if (o.body !== undefined) body = JSON.stringify(o.body);
    if (body !== undefined) headers['content-type'] ??= 'application/json';
    const res = await running.app.request(path, { method, headers, ...(body !== undefined ? { body } : {}) }, {
      incoming: { socket: { remoteAddress: o.ip ?? '127.0.0.1' } },
    } as never);
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: res.status, headers: res.headers, body: parsed, text };
  };
  return {
    core: running.core,
    modules: running.modules,
    app: running.app,
    running,
    adminKey,
    clock,
    dir,
    engine: TEST_ENGINE,
    request,
    row: (sql, params) => running.core.store.get(sql, params),
    rows: (sql, params) => running.core.store.all(sql, params),
    async close() {
      await running.stop();
      await store.drop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
