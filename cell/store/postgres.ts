/**
 * The PostgreSQL engine of the store (contract: cell/store/types.ts), over
 * the `pg` driver's connection pool.
 *
 * - Reads outside a transaction go to the pool; reads inside a write function
 *   (through `tx` or the store itself) go to that transaction's connection.
 * - `write(fn)` runs `fn` in a SERIALIZABLE transaction on one pooled
 *   connection, pipelined: BEGIN is sent with the first statement, and
 *   statements issued without waiting for each other (Promise.all) share one
 *   round trip; the server runs them in the order they were issued. A serialization failure or deadlock (40001, 40P01) runs `fn`
 *   again (bounded, with jittered backoff); afterCommit effects run once,
 *   after the COMMIT that succeeded. COMMIT returns once the server has
 *   flushed the commit record (synchronous_commit is forced on).
 * - A lost connection is a 503 `service_unavailable` (`connection_lost`,
 *   retryable); the pool opens new connections as soon as the server is back.
 *   When the connection drops during COMMIT, the engine asks the server
 *   (txid_status) whether that transaction committed before answering, so an
 *   acknowledged write is never reported as failed nor the reverse.
 * - Change notifications: each committing transaction that wrote issues
 *   `pg_notify` inside itself (delivered at commit, never on rollback); a
 *   dedicated LISTEN connection delivers other cells' changes (`remote: true`);
 *   when it is lost, and again once it is back, a change naming every table
 *   (`gap: 'lost'`, then `gap: 'resumed'`). A write may skip the NOTIFY
 *   (`{ notify: false }`) for tables no cell caches.
 * - Migrations: shared with the embedded engine, applied once under an
 *   advisory lock (docs/storage.md).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { ServiceError } from '../../core/errors.ts';
import { ChangeListener } from './internal/pg-listen.ts';
import { connectionLost, isConnectionLost, isRetryable, sqlState } from './internal/pg-errors.ts';

/** Whether an error of the `pg` driver means the server was not reached or the connection was lost (SQL job steps). */
export { isConnectionLost };
import { migratePostgres } from './internal/pg-migrate.ts';
import { type BatchStatement, batchable, StatementBatch } from './internal/pg-batch.ts';
import { type PgStatement, pgStatement, StatementNames } from './internal/pg-sql.ts';
import { PG_TYPES, toPgParams } from './internal/pg-types.ts';
import { checkMigrations } from './internal/migrations.ts';
import { TxContext } from './internal/tx-context.ts';
import type { Change, OpenStoreOptions, Row, SqlValue, Store, StoreHealth, StoreObserver, Tx, WriteOptions } from './types.ts';

/** The advisory lock the cells of a database migrate under (what no SQL job may hold: docs/jobs.md). */
export { MIGRATION_LOCK_KEY } from './internal/pg-migrate.ts';

/** The NOTIFY channel every cell of a database uses. */
export const CHANGE_CHANNEL = 'cell_store_change';
export const DEFAULT_POOL_SIZE = 10;
/**
 * Most subjects one notification names (WriteOptions.subjects); past it, it names none ("any key").
 * 100 run ids of ~40 characters stay well under PostgreSQL's 8,000-byte payload limit.
 */
const MAX_SUBJECTS = 100;

/** Subjects a notification may carry: identifiers only (they go into a SQL literal unescaped), at most MAX_SUBJECTS; null otherwise (any key). */
function subjectSet(subjects: readonly string[] | undefined): Set<string> | null {
  if (subjects === undefined || subjects.length > MAX_SUBJECTS) return null;
  for (const k of subjects) if (!/^[A-Za-z0-9_.:-]{1,100}$/.test(k)) return null;
  return new Set(subjects);
}

/** `application_name` of the LISTEN connection (the pool's connections are `agent-cell`). */
export const LISTEN_APPLICATION_NAME = 'agent-cell-listen';
const DEFAULT_MAX_ATTEMPTS = 30;
/** How long a `notify: 'batched'` write's notification may wait to be shared with others (ms). */
export const BATCHED_NOTIFY_MS = 200;

