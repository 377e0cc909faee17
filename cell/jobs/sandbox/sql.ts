/**
 * SQL job statements against a workspace's own SQLite database (sql.js), run
 * inside the sandbox worker (worker.ts).
 *
 * Each workspace has one database file, `<data>/workspaces/<workspace_id>/sql.sqlite`.
 * A job's statements run as one transaction: all of them commit or none do.
 * After a commit that may have changed anything (any statement that is not a
 * plain SELECT) the database is written durably: export, write a temp file,
 * fsync, rename over the file, fsync the directory. A crash or a kill at any
 * point leaves the previous committed file. The host serialises jobs of one
 * workspace, so there is a single writer per file.
 *
 * Exactly once: a job that may have written records, in the same transaction
 * (so in the same file write), its result in the table `_cell_effects` under
 * `effectKey` (an HMAC of the run and step that only the cell can compute). A
 * job run again after a crash between that write and the run's journal record
 * finds its record and returns the recorded result without running anything.
 * Records older than EFFECT_RECORD_TTL_MS are removed by the workspace's next
 * writing job.
 *
 * SQLite has no privileges, so the job's SQL can reach that table; what keeps
 * the records the cell's (issue 36, finding 10) is that a job may not change
 * them at all: no row of the table may be written (SQLite's update hook), and
 * its schema entries (the table's text exactly as the cell wrote it, which a
 * rename rewrites, its root page, no trigger, index or view on it) and its
 * number of records must be after the job's statements what they were
 * before; otherwise the job is refused (`statement_refused`, `refused:
 * effect_records`) and nothing is kept, and the cell's own insert runs no
 * code of the job's. Each
 * record carries an HMAC of its key, time and result under a key derived from
 * the workspace's secret (`effectMacKey`), checked before a record is
 * replayed: a record that does not verify is not taken for the step's result
 * (`effect_record_invalid`, and the step is not run again either). A table of
 * an earlier version (three columns, no MAC) is rebuilt with MACs inside the
 * first job that has the key.
 *
 * Each entry of the job is exactly one statement, judged on what SQLite itself
 * parsed, never on the text: the entry is prepared (SQLite skips whitespace
 * and comments of every kind), and the statement's first keyword is read from
 * SQLite's normalized form of the prepared statement (comments removed,
 * keywords upper-cased). Transaction control (BEGIN, COMMIT, END, ROLLBACK,
 * SAVEPOINT, RELEASE), ATTACH, DETACH, VACUUM and PRAGMA are refused, and so is
 * an entry holding a second statement after the first.
 *
 * Caps: a row cap per statement and a byte cap on all the rows a job returns
 * (rows past either are not returned; the statement's result says `truncated:
 * true` and `truncated_by`); a size cap on the database file (SQLite's
 * max_page_count, from the workspace's storage quota: a job that would grow
 * the file past it fails with `workspace_quota` and commits nothing); the time
 * cap and cancel are enforced by the host, which terminates this worker
 * (sql.js has no progress handler).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import type { Database, Statement, StatementIterator } from 'sql.js';
import { loadSqlJs } from '../../store/sqljs.ts';
import { writeFileDurable } from '../../../runtime/write-durable.ts';

export type SqlParam = string | number | boolean | null;

export interface SqlTask {
  dbPath: string;
  statements: { sql: string; params?: SqlParam[] | Record<string, SqlParam> }[];
  rowLimit: number;
  /** Bytes of rows (as JSON) the job may return in all; past it rows are dropped and the result says so. */
  maxResultBytes?: number;
  /** Largest the database file may grow to, bytes; the file and the rows returned together may not pass it either. */
  maxDbBytes?: number;
  /** Names this job step's effect record (see above); absent: no record is kept or looked for. */
  effectKey?: string;
  /** The key (hex) of the records' HMACs; with `effectKey`. */
  effectMacKey?: string;
  /** Now, ms since the epoch (effect records' age). */
  now?: number;
}

