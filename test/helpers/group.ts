/**
 * A group of real cell processes (dist/cell.mjs) on one PostgreSQL database,
 * for the tests of what a group must agree on (authority, secrets, bundles,
 * schedules). Each cell has its own data directory and port; they share the
 * database given with `--store`. Needs `node scripts/build.mjs` first.
 */
import { request } from 'undici';
import { startCellProcess, type CellProcess } from './cell-process.ts';
import { pgDatabase, type PgDatabase } from './postgres.ts';

export interface Group {
  db: PgDatabase;
  cells: CellProcess[];
  /** The owner key the group's first cell printed. */
  adminKey: string;
  /** Starts one more member (same database). */
  add(args?: string[]): Promise<CellProcess>;
  /** Kills every member, removes their directories, drops the database. */
  stop(): Promise<void>;
}

export interface Reply {
  status: number;
  body: any;
  text: string;
  headers: Record<string, string | string[] | undefined>;
}

/**
 * Starts `n` cells on a new database: the first alone (it creates the owner),
 * then the others together. `args(i)` adds flags of cell i.
 */
export async function startGroup(n: number, opts: { args?: (i: number) => string[]; db?: PgDatabase } = {}): Promise<Group> {
  const db = opts.db ?? (await pgDatabase());
  const cells: CellProcess[] = [];
  const argsOf = (i: number) => ['--store', db.url, '--posture', 'multi-cell', ...(opts.args?.(i) ?? [])];
  const group: Group = {
    db,
    cells,
    adminKey: '',
    async add(args = []) {
      const c = await startCellProcess({ args: ['--store', db.url, '--posture', 'multi-cell', ...args] });
      cells.push(c);
      return c;
    },
    async stop() {
      for (const c of cells) await c.kill().catch(() => undefined);
      for (const c of cells) c.cleanup();
      await db.drop();
    },
  };
  try {
    cells.push(await startCellProcess({ args: argsOf(0) }));
    const rest = await Promise.all(Array.from({ length: n - 1 }, (_, k) => startCellProcess({ args: argsOf(k + 1) })));
    cells.push(...rest);
  } catch (e) {
    await group.stop();
    throw e;
  }
  group.adminKey = cells[0]!.adminKey;
  if (!group.adminKey) {
    await group.stop();
    throw new Error('the first cell printed no owner key');
  }
  return group;
}

/** One HTTP request to a cell; JSON in and out (`form` sends a form body). */
export async function call(
  base: string,
  method: string,
  path: string,
  opts: { token?: string; scheme?: string; body?: unknown; form?: Record<string, string>; headers?: Record<string, string> } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers['authorization'] = `${opts.scheme ?? 'Bearer'} ${opts.token}`;
  let body: string | undefined;
  if (opts.form) {
    headers['content-type'] = 'application/x-www-form-urlencoded';
    body = new URLSearchParams(opts.form).toString();
  } else if (opts.body !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(opts.body);
  }
  const r = await request(base + path, { method: method as 'GET', headers, ...(body !== undefined ? { body } : {}) });
  const text = await r.body.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: r.statusCode, body: parsed, text, headers: r.headers };
}

/** Like `call`, asserting one of `expect` statuses; returns the body. */
export async function ok(base: string, method: string, path: string, opts: Parameters<typeof call>[3] = {}, expect = [200, 201, 202]) {
  const r = await call(base, method, path, opts);
  if (!expect.includes(r.status)) throw new Error(`${method} ${path} -> ${r.status} ${r.text}`);
  return r.body;
}

/**
 * Polls `probe` until it returns true; resolves with the milliseconds from
 * `since` to the first true answer. Rejects after `timeoutMs`.
 */
export async function msUntil(what: string, since: number, probe: () => Promise<boolean>, timeoutMs = 10_000): Promise<number> {
  for (;;) {
    if (await probe()) return Date.now() - since;
    if (Date.now() - since > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
