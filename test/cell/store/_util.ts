/** Helpers shared by the store tests: temp dirs and "crash copies" of a live store. */
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Migration } from '../../../cell/store/types.ts';

export const T_MIGRATIONS: Migration[] = [
  { id: 'test-001-t', sql: 'CREATE TABLE t (id INTEGER, v TEXT, b BLOB)' },
];

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