export interface SqlStatementResult {
  columns: string[];
  rows: SqlParam[][];
  truncated: boolean;
  /** Present when truncated: which cap dropped rows. */
  truncated_by?: 'row_limit' | 'byte_limit';
  changes: number;
}

export type SqlOutcome =
  | {
      ok: true;
      results: SqlStatementResult[];
      duration_ms: number /** True: the recorded result of an earlier run of this step, nothing ran. */;
      replayed?: boolean;
    }
  | {
      ok: false;
      reason: 'sql_error' | 'statement_refused' | 'workspace_quota' | 'effect_record_invalid';
      message: string;
      statement: number;
      refused?: string;
      duration_ms: number;
    };

/**
 * Statement kinds (first keyword) a job may not run: each job is one
 * transaction on its own workspace database, with the connection settings
 * the cell chose.
 */
const REFUSED_KINDS: ReadonlySet<string> = new Set([
  'BEGIN',
  'COMMIT',
  'END',
  'ROLLBACK',
  'SAVEPOINT',
  'RELEASE',
  'ATTACH',
  'DETACH',
  'VACUUM',
  'PRAGMA',
]);
/** Kinds that never change the database (anything else may, and makes the job persist the file). */
const READ_KINDS: ReadonlySet<string> = new Set(['SELECT', 'VALUES', 'EXPLAIN']);

/** How long an effect record is kept: far longer than a run waits to be driven again after a crash. */
export const EFFECT_RECORD_TTL_MS = 30 * 24 * 3600 * 1000;
const EFFECTS_TABLE = '_cell_effects';

/** The effect records' table as the cell makes it (SQLite keeps this text; a rename would quote the name). */
const EFFECTS_SQL = `CREATE TABLE ${EFFECTS_TABLE} (key TEXT PRIMARY KEY, result TEXT NOT NULL, at INTEGER NOT NULL, mac TEXT NOT NULL)`;
/** The table of an earlier version, without MACs. */
const LEGACY_EFFECTS_SQL = `CREATE TABLE ${EFFECTS_TABLE} (key TEXT PRIMARY KEY, result TEXT NOT NULL, at INTEGER NOT NULL)`;

/** HMAC of a record (hex), under the workspace's MAC key. */
function recordMac(macKey: string, key: string, at: number, result: string): string {
  return createHmac('sha256', Buffer.from(macKey, 'hex')).update(`${key}\n${at}\n${result}`).digest('hex');
}

/** The text SQLite keeps for the table `_cell_effects`, or null when there is none. */
function effectsTableSql(db: Database): string | null {
  const v = db.exec(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = '${EFFECTS_TABLE}'`)[0]?.values[0]?.[0];
  return typeof v === 'string' ? v : null;
}

/**
 * What a job may not change of the effect records, in a few values: the schema entries of the table and
 * of everything on it (type, name, root page, SQL text: a rename rewrites the text, a trigger or index is
 * one more entry) and how many records it holds. With the update hook (no row of it written), a job that
 * leaves these equal has not changed a record. Null when the table is not the cell's.
 */
function effectsState(db: Database): string | null {
  const entries =
    db.exec(
      `SELECT type, name, rootpage, sql FROM sqlite_master WHERE name = '${EFFECTS_TABLE}' OR tbl_name = '${EFFECTS_TABLE}' ORDER BY type, name`,
    )[0]?.values ?? [];
  if (entries.length === 0) return '[]';
  const table = effectsTableSql(db);
  const others = entries.filter((e) => !(e[0] === 'table' || (e[0] === 'index' && e[1] === `sqlite_autoindex_${EFFECTS_TABLE}_1`)));
  if (table !== EFFECTS_SQL || others.length > 0) return null;
  const n = db.exec(`SELECT count(*) FROM ${EFFECTS_TABLE}`)[0]?.values[0]?.[0];
  return JSON.stringify([entries, n]);
}

/**
 * The records' state before the job runs, the table made the cell's first (made when there is none): one
 * of an earlier version (no MAC) is rebuilt with each record's MAC; anything else on or in place of it (a trigger, an index, a view,
 * other columns: an earlier version let a job make them) is dropped, records and all, since none of it
 * can be trusted. Inside the job's transaction: kept only with the job's commit.
 */
function cellEffectsState(db: Database, macKey: string): string {
  const state = effectsState(db);
  if (state !== null && effectsTableSql(db) !== null) return state;
  const legacy =
    effectsTableSql(db) === LEGACY_EFFECTS_SQL ? (db.exec(`SELECT key, result, at FROM ${EFFECTS_TABLE}`)[0]?.values ?? []) : [];
  for (const [type, name] of db.exec(
    `SELECT type, name FROM sqlite_master WHERE (name = '${EFFECTS_TABLE}' OR tbl_name = '${EFFECTS_TABLE}') AND type IN ('view', 'trigger', 'index') AND name NOT LIKE 'sqlite_autoindex_%'`,
  )[0]?.values ?? []) {
    db.exec(`DROP ${String(type).toUpperCase()} IF EXISTS "${String(name).replaceAll('"', '""')}"`);
  }
  db.exec(`DROP TABLE IF EXISTS ${EFFECTS_TABLE}`);
  db.exec(EFFECTS_SQL);
  for (const [key, result, at] of legacy) {
    if (typeof key !== 'string' || typeof result !== 'string' || typeof at !== 'number') continue;
    db.run(`INSERT INTO ${EFFECTS_TABLE} (key, result, at, mac) VALUES (?, ?, ?, ?)`, [
      key,
      result,
      at,
      recordMac(macKey, key, at, result),
    ]);
  }
  return effectsState(db) ?? '[]';
}

