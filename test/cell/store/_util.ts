/**
 * Helpers shared by the store tests: temp dirs, "crash copies" of a live
 * embedded store, and the two engines as places to open a fresh store (a temp
 * directory, or a new database on the run's PostgreSQL server).
 */
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { StoreConfig } from '../../../cell/store/open.ts';
import type { Migration } from '../../../cell/store/types.ts';
import { pgDatabase, pgUnavailable } from '../../helpers/postgres.ts';

export const T_MIGRATIONS: Migration[] = [{ id: 'test-001-t', sql: 'CREATE TABLE t (id INTEGER, v TEXT, b BLOB)' }];

export function tempDir(prefix = 'store-'): { dir: string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * What a crash would leave behind: the files of a store that is still open,
 * copied as they are on disk (LOCK included: its pid is this process, which does
 * not hold the copy, so the reopen takes it over as stale).
 */
export function crashCopy(dir: string): string {
  const copy = mkdtempSync(join(tmpdir(), 'store-crash-'));
  cpSync(dir, copy, { recursive: true });
  return copy;
}

export interface Place {
  config: StoreConfig;
  cleanup(): Promise<void>;
}

export interface Engine {
  name: 'embedded' | 'postgres';
  /** Why this engine's tests are skipped here, or false. */
  skip: string | false;
  /** A fresh, empty place to open stores at (the same place may be opened again). */
  fresh(): Promise<Place>;
}

export const ENGINES: Engine[] = [
  {
    name: 'embedded',
    skip: false,
    async fresh() {
      const { dir, cleanup } = tempDir();
      return { config: { engine: 'embedded', dir }, cleanup: async () => cleanup() };
    },
  },
  {
    name: 'postgres',
    skip: pgUnavailable() ?? false,
    async fresh() {
      const db = await pgDatabase();
      return { config: { engine: 'postgres', url: db.url, poolSize: 4 }, cleanup: () => db.drop() };
    },
  },
];

export function deferred<T = void>(): { promise: Promise<T>; resolve(v: T): void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

const WRITER = new URL('../../fixtures/store-writer.ts', import.meta.url).pathname;

export interface WriterRun {
  /** Ids acknowledged so far (complete lines only). */
  acked(): string[];
  /** `!id reason` lines: writes the store refused. */
  refused(): { id: string; reason: string }[];
  stderr(): string;
  kill(): Promise<void>;
}

/**
 * Starts test/fixtures/store-writer.ts on `where` (a directory or a
 * postgres:// URL) with `writers` concurrent loops and resolves once it
 * printed `ready`.
 */
export async function startWriter(where: string, tag: string, writers: number, extra: string[] = []): Promise<WriterRun> {
  const { spawn } = await import('node:child_process');
  const child = spawn(process.execPath, ['--import', 'tsx', WRITER, where, tag, String(writers), ...extra], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const deadline = Date.now() + 30_000;
  while (!out.startsWith('ready\n')) {
    if (Date.now() > deadline || child.exitCode !== null) {
      child.kill('SIGKILL');
      throw new Error(`writer did not start: ${err}`);
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  // Only complete lines: a line cut by the kill was not fully printed, so not counted.
  const lines = () => {
    const l = out.split('\n');
    l.pop();
    return l.slice(1);
  };
  return {
    acked: () => lines().filter((l) => !l.startsWith('!')),
    refused: () =>
      lines()
        .filter((l) => l.startsWith('!'))
        .map((l) => {
          const [id, ...reason] = l.slice(1).split(' ');
          return { id: id!, reason: reason.join(' ') };
        }),
    stderr: () => err,
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