export interface PostgresStoreOptions extends OpenStoreOptions {
  /** `postgres://user:password@host:port/database` (or `postgresql://`). */
  url: string;
  /** Connections in the pool (reads and write transactions); one more is used for LISTEN. Default 10. */
  poolSize?: number;
  /** Runs of a write function before a serialization conflict is given up as a 503. Default 30. */
  maxAttempts?: number;
  /** Time allowed to open a connection (ms). Default 5000. */
  connectTimeoutMs?: number;
  /** How long a write cut off during COMMIT waits for the server to say whether it committed (ms). Default 15000. */
  commitCheckMs?: number;
  /**
   * When other cells are told of a commit. `in-transaction` (default): NOTIFY
   * inside the committing transaction, delivered if and only if it commits;
   * PostgreSQL then serializes the commits of notifying transactions (one
   * WAL flush each: about 5x fewer durable writes/s here, docs/storage.md).
   * `after-commit`: NOTIFY right after COMMIT on the same connection; commits
   * keep their group flush, but a cell that dies between the two leaves
   * other cells uninformed of that one commit.
   */
  notify?: NotifyMode;
}

export type NotifyMode = 'in-transaction' | 'after-commit';

export interface PostgresStats {
  commits: number;
  /** Write functions run again after a serialization failure or deadlock. */
  retries: number;
  /** Operations refused because the server could not be reached. */
  connectionErrors: number;
  /** COMMITs cut off by a lost connection whose outcome was then asked of the server. */
  commitChecks: number;
  /** Notifications received from other cells. */
  remoteChanges: number;
  /** Statements sent in batches of two or more (one Sync a batch: internal/pg-batch.ts). */
  batched: number;
}

/** The Store contract plus what operators, tests and benchmarks look at. */
export interface PostgresStore extends Store {
  readonly engine: 'postgres';
  readonly stats: Readonly<PostgresStats>;
  /** Random id of this open store, carried in its notifications (so it ignores its own). */
  readonly instanceId: string;
}

interface TxState {
  store: PgStore;
  client: pg.PoolClient;
  live: boolean;
  /** Settles once every statement issued so far has (they run in order on the pipelined connection). */
  chain: Promise<unknown>;
  firstError: unknown;
  /** Tables the transaction's statements write (lower case), for change notifications. */
  written: Set<string>;
  /** Statements issued in this tick, sent together at its end (pg-batch.ts), or null. */
  batch: StatementBatch | null;
}

const inTx = new TxContext<TxState>();

/** Sockets corked until the end of the current tick (corkForTick), with what is sent into them before they are uncorked. */
const corkedThisTick = new WeakMap<object, (() => void)[]>();

/**
 * Corks the connection's socket until the end of the current tick (once a tick), so what the
 * transaction's statements write on it in that tick (BEGIN with the first ones, a batch, COMMIT)
 * leaves in one write instead of one each. pg corks each query itself; nested corks only flush at
 * the outer uncork. `atTickEnd` runs at the end of the tick, before the socket is uncorked (a batch
 * sent then).
 */
function corkForTick(client: pg.PoolClient, atTickEnd?: () => void): void {
  const stream = (client as unknown as { connection?: { stream?: { cork?(): void; uncork?(): void } } }).connection?.stream;
  if (stream?.cork && stream.uncork) {
    let ends = corkedThisTick.get(stream);
    if (ends === undefined) {
      const these: (() => void)[] = [];
      ends = these;
      corkedThisTick.set(stream, these);
      stream.cork();
      process.nextTick(() => {
        for (const end of these) end();
        corkedThisTick.delete(stream);
        stream.uncork!();
      });
    }
    if (atTickEnd) ends.push(atTickEnd);
  } else if (atTickEnd) process.nextTick(atTickEnd);
}

/** Issues `send` (a `client.query`) into the socket corked for this tick (corkForTick). */
function sendTogether<T>(client: pg.PoolClient, send: () => T): T {
  corkForTick(client);
  return send();
}