/** The recorded results of an earlier run of this step: null when none, 'invalid' when its MAC does not verify. */
function recordedEffect(db: Database, key: string, macKey: string): SqlStatementResult[] | 'invalid' | null {
  const table = effectsTableSql(db);
  if (table === LEGACY_EFFECTS_SQL) {
    // A table of an earlier version, not rebuilt yet (no job with the key has written since): its records
    // have no MAC, and are taken as they are, once, as that version did.
    const legacy = db.exec(`SELECT result FROM ${EFFECTS_TABLE} WHERE key = ?`, [key])[0]?.values[0]?.[0];
    if (typeof legacy !== 'string') return null;
    try {
      return JSON.parse(legacy) as SqlStatementResult[];
    } catch {
      return 'invalid';
    }
  }
  // None, or a table that is not the cell's (an earlier version let a job change it): no record the cell
  // trusts; the job's own commit replaces it (cellEffectsState).
  if (table !== EFFECTS_SQL) return null;
  const r = db.exec(`SELECT result, at, mac FROM ${EFFECTS_TABLE} WHERE key = ?`, [key]);
  const row = r[0]?.values[0];
  if (!row) return null;
  const [result, at, mac] = row;
  if (typeof result !== 'string' || typeof at !== 'number' || typeof mac !== 'string') return 'invalid';
  const want = Buffer.from(recordMac(macKey, key, at, result), 'hex');
  const got = Buffer.from(mac, 'hex');
  if (got.length !== want.length || !timingSafeEqual(got, want)) return 'invalid';
  try {
    return JSON.parse(result) as SqlStatementResult[];
  } catch {
    return 'invalid';
  }
}

/** Records this step's results inside the job's transaction; drops records past their age. */
function recordEffect(db: Database, key: string, macKey: string, results: SqlStatementResult[], now: number): void {
  db.run(`DELETE FROM ${EFFECTS_TABLE} WHERE at < ?`, [now - EFFECT_RECORD_TTL_MS]);
  const result = JSON.stringify(results);
  db.run(`INSERT OR REPLACE INTO ${EFFECTS_TABLE} (key, result, at, mac) VALUES (?, ?, ?, ?)`, [
    key,
    result,
    now,
    recordMac(macKey, key, now, result),
  ]);
}

/** A statement refused before it ran; `refused` names the kind or the rule. */
class Refused extends Error {
  constructor(
    readonly refused: string,
    message: string,
  ) {
    super(message);
  }
}

