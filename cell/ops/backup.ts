/**
 * Backup and restore of a cell's data directory on the embedded store
 * (`node dist/cell.mjs backup --data DIR --out FILE`, `restore --from FILE
 * --data NEWDIR --secrets-key-file FILE`); formats and rules in
 * docs/operations.md, "Backup and restore".
 *
 * A backup file (format 2) is one line `agent-cell backup 2`, one line of
 * JSON (the manifest: when, which cell, the store's LSN, each file's path,
 * size and SHA-256, each directory's mode), one line with the manifest's
 * HMAC-SHA256 (hex) under a key derived from the cell's secrets key
 * (cell/custody: HKDF, `backup-mac-v2`), then the files' bytes one after
 * another. The MAC covers the first two lines, and through the checksums
 * every file: a backup changed by anyone who does not hold the secrets key
 * (a planted key row, emptied tables) is refused before anything is written,
 * as is a secrets key other than the backed-up cell's.
 *
 * It holds the store as of one LSN (cell/store/copy-online.ts: taken while
 * the cell serves), the cell's id and member key, and each SQL workspace
 * database (each file whole, as its last job step left it). It never holds
 * the secrets key (which seals the signing keys and provider secrets in the
 * store, and keys the backup) nor the bootstrap admin key: those are kept
 * apart. Format 1 (unkeyed checksums, before issue 36) cannot be verified and
 * is refused.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { copyStoreOnline } from '../store/copy-online.ts';
import { SNAPSHOT_FILE } from '../store/embedded.ts';
import { loadSqlJs } from '../store/sqljs.ts';
import { writeFileDurable } from '../../runtime/write-durable.ts';
import { SetupError } from '../../runtime/setup-error.ts';
import { deriveKey, isSealedJwk, openJwk, opensCheck, readKey } from '../custody/api.ts';

const MAGIC = 'agent-cell backup 2\n';
const MAGIC_V1 = 'agent-cell backup 1\n';
/** Files of a data directory that a backup never holds: the operator keeps them apart. */
export const KEPT_APART = ['secrets.key', 'bootstrap-admin.key'] as const;

export interface BackupManifest {
  format: 2;
  created_at: string;
  cell_id: string | null;
  /** The store's last log record in the backup. */
  lsn: number;
  files: { path: string; bytes: number; sha256: string }[];
  /** The data directory's folders and their modes (`''`: the data directory itself); restore makes them so. */
  dirs: { path: string; mode: number }[];
  /** What the backup does not hold, by design. */
  not_included: string[];
  /** How the line after the manifest keys it, and which key (not secret: it tells a wrong key from a changed file). */
  mac: { alg: 'HMAC-SHA256'; key: 'HKDF-SHA256(secrets key, backup-mac-v2)'; key_id: string };
}

const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const macOf = (key: Buffer, head: Buffer) => createHmac('sha256', key).update(head).digest();
const keyIdOf = (key: Buffer) => createHmac('sha256', key).update('agent-cell backup key id').digest('hex').slice(0, 16);

/**
 * Writes a backup of `dataDir` (embedded store; the cell may be serving) to
 * `out`, keyed with the cell's secrets key (`secretsKeyFile`, else
 * `dataDir/secrets.key`; refused when it does not open the store's key check).
 */