/** One for the process: names are per text, and each connection prepares the ones it runs. */
const statementNames = new StatementNames();

/** A statement of the shared dialect as the driver sends it: numbered placeholders, its values, its prepared name (pg-sql.ts). */
function pgQuery(st: PgStatement, params: readonly SqlValue[] | undefined): BatchStatement {
  return { text: st.text, values: toPgParams(params), name: statementNames.of(st) };
}

/** Throws the text's dialect refusal (a TypeError, as checkPortable throws it). */
function checkStatement(st: PgStatement): void {
  if (st.info.refused !== null) throw new TypeError(st.info.refused);
}

/**
 * Runs a statement on a checked-out connection. Built as pg's own Query from its text rather than from a
 * config object: pg copies a config object property by property into a slow-mode object (~3 µs and ~700
 * bytes a statement, a dozen statements a step); the Query and what goes on the wire are the same.
 */
function submit(client: pg.PoolClient, q: BatchStatement): Promise<pg.QueryResult> {
  // `name` and `callback` are pg's Query fields (lib/query.js); @types/pg leaves them out.
  const query = new pg.Query(q.text, q.values) as pg.Query & {
    name?: string;
    callback?: (err: Error | null, res: pg.QueryResult) => void;
  };
  if (q.name !== undefined) query.name = q.name;
  return new Promise((resolve, reject) => {
    query.callback = (err: Error | null, res: pg.QueryResult) => (err ? reject(err) : resolve(res));
    client.query(query);
  });
}

/** Sends the transaction's batch of this tick, if it has one (before anything else goes on its connection). */
function flushBatch(state: TxState): void {
  const b = state.batch;
  if (b === null) return;
  state.batch = null;
  if (b.size > 1) state.store.stats.batched += b.size;
  state.client.query(b);
}

/**
 * A transaction's start, the first two statements of its first batch: BEGIN, then its id and the server's
 * start time (to ask about its outcome should COMMIT be cut off).
 */
const BEGIN: BatchStatement = { text: 'BEGIN ISOLATION LEVEL SERIALIZABLE', name: undefined, values: [] };
/** The same for a `row-locks` write (WriteOptions.isolation): READ COMMITTED, the writer locks the rows it relies on. */
const BEGIN_ROW_LOCKS: BatchStatement = { text: 'BEGIN ISOLATION LEVEL READ COMMITTED', name: undefined, values: [] };
const BEGUN: BatchStatement = { text: 'SELECT txid_current() AS xid, pg_postmaster_start_time() AS started', name: undefined, values: [] };

/** The transaction's batch for this tick, opened when it has none (sent at the tick's end, or before anything else goes). */
function batchOf(state: TxState): StatementBatch {
  if (state.batch !== null) return state.batch;
  const b = new StatementBatch();
  state.batch = b;
  corkForTick(state.client, () => {
    if (state.batch === b) flushBatch(state);
  });
  return b;
}

function closed(): ServiceError {
  return new ServiceError('service_unavailable', 'The store is closed.', { details: { reason: 'store_closed' }, retryable: true });
}

function conflictExhausted(): ServiceError {
  return new ServiceError('service_unavailable', 'The write kept conflicting with concurrent writes; try again.', {
    details: { reason: 'write_conflict' },
    retryable: true,
  });
}

function commitUnknown(): ServiceError {
  // A blind retry could apply the write twice: not retryable.
  return new ServiceError('service_unavailable', 'The connection to the store was lost during commit and its outcome is unknown.', {
    details: { reason: 'commit_unknown' },
    retryable: false,
  });
}