/** The first keyword of a prepared statement, from SQLite's own normalized text; null when SQLite gives none. */
export function statementKind(stmt: Statement): string | null {
  const normalized = stmt.getNormalizedSQL();
  const m = typeof normalized === 'string' ? /^[A-Z]+/.exec(normalized) : null;
  return m ? m[0] : null;
}

/** Frees an iterator's statement and SQL text when it is not run to its end (sql.js implements `return`; its typings omit it). */
function closeIterator(it: StatementIterator): void {
  (it as Iterator<Statement>).return?.();
}

/** True when `rest` (the text after a prepared statement) holds anything but whitespace and comments. */
function holdsAnotherStatement(db: Database, rest: string): boolean {
  if (rest.trim() === '') return false;
  const it = db.iterateStatements(rest);
  try {
    return !it.next().done;
  } catch {
    // SQLite could not prepare it: something other than whitespace and comments is there.
    return true;
  } finally {
    closeIterator(it);
  }
}

/**
 * Prepares the one statement of a job entry and judges it; the caller runs it
 * and calls `release()` once done (whatever happens).
 */
function prepareOne(db: Database, sql: string): { stmt: Statement; kind: string; release(): void } {
  const it = db.iterateStatements(sql);
  const release = () => closeIterator(it);
  try {
    const first = it.next();
    if (first.done) throw new Refused('empty_statement', 'the statement is empty: only whitespace or comments');
    const kind = statementKind(first.value);
    if (kind === null) throw new Refused('unreadable_statement', 'the statement could not be classified');
    if (REFUSED_KINDS.has(kind)) {
      throw new Refused(
        kind,
        `${kind} is not allowed: transaction control, ATTACH, DETACH, VACUUM and PRAGMA are refused (each job is one transaction on its own database)`,
      );
    }
    if (holdsAnotherStatement(db, it.getRemainingSQL()))
      throw new Refused('multiple_statements', 'one statement per entry: use statements[] for several');
    return { stmt: first.value, kind, release };
  } catch (err) {
    release();
    throw err;
  }
}

function toBind(
  p: SqlTask['statements'][number]['params'],
): (string | number | null)[] | Record<string, string | number | null> | undefined {
  if (p === undefined) return undefined;
  const conv = (v: SqlParam) => (typeof v === 'boolean' ? (v ? 1 : 0) : v);
  if (Array.isArray(p)) return p.map(conv);
  const out: Record<string, string | number | null> = {};
  for (const [k, v] of Object.entries(p)) out[/^[:@$]/.test(k) ? k : `:${k}`] = conv(v);
  return out;
}

