/**
 * Statements of a transaction issued in one tick, sent as one message train with one Sync
 * (docs/storage.md "One Sync a batch").
 *
 * pg sends each query as Parse/Bind/Describe/Execute and a Sync. The server answers a Sync with
 * ReadyForQuery and flushes its output there, so a transaction's eight statements cost eight
 * sends of the server, up to eight wake-ups of the cell and pg's bookkeeping of eight queries.
 * A batch sends Bind/Describe/Execute for each statement and one Sync after the last: the server
 * answers them all in one flush, the cell reads them in one go.
 *
 * The server runs the statements in order; the first that fails makes it skip the rest until the
 * Sync. The failing statement rejects with the server's error, the ones after it with a
 * `StatementSkipped` error (they were not run), as pg rejects each of them with "current
 * transaction is aborted" today; the store aborts the transaction on the first. A connection
 * error rejects every statement not answered yet with that error.
 *
 * Only statements the connection has parsed already (a named statement in pg's
 * `parsedStatements`) or unnamed ones with parameters (an unnamed Parse of their own) go into a
 * batch: a named statement's first Parse on a connection goes alone, so pg's record of what each
 * connection has prepared stays exact however a batch ends.
 *
 * It is a pg `Query` to the driver (a pipelined client refuses other submittables), which calls
 * its handlers with the messages of the statements in the order they were sent.
 */
import pg from 'pg';

/** A statement as pg sends it: text, its prepared name (none: unnamed) and its values. */
export interface BatchStatement {
  text: string;
  name: string | undefined;
  values: unknown[];
}

/** A statement of a batch not run because one before it failed (the server skipped it). */
export class StatementSkipped extends Error {
  constructor(override readonly cause: unknown) {
    super(`not run: an earlier statement of its batch failed (${(cause as Error)?.message ?? String(cause)})`);
    this.name = 'StatementSkipped';
  }
}

/** What pg's protocol connection offers a query (pg/lib/connection.js). */
interface Connection {
  parsedStatements: Record<string, string>;
  stream: { cork?(): void; uncork?(): void };
  parse(q: { text: string; name?: string; types?: unknown[] }): void;
  bind(c: { portal: string; statement: string; values: unknown[]; binary?: boolean; valueMapper(v: unknown): unknown }): void;
  describe(c: { type: 'P'; name: string }): void;
  execute(c: { portal: string; rows?: number }): void;
  sync(): void;
}

/** pg's Result (pg/lib/result.js): one per statement. */
interface PgResult extends pg.QueryResult {
  addFields(fields: unknown[]): void;
  parseRow(fields: unknown[]): unknown;
  addRow(row: unknown): void;
  addCommandComplete(msg: unknown): void;
}
type ResultCtor = new (rowMode: undefined, types: unknown) => PgResult;

interface Item extends BatchStatement {
  resolve(r: pg.QueryResult): void;
  reject(e: unknown): void;
  result: PgResult | null;
  rowError: unknown;
}

/** Whether a statement can go into a batch on `client`'s connection (see above). */
export function batchable(client: pg.PoolClient, s: BatchStatement): boolean {
  if (s.name === undefined) return s.values.length > 0;
  return connectionOf(client)?.parsedStatements[s.name] === s.text;
}

function connectionOf(client: pg.PoolClient): Connection | undefined {
  return (client as unknown as { connection?: Connection }).connection;
}

/** A value as pg's own Query sends it (its prepareValue) for the store's values (SqlValue, Uint8Array made a Buffer: pg-types.ts). */
const toWire = (v: unknown): unknown => (v == null ? null : typeof v === 'string' || Buffer.isBuffer(v) ? v : String(v));

/** pg's Query as this module extends it (the driver's fields it reads; @types/pg leaves them out). */
const QueryBase = pg.Query as unknown as new (text: string) => object;

/** The statements of one batch; `client.query(batch)` sends them (once). */
export class StatementBatch extends QueryBase implements pg.Submittable {
  readonly #items: Item[] = [];
  /** The statement whose answers come now. */
  #at = 0;

  constructor() {
    super('');
  }

  get size(): number {
    return this.#items.length;
  }

  /** Adds a statement; its promise settles with its own result. */
  add(s: BatchStatement): Promise<pg.QueryResult> {
    return new Promise((resolve, reject) => {
      this.#items.push({ ...s, resolve, reject, result: null, rowError: undefined });
    });
  }

  /** Called by pg's client when the batch's turn on the connection comes (it is pipelined: at once). */
  submit(conn: pg.Connection): null {
    const connection = conn as unknown as Connection;
    const self = this as unknown as { _result: PgResult & { _types: unknown } };
    const Result = self._result.constructor as ResultCtor;
    const types = self._result._types;
    connection.stream.cork?.();
    let sent = 0;
    try {
      for (const it of this.#items) {
        it.result = new Result(undefined, types);
        try {
          if (it.name === undefined) connection.parse({ text: it.text, types: [] });
          connection.bind({ portal: '', statement: it.name ?? '', values: it.values, valueMapper: toWire });
        } catch (err) {
          // A value pg cannot send (never one of the store's: pg-types.ts). The statements before it
          // are on the wire and run; this one and those after it are not sent.
          this.#fail(sent, err, false);
          break;
        }
        connection.describe({ type: 'P', name: '' });
        connection.execute({ portal: '' });
        sent++;
      }
      connection.sync();
    } finally {
      connection.stream.uncork?.();
    }
    return null;
  }

  handleRowDescription(msg: { fields: unknown[] }): void {
    this.#items[this.#at]?.result?.addFields(msg.fields);
  }

  handleDataRow(msg: { fields: unknown[] }): void {
    const it = this.#items[this.#at];
    if (!it?.result || it.rowError !== undefined) return;
    try {
      it.result.addRow(it.result.parseRow(msg.fields));
    } catch (err) {
      it.rowError = err;
    }
  }

  handleCommandComplete(msg: unknown): void {
    const it = this.#items[this.#at++];
    if (!it?.result) return;
    if (it.rowError !== undefined) it.reject(it.rowError);
    else {
      it.result.addCommandComplete(msg);
      it.resolve(it.result);
    }
  }

  handleEmptyQuery(): void {
    const it = this.#items[this.#at++];
    if (it?.result) it.resolve(it.result);
  }

  /** The server's error (the statement under way failed, the rest skipped), or the connection's (none answered). */
  handleError(err: unknown): void {
    this.#fail(this.#at, err, err instanceof pg.DatabaseError);
  }

  handleReadyForQuery(): void {
    // Every statement answered before the Sync's ReadyForQuery; one that was not cannot be told apart.
    this.#fail(this.#at, new Error('store: a batch ended before all its statements were answered'), false);
  }

  handlePortalSuspended(): void {
    // Never: no statement of a batch asks for a row count.
  }

  /** Rejects the statements from `from` on: the first with `err`, the others as skipped (`server`) or with `err` too. */
  #fail(from: number, err: unknown, server: boolean): void {
    for (let i = from; i < this.#items.length; i++) {
      const it = this.#items[i]!;
      it.reject(i === from || !server ? err : new StatementSkipped(err));
    }
    this.#items.length = from;
    this.#at = from;
  }
}
