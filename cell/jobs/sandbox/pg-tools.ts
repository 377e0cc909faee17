/**
 * PostgreSQL's own dump and restore programs, for the one thing the cell does
 * with them: moving a SQL workspace an earlier version kept as a schema of the
 * cells' database into a database of its own (pg-provision.ts). They are found
 * in `--pg-bin-dir`, else on the PATH, else in the usual install directories
 * (Debian's /usr/lib/postgresql/N/bin, the PGDG packages' /usr/pgsql-N/bin,
 * /usr/local/pgsql/bin), the newest first. The password travels in the
 * environment (PGPASSWORD), never on a command line.
 */
import { spawn } from 'node:child_process';
import { accessSync, constants, readdirSync } from 'node:fs';
import { delimiter, join } from 'node:path';

export interface PgTools {
  pgDump: string;
  pgRestore: string;
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Directories named `<prefix><major>` under `root`, the highest major first, each with `suffix` appended. */
function versioned(root: string, prefix: string, suffix: string): string[] {
  let names: string[];
  try {
    names = readdirSync(root);
  } catch {
    return [];
  }
  return names
    .filter((n) => n.startsWith(prefix) && /^\d+$/.test(n.slice(prefix.length)))
    .sort((a, b) => Number(b.slice(prefix.length)) - Number(a.slice(prefix.length)))
    .map((n) => join(root, n, suffix));
}

/** pg_dump and pg_restore from one directory, or null when none has both. */
export function findPgTools(binDir: string | null): PgTools | null {
  const dirs = binDir
    ? [binDir]
    : [
        ...(process.env['PATH'] ?? '').split(delimiter).filter(Boolean),
        ...versioned('/usr/lib/postgresql', '', 'bin'),
        ...versioned('/usr', 'pgsql-', 'bin'),
        '/usr/local/pgsql/bin',
      ];
  for (const d of dirs) {
    const pgDump = join(d, 'pg_dump');
    const pgRestore = join(d, 'pg_restore');
    if (executable(pgDump) && executable(pgRestore)) return { pgDump, pgRestore };
  }
  return null;
}

/** A libpq connection URL without its password (`dbname` replaced), and the password apart. */
export function libpqTarget(url: string, database: string): { dbname: string; password: string } {
  const u = new URL(url);
  const password = decodeURIComponent(u.password);
  u.password = '';
  u.pathname = `/${encodeURIComponent(database)}`;
  return { dbname: u.toString(), password };
}

/**
 * `pg_dump --schema=SCHEMA` of `from` piped into `pg_restore` into `to` (both without owners or
 * privileges: the cell sets them after). Resolves when both exited 0; rejects with their complaint.
 */
export function copySchema(
  tools: PgTools,
  from: { dbname: string; password: string },
  to: { dbname: string; password: string },
  schema: string,
): Promise<void> {
  const dump = spawn(tools.pgDump, ['--format=custom', `--schema=${schema}`, '--no-owner', '--no-privileges', '--dbname', from.dbname], {
    env: { ...process.env, PGPASSWORD: from.password },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const restore = spawn(tools.pgRestore, ['--no-owner', '--no-privileges', '--exit-on-error', '--dbname', to.dbname], {
    env: { ...process.env, PGPASSWORD: to.password },
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  dump.stdout.pipe(restore.stdin);
  // pg_restore gone first (it failed): pg_dump's complaint and exit code say why, not a broken pipe.
  restore.stdin.on('error', () => undefined);
  const said: string[] = [];
  const hear = (who: string) => (chunk: Buffer) => {
    if (said.join('').length < 2000) said.push(`${who}: ${chunk.toString('utf8')}`);
  };
  dump.stderr.on('data', hear('pg_dump'));
  restore.stderr.on('data', hear('pg_restore'));
  const exited = (p: ReturnType<typeof spawn>, who: string) =>
    new Promise<void>((resolve, reject) => {
      p.on('error', (err) => reject(new Error(`${who} could not run: ${err.message}`)));
      p.on('close', (code, signal) => (code === 0 ? resolve() : reject(new Error(`${who} exited ${code ?? signal}`))));
    });
  return Promise.all([exited(dump, 'pg_dump'), exited(restore, 'pg_restore')]).then(
    () => undefined,
    (err: Error) => {
      dump.kill();
      restore.kill();
      throw new Error(`${err.message}: ${said.join('').trim().slice(0, 2000)}`);
    },
  );
}