/** Runs a job's statements as one transaction and persists the database if it may have changed. */
export async function runSql(task: SqlTask): Promise<SqlOutcome> {
  const started = Date.now();
  const SQL = await loadSqlJs();
  const db = new SQL.Database(existsSync(task.dbPath) ? readFileSync(task.dbPath) : undefined);
  const results: SqlStatementResult[] = [];
  let writes = false;
  let index = 0;
  let resultBytes = 0;
  const maxResultBytes = task.maxResultBytes ?? Infinity;
  const effects =
    task.effectKey !== undefined && task.effectMacKey !== undefined ? { key: task.effectKey, macKey: task.effectMacKey } : null;
  const last = Math.max(0, task.statements.length - 1);
  let effectsTouched = false;
  try {
    if (task.maxDbBytes !== undefined) {
      // Connection settings, so a job cannot change them (PRAGMA is refused); SQLite keeps a file
      // already past it as it is and refuses only growth. Temporary tables get the same room: they
      // live in this worker's memory for the job's length.
      const pageSize = Number(db.exec('PRAGMA page_size')[0]?.values[0]?.[0] ?? 4096);
      const pages = Math.max(1, Math.floor(task.maxDbBytes / pageSize));
      db.exec(`PRAGMA max_page_count = ${pages}`);
      db.exec(`PRAGMA temp.max_page_count = ${pages}`);
    }
    if (effects) {
      const recorded = recordedEffect(db, effects.key, effects.macKey);
      if (recorded === 'invalid') {
        return {
          ok: false,
          reason: 'effect_record_invalid',
          message: "the record of this step's earlier commit does not verify: the step is not run again (it may have applied)",
          statement: 0,
          duration_ms: Date.now() - started,
        };
      }
      if (recorded) return { ok: true, results: recorded, duration_ms: Date.now() - started, replayed: true };
    }
    db.exec('BEGIN');
    const before = effects ? cellEffectsState(db, effects.macKey) : null;
    if (effects) {
      db.updateHook((_op, _db, table) => {
        if (table === EFFECTS_TABLE) effectsTouched = true;
      });
    }
    for (; index < task.statements.length; index++) {
      const s = task.statements[index]!;
      const { stmt, kind, release } = prepareOne(db, s.sql);
      if (!READ_KINDS.has(kind)) writes = true;
      try {
        const bind = toBind(s.params);
        if (bind !== undefined) stmt.bind(bind);
        const columns = stmt.getColumnNames();
        const rows: SqlParam[][] = [];
        let truncatedBy: SqlStatementResult['truncated_by'];
        while (stmt.step()) {
          if (rows.length >= task.rowLimit) {
            truncatedBy = 'row_limit';
            break;
          }
          const row = stmt.get().map((v) => (v instanceof Uint8Array ? Buffer.from(v).toString('base64') : v)) as SqlParam[];
          const size = Buffer.byteLength(JSON.stringify(row), 'utf8') + 1;
          if (resultBytes + size > maxResultBytes) {
            truncatedBy = 'byte_limit';
            break;
          }
          resultBytes += size;
          rows.push(row);
        }
        results.push({
          columns,
          rows,
          truncated: truncatedBy !== undefined,
          ...(truncatedBy ? { truncated_by: truncatedBy } : {}),
          changes: columns.length === 0 ? db.getRowsModified() : 0,
        });
      } finally {
        release();
      }
    }
    db.updateHook(null);
    if (writes && effects) {
      if (effectsTouched || effectsState(db) !== before) {
        index = last;
        throw new Refused(
          'effect_records',
          "the job changed the cell's effect records (_cell_effects): the records that make earlier jobs apply once are the cell's",
        );
      }
      recordEffect(db, effects.key, effects.macKey, results, task.now ?? Date.now());
    }
    if (writes && task.maxDbBytes !== undefined) {
      // What the workspace keeps after this job: the file as it will be written, and the rows the run will store.
      const pages = Number(db.exec('PRAGMA page_count')[0]?.values[0]?.[0] ?? 0);
      const pageSize = Number(db.exec('PRAGMA page_size')[0]?.values[0]?.[0] ?? 4096);
      if (pages * pageSize + resultBytes > task.maxDbBytes) throw new Error('database or disk is full');
    }
    db.exec('COMMIT');
    if (writes) writeFileDurable(task.dbPath, db.export(), { mode: 0o600 });
    return { ok: true, results, duration_ms: Date.now() - started };
  } catch (err) {
    try {
      db.exec('ROLLBACK');
    } catch {
      /* no transaction open */
    }
    if (err instanceof Refused) {
      return {
        ok: false,
        reason: 'statement_refused',
        message: err.message,
        statement: index,
        refused: err.refused,
        duration_ms: Date.now() - started,
      };
    }
    const message = err instanceof Error ? err.message : String(err);
    if (task.maxDbBytes !== undefined && /database or disk is full/i.test(message)) {
      return {
        ok: false,
        reason: 'workspace_quota',
        message: `the workspace database would grow past the ${task.maxDbBytes} bytes its storage quota leaves it`,
        statement: index,
        duration_ms: Date.now() - started,
      };
    }
    return { ok: false, reason: 'sql_error', message: message.slice(0, 1000), statement: index, duration_ms: Date.now() - started };
  } finally {
    db.close();
  }
}
