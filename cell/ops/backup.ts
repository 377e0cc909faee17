/**
 * Backup and restore of a cell's data directory on the embedded store
 * (`node dist/cell.mjs backup --data DIR --out FILE`, `restore --from FILE
 * --data NEWDIR`); formats and rules in docs/operations.md, "Backup and restore".
 *
 * A backup file is one line `agent-cell backup 1`, one line of JSON (the
 * manifest: when, which cell, the store's LSN, and each file's path, size and
 * SHA-256), then the files' bytes one after another. It holds the store as of
 * one LSN (cell/store/copy-online.ts: taken while the cell serves), the
 * cell's id and member key, and each SQL workspace database (each file whole,
 * as its last job step left it). It never holds the secrets key (which seals
 * the signing keys and provider secrets in the store) nor the bootstrap admin
 * key: those are kept apart, and restore is given the secrets key with
 * `--secrets-key-file`, checked against the sealed keys before anything is
 * written.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { str } from '../store/decode.ts';
import { copyStoreOnline } from '../store/copy-online.ts';
import { SNAPSHOT_FILE } from '../store/embedded.ts';
import { loadSqlJs } from '../store/sqljs.ts';
import { writeFileDurable } from '../../runtime/write-durable.ts';
import { SetupError } from '../../runtime/setup-error.ts';
import { openJwk, readSecretsKeyFile, type KeyTable } from '../custody/api.ts';

const MAGIC = 'agent-cell backup 1\n';
/** Files of a data directory that a backup never holds: the operator keeps them apart. */
export const KEPT_APART = ['secrets.key', 'bootstrap-admin.key'] as const;

export interface BackupManifest {
  format: 1;
  created_at: string;
  cell_id: string | null;
  /** The store's last log record in the backup. */
  lsn: number;
  files: { path: string; bytes: number; sha256: string }[];
  /** What the backup does not hold, by design. */
  not_included: string[];
}

const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

/** Writes a backup of `dataDir` (embedded store; the cell may be serving) to `out`. */
export async function writeBackup(dataDir: string, out: string, now: Date): Promise<BackupManifest> {
  const storeDir = join(dataDir, 'store');
  if (!existsSync(join(storeDir, SNAPSHOT_FILE)) && !existsSync(join(storeDir, 'wal.log')))
    throw new SetupError(
      `${dataDir} holds no embedded store (no ${storeDir}); a cell on PostgreSQL is backed up with pg_dump (docs/operations.md, "Backup and restore")`,
    );
  const copy = await copyStoreOnline(storeDir);
  const files: { path: string; data: Uint8Array }[] = [];
  try {
    copy.db.run('CREATE TABLE IF NOT EXISTS _store_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)');
    copy.db.run("INSERT OR REPLACE INTO _store_meta (key, value) VALUES ('lsn', ?)", [copy.lsn]);
    files.push({ path: `store/${SNAPSHOT_FILE}`, data: copy.db.export() });
  } finally {
    copy.db.close();
  }
  let cellId: string | null = null;
  for (const name of readdirSync(dataDir).sort()) {
    if (name === 'cell-id' || /^member-[0-9a-f]{16}\.key$/.test(name)) {
      const data = readFileSync(join(dataDir, name));
      if (name === 'cell-id') cellId = data.toString('utf8').trim();
      files.push({ path: name, data });
    }
  }
  const wsRoot = join(dataDir, 'workspaces');
  if (existsSync(wsRoot)) {
    for (const ws of readdirSync(wsRoot).sort()) {
      const db = join(wsRoot, ws, 'sql.sqlite');
      // Each is replaced whole by rename at a job step's commit: one read is one version of it.
      if (existsSync(db)) files.push({ path: `workspaces/${ws}/sql.sqlite`, data: readFileSync(db) });
    }
  }
  const manifest: BackupManifest = {
    format: 1,
    created_at: now.toISOString(),
    cell_id: cellId,
    lsn: copy.lsn,
    files: files.map((f) => ({ path: f.path, bytes: f.data.byteLength, sha256: sha256(f.data) })),
    not_included: [...KEPT_APART],
  };
  const head = Buffer.from(`${MAGIC}${JSON.stringify(manifest)}\n`, 'utf8');
  writeFileDurable(out, Buffer.concat([head, ...files.map((f) => f.data)]), { mode: 0o600 });
  return manifest;
}