export async function writeBackup(dataDir: string, out: string, now: Date, secretsKeyFile: string | null): Promise<BackupManifest> {
  const storeDir = join(dataDir, 'store');
  if (!existsSync(join(storeDir, SNAPSHOT_FILE)) && !existsSync(join(storeDir, 'wal.log')))
    throw new SetupError(
      `${dataDir} holds no embedded store (no ${storeDir}); a cell on PostgreSQL is backed up with pg_dump (docs/operations.md, "Backup and restore")`,
    );
  const secretsKey = readKey({ dataDir, secretsKeyFile });
  if (!secretsKey)
    throw new SetupError(
      `a backup is keyed with the cell's secrets key, and ${join(dataDir, 'secrets.key')} does not exist: name the cell's key with --secrets-key-file`,
    );
  const copy = await copyStoreOnline(storeDir);
  const files: { path: string; data: Uint8Array }[] = [];
  try {
    if (!keyOpensStore(copy.db, secretsKey))
      throw new SetupError(
        `the secrets key given does not open ${dataDir}'s store: a backup is keyed with the cell's own key (--secrets-key-file, default ${join(dataDir, 'secrets.key')})`,
      );
    copy.db.run('CREATE TABLE IF NOT EXISTS _store_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)');
    copy.db.run("INSERT OR REPLACE INTO _store_meta (key, value) VALUES ('lsn', ?)", [copy.lsn]);
    files.push({ path: `store/${SNAPSHOT_FILE}`, data: copy.db.export() });
  } finally {
    copy.db.close();
  }
  const dirs = [dirOf(dataDir, ''), dirOf(dataDir, 'store')];
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
    dirs.push(dirOf(dataDir, 'workspaces'));
    for (const ws of readdirSync(wsRoot).sort()) {
      const db = join(wsRoot, ws, 'sql.sqlite');
      // Each is replaced whole by rename at a job step's commit: one read is one version of it.
      if (!existsSync(db)) continue;
      dirs.push(dirOf(dataDir, `workspaces/${ws}`));
      files.push({ path: `workspaces/${ws}/sql.sqlite`, data: readFileSync(db) });
    }
  }
  const macKey = deriveKey(secretsKey, 'backup-mac-v2');
  const manifest: BackupManifest = {
    format: 2,
    created_at: now.toISOString(),
    cell_id: cellId,
    lsn: copy.lsn,
    files: files.map((f) => ({ path: f.path, bytes: f.data.byteLength, sha256: sha256(f.data) })),
    dirs,
    not_included: [...KEPT_APART],
    mac: { alg: 'HMAC-SHA256', key: 'HKDF-SHA256(secrets key, backup-mac-v2)', key_id: keyIdOf(macKey) },
  };
  const head = Buffer.from(`${MAGIC}${JSON.stringify(manifest)}\n`, 'utf8');
  const tag = Buffer.from(`${macOf(macKey, head).toString('hex')}\n`, 'utf8');
  writeFileDurable(out, Buffer.concat([head, tag, ...files.map((f) => f.data)]), { mode: 0o600 });
  return manifest;
}

function dirOf(dataDir: string, path: string): { path: string; mode: number } {
  return { path, mode: statSync(join(dataDir, path)).mode & 0o7777 };
}

/**
 * Reads and checks a backup file with the backed-up cell's secrets key: the
 * manifest's MAC first (a wrong key, or a file changed by whoever does not hold
 * it, is refused here), then every file present, whole and matching its checksum.
 */
export function readBackup(from: string, secretsKey: Buffer): { manifest: BackupManifest; files: Map<string, Buffer> } {
  const buf = readFileSync(from);
  const bad = (why: string) => new SetupError(`${from} is not a usable backup (${why})`);
  if (buf.subarray(0, MAGIC_V1.length).equals(Buffer.from(MAGIC_V1)))
    throw bad('format 1, taken before backups were keyed: it cannot be verified; take a new backup with this version');
  if (!buf.subarray(0, MAGIC.length).equals(Buffer.from(MAGIC))) throw bad('it does not start with "agent-cell backup 2"');
  const nl = buf.indexOf(0x0a, MAGIC.length);
  if (nl < 0) throw bad('no manifest');
  const tagEnd = buf.indexOf(0x0a, nl + 1);
  if (tagEnd < 0) throw bad('no MAC');
  let manifest: BackupManifest;
  try {
    manifest = JSON.parse(buf.subarray(MAGIC.length, nl).toString('utf8')) as BackupManifest;
  } catch {
    throw bad('unreadable manifest');
  }
  const macKey = deriveKey(secretsKey, 'backup-mac-v2');
  if (manifest?.mac?.key_id !== keyIdOf(macKey))
    throw new SetupError(
      `${from} was keyed with another secrets key than the one given: give the secrets key of the cell the backup was taken from (--secrets-key-file)`,
    );
  const tag = Buffer.from(buf.subarray(nl + 1, tagEnd).toString('ascii'), 'hex');
  const want = macOf(macKey, buf.subarray(0, nl + 1));
  if (tag.length !== want.length || !timingSafeEqual(tag, want)) throw bad('its MAC does not verify: it was changed after it was taken');
  if (manifest.format !== 2 || !Array.isArray(manifest.files) || !Array.isArray(manifest.dirs)) throw bad('unknown manifest format');
  const files = new Map<string, Buffer>();
  let off = tagEnd + 1;
  for (const f of manifest.files) {
    if (!safePath(f.path) || f.path === '') throw bad(`bad path ${JSON.stringify(f.path)}`);
    const data = buf.subarray(off, off + f.bytes);
    if (data.length !== f.bytes) throw bad(`${f.path} is cut short`);
    if (sha256(data) !== f.sha256) throw bad(`${f.path} does not match its checksum`);
    files.set(f.path, data);
    off += f.bytes;
  }
  if (off !== buf.length) throw bad('bytes after the last file');
  if (!files.has(`store/${SNAPSHOT_FILE}`)) throw bad('no store');
  for (const d of manifest.dirs)
    if (!safePath(d.path) || !Number.isInteger(d.mode) || d.mode < 0 || d.mode > 0o7777) throw bad(`bad folder ${JSON.stringify(d)}`);
  return { manifest, files };
}

