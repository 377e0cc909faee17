/**
 * Starts the real cell, `node dist/cell.mjs serve --port 0`, on a temp data
 * directory and returns its URL and bootstrap admin key. `make test` builds
 * dist/ before the tests run; run `node scripts/build.mjs` when running a
 * single test by hand.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { testStore } from './inproc.ts';
import { bootstrapKeyOf, cellSignals } from './cell-signals.ts';

export const CELL_BIN = resolve(import.meta.dirname, '../../dist/cell.mjs');
/**
 * The fault build of the cell (scripts/build.mjs, never shipped): it SIGKILLs itself right after a SQL step's
 * effect committed, before the step's journal record (test/e2e/jobs-exactly-once.test.ts).
 */
export const CELL_CRASH_AFTER_SQL_EFFECT_BIN = resolve(import.meta.dirname, '../../dist/test/cell-crash-after-sql-effect.mjs');

export interface CellProcess {
  url: string;
  adminKey: string;
  dataDir: string;
  proc: ChildProcess;
  /** Everything the process printed so far (stdout and stderr, as they came). */
  output(): string;
  /** What the process printed on stdout alone. */
  stdout(): string;
  /** SIGTERM and wait for exit. */
  stop(): Promise<void>;
  /** Signal (default SIGKILL) and wait for exit. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Removes the data directory (after stop/kill). */
  cleanup(): void;
}

let sharedKeyFile: string | null = null;

/**
 * The secrets key file every cell process on PostgreSQL started by this test
 * process is given, as the members of a group must share one (docs/multi-cell.md).
 */
export function groupSecretsKeyFile(): string {
  if (sharedKeyFile) return sharedKeyFile;
  const dir = mkdtempSync(join(tmpdir(), 'cell-group-key-'));
  const file = join(dir, 'secrets.key');
  writeFileSync(file, randomBytes(32), { mode: 0o600 });
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  sharedKeyFile = file;
  return file;
}

/** With CELL_TEST_STORE=postgres: each data directory's own database (a restart on the same directory reuses it). */
const databases = new Map<string, { url: string | null; drop(): Promise<void> }>();

export async function startCellProcess(
  opts: {
    dataDir?: string;
    args?: string[];
    env?: Record<string, string>;
    timeoutMs?: number;
    /** The program to start (default dist/cell.mjs; a fault build for the crash tests). */
    bin?: string;
  } = {},
): Promise<CellProcess> {
  const bin = opts.bin ?? CELL_BIN;
  if (!existsSync(bin)) throw new Error(`${bin} is missing: run 'node scripts/build.mjs' (make test does)`);
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'cell-proc-'));
  let db = databases.get(dataDir);
  if (!db && !(opts.args ?? []).includes('--store')) {
    db = await testStore();
    databases.set(dataDir, db);
  }
  const storeArgs = db?.url ? ['--store', db.url] : [];
  // Cells on PostgreSQL may form a group, whose members share one secrets key (it seals the OAuth signing keys they share).
  const onStore = storeArgs.length > 0 || (opts.args ?? []).includes('--store');
  if (onStore && !(opts.args ?? []).includes('--secrets-key-file')) storeArgs.push('--secrets-key-file', groupSecretsKeyFile());
  const proc = spawn(process.execPath, [bin, 'serve', '--port', '0', '--data', dataDir, ...storeArgs, ...(opts.args ?? [])], {
    env: { ...process.env, ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let stdout = '';
  proc.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
    stdout += d.toString();
  });
  proc.stderr!.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const signals = cellSignals(proc);
  const url = await new Promise<string>((resolveUrl, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`cell did not start in time:\n${out}`));
    }, opts.timeoutMs ?? 20_000);
    const check = () => {
      const m = /listening on (https?:\/\/[^\s"]+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        proc.stdout!.off('data', check);
        resolveUrl(m[1]!);
      }
    };
    proc.stdout!.on('data', check);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`cell exited with ${code} before listening:\n${out}`));
    });
  });
  return {
    url,
    adminKey: bootstrapKeyOf(dataDir),
    dataDir,
    proc,
    output: () => out,
    stdout: () => stdout,
    ...signals,
    cleanup: () => {
      rmSync(dataDir, { recursive: true, force: true });
      const d = databases.get(dataDir);
      databases.delete(dataDir);
      void d?.drop().catch(() => undefined);
    },
  };
}