/** Reads and checks a backup file: every file present, whole and matching its checksum. */
export function readBackup(from: string): { manifest: BackupManifest; files: Map<string, Buffer> } {
  const buf = readFileSync(from);
  const bad = (why: string) => new SetupError(`${from} is not a usable backup (${why})`);
  if (!buf.subarray(0, MAGIC.length).equals(Buffer.from(MAGIC))) throw bad('it does not start with "agent-cell backup 1"');
  const nl = buf.indexOf(0x0a, MAGIC.length);
  if (nl < 0) throw bad('no manifest');
  let manifest: BackupManifest;
  try {
    manifest = JSON.parse(buf.subarray(MAGIC.length, nl).toString('utf8')) as BackupManifest;
  } catch {
    throw bad('unreadable manifest');
  }
  if (manifest.format !== 1 || !Array.isArray(manifest.files)) throw bad('unknown manifest format');
  const files = new Map<string, Buffer>();
  let off = nl + 1;
  for (const f of manifest.files) {
    if (typeof f.path !== 'string' || f.path.split('/').some((p) => p === '..' || p === '') || f.path.startsWith('/'))
      throw bad(`bad path ${JSON.stringify(f.path)}`);
    const data = buf.subarray(off, off + f.bytes);
    if (data.length !== f.bytes) throw bad(`${f.path} is cut short`);
    if (sha256(data) !== f.sha256) throw bad(`${f.path} does not match its checksum`);
    files.set(f.path, data);
    off += f.bytes;
  }
  if (off !== buf.length) throw bad('bytes after the last file');
  if (!files.has(`store/${SNAPSHOT_FILE}`)) throw bad('no store');
  return { manifest, files };
}

/**
 * Restores a backup into `dataDir`, which must not exist or be empty. The
 * secrets key (kept apart from the backup) is first checked against the
 * sealed signing keys in the backup, then copied to `dataDir/secrets.key`
 * (mode 0600): a restored cell without it could sign nothing.
 */
export async function restoreBackup(from: string, dataDir: string, secretsKeyFile: string): Promise<BackupManifest> {
  const { manifest, files } = readBackup(from);
  if (existsSync(dataDir) && (!statSync(dataDir).isDirectory() || readdirSync(dataDir).length > 0))
    throw new SetupError(`${dataDir} exists and is not an empty directory; restore into a new one`);
  const snapshot = files.get(`store/${SNAPSHOT_FILE}`)!;
  const SQL = await loadSqlJs();
  const db = new SQL.Database(snapshot);
  try {
    const ok = db.exec('PRAGMA integrity_check')[0]?.values[0]?.[0];
    if (ok !== 'ok') throw new SetupError(`${from}: the store in the backup fails SQLite's integrity check (${String(ok)})`);
    checkSealedKeys(db, readSecretsKeyFile(secretsKeyFile), secretsKeyFile);
  } finally {
    db.close();
  }
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  try {
    for (const [path, data] of files) writeFileDurable(join(dataDir, path), data, { mode: 0o600 });
    writeFileDurable(join(dataDir, 'secrets.key'), readFileSync(secretsKeyFile), { mode: 0o600 });
  } catch (err) {
    // Never leave half a data directory that a cell could start on.
    rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  return manifest;
}

/** Refuses a secrets key that does not open the sealed private keys of the backup. */
function checkSealedKeys(db: import('sql.js').Database, key: Buffer, file: string): void {
  for (const table of ['cell_keys', 'oauth_signing_keys'] as KeyTable[]) {
    const exists = db.exec(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '${table}'`);
    if (exists.length === 0) continue;
    const rows = db.exec(`SELECT kid, private_jwk FROM ${table}`)[0];
    for (const [kid, text] of rows?.values ?? []) {
      const row = { kid, private_jwk: text } as Record<string, import('../store/types.ts').SqlValue>;
      try {
        openJwk(key, table, str(row, 'kid'), JSON.parse(str(row, 'private_jwk')));
      } catch {
        throw new SetupError(
          `--secrets-key-file ${file} does not open the sealed signing keys in the backup: give the secrets key of the cell the backup was taken from`,
        );
      }
    }
  }
}