/** `host:port/database` of a URL, for messages (never the password). */
export function describeUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || '5432'}${u.pathname}`;
  } catch {
    return '(unparsable URL)';
  }
}

/** The results of a query: several for a multi-statement (simple protocol) query. */
function results(res: unknown): pg.QueryResult<Row>[] {
  return Array.isArray(res) ? res : [res as pg.QueryResult<Row>];
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Opens the store on a PostgreSQL database: pool, server checks, migrations, LISTEN. */
export async function openPostgresStore(opts: PostgresStoreOptions): Promise<PostgresStore> {
  checkMigrations(opts.migrations);
  if (!/^postgres(ql)?:\/\//.test(opts.url))
    throw new TypeError('openStore: the PostgreSQL url must start with postgres:// or postgresql://');
  const poolSize = opts.poolSize ?? DEFAULT_POOL_SIZE;
  if (!Number.isInteger(poolSize) || poolSize < 1 || poolSize > 1000)
    throw new TypeError('openStore: poolSize must be an integer from 1 to 1000');
  const note = opts.log ?? ((msg: string) => console.warn(msg));
  const clientConfig: pg.ClientConfig = {
    connectionString: opts.url,
    types: PG_TYPES,
    connectionTimeoutMillis: opts.connectTimeoutMs ?? 5000,
    keepAlive: true,
    application_name: 'agent-cell',
    // Durable means the commit record is flushed before COMMIT returns, whatever the server's default.
    // A session whose cell is gone ends within a second even while a statement runs or waits for a
    // lock (client_connection_check_interval): it does not go on holding the rows it locked (a run's,
    // which a peer taking the run over waits for), nor run the COMMIT it was sent once its wait ends.
    options: '-c synchronous_commit=on -c client_connection_check_interval=1000',
  };
  // Pipelined: the statements of a transaction go to the server as they are issued, without waiting
  // for the answer of the one before (answers come back in order), so a transaction's BEGIN rides
  // with its first statement and statements issued together (Promise.all) cost one round trip.
  const pool = new pg.Pool({ ...clientConfig, pipeline: true, max: poolSize, idleTimeoutMillis: 30_000 });
  // An idle connection that dies (server restart) is dropped by the pool; the next query opens another.
  pool.on('error', () => undefined);
  const store = new PgStore(pool, clientConfig, note, opts);
  try {
    await store.init(opts);
  } catch (err) {
    await store.close();
    if (isConnectionLost(err)) {
      throw new Error(`store: cannot reach PostgreSQL at ${describeUrl(opts.url)}: ${(err as Error).message}`);
    }
    throw err;
  }
  return store;
}

class PgStore implements PostgresStore {
  readonly engine = 'postgres' as const;
  readonly instanceId = randomBytes(8).toString('hex');
  readonly stats: PostgresStats = { commits: 0, retries: 0, connectionErrors: 0, commitChecks: 0, remoteChanges: 0, batched: 0 };
  readonly #listeners = new Set<(c: Change) => void>();
  readonly #listener: ChangeListener;
  readonly #maxAttempts: number;
  readonly #commitCheckMs: number;
  readonly #notifyInTx: boolean;
  readonly #observe: StoreObserver | undefined;
  #closing = false;
  #closed = false;
  #closingRun: Promise<void> | undefined;
  #inflight = 0;
  #idle: (() => void)[] = [];
  /** Every table of the schema, for the change sent after a notification gap. */
  #tables: string[] = [];

  constructor(
    private readonly pool: pg.Pool,
    clientConfig: pg.ClientConfig,
    private readonly note: (msg: string) => void,
    opts: PostgresStoreOptions,
  ) {
    this.#maxAttempts = opts.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
    this.#commitCheckMs = opts.commitCheckMs ?? 15_000;
    this.#notifyInTx = (opts.notify ?? 'in-transaction') === 'in-transaction';
    this.#observe = opts.observe;
    this.#listener = new ChangeListener({
      // Named apart from the pool's connections, so an operator (and a test) can tell it in pg_stat_activity.
      config: { ...clientConfig, application_name: LISTEN_APPLICATION_NAME },
      channel: CHANGE_CHANNEL,
      note,
      onPayload: (p) => this.#remote(p),
      onLost: () => this.#emit({ tables: new Set(this.#tables), remote: true, gap: 'lost' }),
      onGap: () => this.#emit({ tables: new Set(this.#tables), remote: true, gap: 'resumed' }),
    });
  }

  async init(opts: PostgresStoreOptions): Promise<void> {
    const s = await this.pool.query(
      "SELECT current_setting('server_version_num') AS v, current_setting('fsync') AS fsync, datcollate AS collate FROM pg_database WHERE datname = current_database()",
    );
    const row = s.rows[0] as Row | undefined;
    const version = Number(row?.['v']);
    if (!(version >= 150000)) throw new Error(`store: PostgreSQL ${String(row?.['v'])} is too old; version 15 or newer is needed`);
    if (row?.['fsync'] === 'off')
      this.note(
        'store: the PostgreSQL server runs with fsync=off: acknowledged writes survive a crash of the cell or of the server process, not of its machine',
      );
    const collate = String(row?.['collate']);
    if (collate !== 'C' && collate !== 'POSIX') {
      this.note(
        `store: the database collation is ${collate}, not C: ORDER BY on text may differ from the embedded engine (docs/storage.md)`,
      );
    }
    await migratePostgres(this.pool, opts.migrations, this.note);
    this.#tables = await this.#schemaTables();
    await this.#listener.start();
  }

  async #schemaTables(): Promise<string[]> {
    const r = await this.pool.query(
      "SELECT table_name AS t FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' AND table_name <> '_migrations'",
    );
    return r.rows.map((x: Row) => String(x['t']));
  }

  // ---- reads

  async get(sql: string, params?: readonly SqlValue[]): Promise<Row | undefined> {
    return (await this.#read(sql, params))[0];
  }

  async all(sql: string, params?: readonly SqlValue[]): Promise<Row[]> {
    return this.#read(sql, params);
  }

  async #read(sql: string, params: readonly SqlValue[] | undefined): Promise<Row[]> {
    const st = pgStatement(sql);
    checkStatement(st);
    const ctx = inTx.current();
    if (ctx && ctx.store === this && ctx.live) return (await this.#txQuery(ctx, sql, params)).rows;
    if (this.#closed || this.#closing) throw closed();
    const query = pgQuery(st, params);
    for (let attempt = 1; ; attempt++) {
      try {
        return (await this.pool.query(query)).rows;
      } catch (err) {
        if (!isConnectionLost(err)) throw err;
        // A read is safe to repeat: once, in case the pool handed out a connection that had just died.
        if (attempt >= 2) {
          this.stats.connectionErrors++;
          throw connectionLost();
        }
      }
    }
  }

  // ---- writes

  async write<T>(fn: (tx: Tx) => Promise<T>, opts?: WriteOptions): Promise<T> {
    const ctx = inTx.current();
    if (ctx && ctx.store === this && ctx.live) throw new TypeError('store.write: nested write inside a transaction');
    if (this.#closing || this.#closed) throw closed();
    this.#inflight++;
    const start = this.#observe ? performance.now() : 0;
    let ok = false;
    try {
      const result = await this.#write(fn, opts?.notify ?? true, opts?.isolation === 'row-locks', opts?.subjects);
      ok = true;
      return result;
    } finally {
      this.#observe?.write((performance.now() - start) / 1000, ok);
      if (--this.#inflight === 0) for (const w of this.#idle.splice(0)) w();
    }
  }

  async #write<T>(
    fn: (tx: Tx) => Promise<T>,
    notifyOthers: boolean | 'batched',
    rowLocks: boolean,
    subjects: readonly string[] | undefined,
  ): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      let client: pg.PoolClient;
      try {
        client = await this.pool.connect();
      } catch (err) {
        if (!isConnectionLost(err)) throw err;
        this.stats.connectionErrors++;
        throw connectionLost();
      }
      // A checked-out connection that dies between statements emits 'error': the next statement reports it.
      const onError = (): void => undefined;
      client.on('error', onError);
      const release = (err?: Error | boolean): void => {
        client.off('error', onError);
        client.release(err);
      };
      const state: TxState = {
        store: this,
        client,
        live: true,
        chain: Promise.resolve(),
        firstError: undefined,
        written: new Set(),
        batch: null,
      };
      const effects: (() => void)[] = [];
      let xid: number | undefined;
      let started: SqlValue | undefined;
      let committing = false;
      let result!: T;
      let tables = new Set<string>();
      // Not awaited: the function's first statements follow BEGIN in its batch (pg-batch.ts). A BEGIN that
      // fails aborts the transaction for them as any failed statement does (state.firstError).
      const opening = batchOf(state);
      const begun = opening.add(rowLocks ? BEGIN_ROW_LOCKS : BEGIN);
      const begin = Promise.all([begun, opening.add(BEGUN)]).then(
        ([, res]) => {
          const row = res.rows[0];
          xid = Number(row?.['xid']);
          started = row?.['started'];
        },
        (err: unknown) => {
          state.firstError ??= err;
        },
      );
      state.chain = begin;
      try {
        const tx: Tx = {
          get: async (sql, params) => (await this.#txQuery(state, sql, params)).rows[0],
          all: async (sql, params) => (await this.#txQuery(state, sql, params)).rows,
          run: async (sql, params) => ({ changes: (await this.#txQuery(state, sql, params)).rowCount ?? 0 }),
          afterCommit: (effect) => {
            effects.push(effect);
          },
        };
        result = await inTx.run(state, () => fn(tx));
        state.live = false;
        // A statement that failed aborted the transaction (as PostgreSQL does), even if fn caught it.
        if (state.firstError !== undefined) {
          await state.chain;
          throw state.firstError;
        }
        tables = state.written;
        committing = true;
        const notify =
          tables.size > 0 && notifyOthers === true
            ? `SELECT pg_notify('${CHANGE_CHANNEL}', '${this.#payload(tables, subjectSet(subjects))}')`
            : null;
        // Sent behind the statements fn left in flight (Tx: their failure aborts the transaction), in their
        // round trip; the server answers ROLLBACK for it when one of them failed.
        flushBatch(state);
        const commit = sendTogether(client, () => client.query(notify && this.#notifyInTx ? `${notify}; COMMIT` : 'COMMIT'));
        commit.catch(() => undefined);
        await begin;
        await state.chain;
        if (state.firstError !== undefined) {
          await commit.catch(() => undefined);
          throw state.firstError;
        }
        const res = await commit;
        const last = results(res).at(-1);
        if (last?.command !== 'COMMIT') throw new Error(`store: COMMIT answered ${String(last?.command)}`);
        committing = false;
        // After-commit mode: the write is durable whatever happens to this notification.
        if (notify && !this.#notifyInTx) await client.query(notify).catch(() => undefined);
        release();
        if (tables.size > 0 && notifyOthers === 'batched') this.#notifySoon(tables, subjectSet(subjects));
      } catch (err) {
        state.live = false;
        // Statements fn issued in this tick before it threw go before the ROLLBACK, inside the transaction.
        flushBatch(state);
        const lost = isConnectionLost(err);
        if (lost) {
          release(true);
        } else {
          await client.query('ROLLBACK').then(
            () => release(),
            () => release(true),
          );
        }
        const cause = state.firstError ?? err;
        if (!lost && isRetryable(cause) && attempt < this.#maxAttempts) {
          this.stats.retries++;
          this.#observe?.retry?.(sqlState(cause) ?? '');
          await sleep(Math.random() * Math.min(100, 2 ** attempt));
          continue;
        }
        if (!lost && isRetryable(cause)) throw conflictExhausted();
        if (!lost) throw err;
        this.stats.connectionErrors++;
        // COMMIT went out before BEGIN's answer came back (pipelined) and the connection was lost: no id to ask about.
        if (committing && (xid === undefined || !Number.isFinite(xid))) throw commitUnknown();
        if (committing && xid !== undefined && Number.isFinite(xid)) {
          const outcome = await this.#commitOutcome(xid, started ?? null);
          if (outcome === 'unknown') throw commitUnknown();
          if (outcome === 'committed') return this.#committed(result, effects, tables, subjects);
          // Aborted: nothing of it was kept, so a retry by the caller is safe.
        } else if (attempt === 1) {
          // Lost before COMMIT was sent: nothing was kept; try once more on a fresh connection.
          continue;
        }
        throw connectionLost();
      }
      return this.#committed(result, effects, tables, subjects);
    }
  }

  #committed<T>(result: T, effects: (() => void)[], tables: Set<string>, subjects: readonly string[] | undefined): T {
    this.stats.commits++;
    // An effect that throws is logged: it never turns a durable write into a failure.
    for (const e of effects) {
      try {
        e();
      } catch (err) {
        this.note(`store: an afterCommit effect threw: ${(err as Error).message}`);
      }
    }
    if (tables.size > 0) this.#emit(subjects ? { tables, remote: false, subjects: new Set(subjects) } : { tables, remote: false });
    return result;
  }

  /** One statement of a transaction, after the ones before it; the first failure aborts the transaction. */
  #txQuery(state: TxState, sql: string, params: readonly SqlValue[] | undefined): Promise<pg.QueryResult> {
    if (!state.live) return Promise.reject(new TypeError('store: a transaction was used after it ended'));
    const st = pgStatement(sql);
    if (st.info.txControl) {
      return Promise.reject(
        new TypeError(`store: "${sql.trim().split(/\s/)[0]}" is not allowed inside write(); the store owns the transaction`),
      );
    }
    if (state.firstError !== undefined) {
      return Promise.reject(new Error(`store: the transaction is aborted by an earlier error (${(state.firstError as Error).message})`));
    }
    try {
      checkStatement(st);
    } catch (err) {
      state.firstError ??= err;
      return Promise.reject(err);
    }
    if (st.info.write) for (const t of st.info.tables) state.written.add(t);
    // Sent behind the statements before it (the connection is pipelined: answers come in order): in this
    // tick's batch when it can be (pg-batch.ts), else alone, after that batch.
    const q = pgQuery(st, params);
    let p: Promise<pg.QueryResult>;
    if (batchable(state.client, q)) {
      p = batchOf(state).add(q);
    } else {
      flushBatch(state);
      p = sendTogether(state.client, () => submit(state.client, q));
    }
    const before = state.chain;
    state.chain = p.then(
      () => before,
      () => before,
    );
    return p.catch((err: unknown) => {
      state.firstError ??= err;
      throw err;
    });
  }

  /** Tables written by `notify: 'batched'` commits and not announced yet, their subjects (null: any), and the timer that will. */
  #batched = new Set<string>();
  #batchedSubjects: Set<string> | null = new Set();
  #batchTimer: NodeJS.Timeout | null = null;

  /** Tells other cells of `tables` within BATCHED_NOTIFY_MS, in one notification with the other batched commits'. */
  #notifySoon(tables: Set<string>, subjects: Set<string> | null): void {
    for (const t of tables) this.#batched.add(t);
    if (subjects === null || this.#batchedSubjects === null || this.#batchedSubjects.size + subjects.size > MAX_SUBJECTS)
      this.#batchedSubjects = null;
    else for (const k of subjects) this.#batchedSubjects.add(k);
    if (this.#batchTimer) return;
    this.#batchTimer = setTimeout(() => {
      this.#batchTimer = null;
      void this.#sendBatched();
    }, BATCHED_NOTIFY_MS);
    this.#batchTimer.unref();
  }

  async #sendBatched(): Promise<void> {
    const all = this.#batched;
    const subjects = this.#batchedSubjects;
    this.#batched = new Set();
    this.#batchedSubjects = new Set();
    if (this.#closed || all.size === 0) return;
    try {
      // Outside any transaction: a notification only (it takes the server's notification lock once per interval).
      await this.pool.query(`SELECT pg_notify('${CHANGE_CHANNEL}', '${this.#payload(all, subjects)}')`);
    } catch {
      // Not sent (the server is away): announced again with the next batch.
      if (!this.#closing) this.#notifySoon(all, subjects);
    }
  }

  /** The notification's text: this instance, the tables and, when every write named them, the subjects (`s`). */
  #payload(tables: Set<string>, subjects: Set<string> | null): string {
    // Table names are identifiers ([A-Za-z0-9_]), the id is hex and subjects are checked by subjectSet: nothing to escape in the literal.
    return JSON.stringify(subjects ? { i: this.instanceId, t: [...tables], s: [...subjects] } : { i: this.instanceId, t: [...tables] });
  }

  /**
   * Whether transaction `xid` committed, asked of the server once it answers
   * again. While the server that ran it is still up (same start time), its
   * commit log is the answer. After a crash, ids never written to the WAL are
   * handed out again, so "committed" may be another transaction's: only
   * "aborted", "in progress" (necessarily someone else's) and "not assigned
   * yet" are conclusive, all meaning ours did not commit; "committed" stays
   * unknown.
   */
  async #commitOutcome(xid: number, started: SqlValue): Promise<'committed' | 'aborted' | 'unknown'> {
    this.stats.commitChecks++;
    const deadline = Date.now() + this.#commitCheckMs;
    while (Date.now() < deadline && !this.#closed) {
      try {
        const r = await this.pool.query(
          "SELECT pg_postmaster_start_time() AS started, CASE WHEN $1 >= txid_snapshot_xmax(txid_current_snapshot()) THEN 'not yet assigned' ELSE txid_status($1) END AS s",
          [xid],
        );
        const row = r.rows[0] as Row | undefined;
        const s = row?.['s'];
        const sameServer = started !== null && row?.['started'] === started;
        if (sameServer) {
          if (s === 'committed') return 'committed';
          if (s === 'aborted') return 'aborted';
          if (s !== 'in progress') return 'unknown';
        } else {
          if (s === 'aborted' || s === 'in progress' || s === 'not yet assigned') return 'aborted';
          return 'unknown';
        }
      } catch (err) {
        if (!isConnectionLost(err)) return 'unknown';
      }
      await sleep(100);
    }
    return 'unknown';
  }

  // ---- notifications

  onChange(listener: (c: Change) => void): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  #emit(change: Change): void {
    for (const l of this.#listeners) {
      try {
        l(change);
      } catch (err) {
        this.note(`store: a change listener threw: ${(err as Error).message}`);
      }
    }
  }

  #remote(payload: string): void {
    let msg: unknown;
    try {
      msg = JSON.parse(payload);
    } catch {
      return;
    }
    const m = msg as { i?: unknown; t?: unknown; s?: unknown };
    if (typeof m.i !== 'string' || m.i === this.instanceId || !Array.isArray(m.t)) return;
    this.stats.remoteChanges++;
    const tables = new Set(m.t.filter((x): x is string => typeof x === 'string'));
    // Subjects only when every entry is a string: anything else (an older or newer sender) means "any key".
    const s = Array.isArray(m.s) && m.s.every((x) => typeof x === 'string') ? new Set(m.s as string[]) : null;
    this.#emit(s ? { tables, remote: true, subjects: s } : { tables, remote: true });
  }

  // ---- health and close

  async health(): Promise<StoreHealth> {
    if (this.#closing || this.#closed) return { ok: false, reason: 'store_closed' };
    try {
      await this.pool.query('SELECT 1');
    } catch (err) {
      return { ok: false, reason: isConnectionLost(err) ? 'connection_lost' : 'store_failed' };
    }
    if (!this.#listener.connected) return { ok: false, reason: 'notifications_lost' };
    return { ok: true };
  }

  close(): Promise<void> {
    this.#closingRun ??= this.#close();
    return this.#closingRun;
  }

  async #close(): Promise<void> {
    this.#closing = true;
    if (this.#inflight > 0) await new Promise<void>((r) => this.#idle.push(r));
    if (this.#batchTimer) {
      clearTimeout(this.#batchTimer);
      this.#batchTimer = null;
      await this.#sendBatched();
    }
    this.#closed = true;
    await this.#listener.close();
    await this.pool.end().catch(() => undefined);
  }
}