/** A relative path inside the data directory (`''` is the directory itself). */
function safePath(p: unknown): p is string {
  return typeof p === 'string' && !p.startsWith('/') && (p === '' || !p.split('/').some((x) => x === '..' || x === '' || x === '.'));
}

/**
 * Restores a backup into `dataDir`, which must not exist or be empty. The
 * secrets key (kept apart from the backup) verifies the backup's MAC, then
 * must open the key check of the store in it; the directories are made with
 * the modes they had, the files written, and the key copied to
 * `dataDir/secrets.key` (mode 0600): a restored cell without it could sign nothing.
 */
export async function restoreBackup(from: string, dataDir: string, secretsKey: Buffer): Promise<BackupManifest> {
  const { manifest, files } = readBackup(from, secretsKey);
  const existed = existsSync(dataDir);
  if (existed && (!statSync(dataDir).isDirectory() || readdirSync(dataDir).length > 0))
    throw new SetupError(`${dataDir} exists and is not an empty directory; restore into a new one`);
  const snapshot = files.get(`store/${SNAPSHOT_FILE}`)!;
  const SQL = await loadSqlJs();
  const db = new SQL.Database(snapshot);
  try {
    const ok = db.exec('PRAGMA integrity_check')[0]?.values[0]?.[0];
    if (ok !== 'ok') throw new SetupError(`${from}: the store in the backup fails SQLite's integrity check (${String(ok)})`);
    if (!keyOpensStore(db, secretsKey))
      throw new SetupError(
        `the secrets key given does not open the store in ${from}: give the secrets key of the cell the backup was taken from`,
      );
  } finally {
    db.close();
  }
  try {
    // Folders first, shallowest first, with their modes (mkdir's mode is cut by the umask: chmod sets it).
    const dirs = [...manifest.dirs].sort((a, b) => a.path.split('/').length - b.path.split('/').length || a.path.length - b.path.length);
    if (!dirs.some((d) => d.path === '')) dirs.unshift({ path: '', mode: 0o700 });
    for (const d of dirs) {
      const p = join(dataDir, d.path);
      mkdirSync(p, { recursive: true, mode: d.mode });
      chmodSync(p, d.mode);
    }
    for (const [path, data] of files) writeFileDurable(join(dataDir, path), data, { mode: 0o600 });
    writeFileDurable(join(dataDir, 'secrets.key'), secretsKey, { mode: 0o600 });
  } catch (err) {
    // Never leave half a data directory that a cell could start on.
    if (existed) for (const name of readdirSync(dataDir)) rmSync(join(dataDir, name), { recursive: true, force: true });
    else rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  return manifest;
}

/**
 * Whether `key` is the store's secrets key: it opens the group's key check
 * (cell/custody); a store from before the check, its sealed OAuth signing keys.
 */
function keyOpensStore(db: import('sql.js').Database, key: Buffer): boolean {
  const has = (table: string) => db.exec(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '${table}'`).length > 0;
  if (has('custody_key_check')) {
    const check = db.exec('SELECT sealed FROM custody_key_check WHERE id = 1')[0]?.values[0]?.[0];
    if (check instanceof Uint8Array) return opensCheck(key, check);
  }
  if (!has('oauth_signing_keys')) return true;
  for (const [kid, text] of db.exec('SELECT kid, private_jwk FROM oauth_signing_keys')[0]?.values ?? []) {
    const stored = JSON.parse(String(text)) as unknown;
    if (!isSealedJwk(stored)) continue;
    try {
      openJwk(key, 'oauth_signing_keys', String(kid), stored);
    } catch {
      return false;
    }
  }
  return true;
}
