/**
 * Backup and restore (issue 25, part 2) against the real cell process.
 * Embedded store: `backup` while the cell serves a stream of writes, then
 * `restore` into a new directory; every table of the restored store equals
 * the original store replayed to the backup's LSN, and a cell starts on it
 * and serves. The refusals: a wrong secrets key, a damaged file, a non-empty
 * target, a directory with no store; and (issue 36, finding 11) a backup
 * changed by someone without the secrets key: an owner key planted in its
 * store, its sealed tables emptied to restore it under a key of one's own,
 * whether written back as a keyed backup or as an unkeyed one of the older
 * format; restore keeps the original's directory modes (issue 42).
 * PostgreSQL: the documented pg_dump / pg_restore round trip
 * (docs/operations.md), with the data directory's files a restored cell
 * needs, and every table compared.
 */
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import type { Database } from 'sql.js';
import { request } from 'undici';
import { CELL_BIN, groupSecretsKeyFile, startCellProcess, type CellProcess } from '../helpers/cell-process.ts';
import { TEST_ENGINE } from '../helpers/inproc.ts';
import { pgDatabase } from '../helpers/postgres.ts';
import { copyStoreOnline } from '../../cell/store/copy-online.ts';
import { loadSqlJs } from '../../cell/store/sqljs.ts';
import { hashSecret } from '../../core/apikey/hash.ts';

const run = promisify(execFile);
const P = '/api/public/v1/admin';

/** Runs `node dist/cell.mjs ARGS`; resolves with its exit code and output (never rejects on a non-zero exit). */
async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  try {
    const r = await run(process.execPath, [CELL_BIN, ...args]);
    return { code: 0, out: r.stdout, err: r.stderr };
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    return { code: x.code, out: x.stdout, err: x.stderr };
  }
}

/**
 * A rate gate the writers below never reach: they write as fast as the cell answers for as long as the backup
 * takes (longer on a loaded machine), which the default gate (600, 100 a second) can refuse. The test is about the
 * store, not the gate.
 */
const WRITERS_RATE = ['--rate-capacity', '1000000', '--rate-refill', '100000'];

async function createPrincipal(cell: CellProcess, key: string, name: string): Promise<void> {
  const res = await request(`${cell.url}${P}/principals`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ kind: 'service', name }),
  });
  assert.equal(res.statusCode, 201, await res.body.text());
  await res.body.dump();
}

async function principalCount(url: string, key: string): Promise<number> {
  const res = await request(`${url}${P}/principals?limit=1`, { headers: { authorization: `Bearer ${key}` } });
  assert.equal(res.statusCode, 200);
  return ((await res.body.json()) as { total: number }).total;
}

/** Every table of an embedded database, rows as sorted JSON lines (order-free, so rowid order does not matter). */
function sqliteTables(db: Database): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const names = db.exec(
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> '_store_meta' ORDER BY name",
  );
  for (const [name] of names[0]?.values ?? []) {
    const r = db.exec(`SELECT * FROM "${String(name)}"`)[0];
    const rows = (r?.values ?? []).map((v) =>
      JSON.stringify(v, (_k, x: unknown) => (x instanceof Uint8Array ? Buffer.from(x).toString('hex') : x)),
    );
    out.set(String(name), rows.sort());
  }
  return out;
}

/**
 * A backup rewritten by someone who does not hold the secrets key: its store changed by `mutate`, every
 * checksum recomputed, written back as format 1 (unkeyed) and as format 2 with the MAC it had. Returns both files.
 */
async function tampered(from: string, mutate: (db: Database) => void, work: string, name: string): Promise<string[]> {
  const buf = readFileSync(from);
  const lines: Buffer[] = [];
  let off = 0;
  const format = buf.subarray(0, 20).toString().startsWith('agent-cell backup 2') ? 2 : 1;
  for (let i = 0; i < (format === 2 ? 3 : 2); i++) {
    const nl = buf.indexOf(0x0a, off);
    lines.push(buf.subarray(off, nl + 1));
    off = nl + 1;
  }
  const manifest = JSON.parse(lines[1]!.toString()) as { files: { path: string; bytes: number; sha256: string }[] };
  const files: Buffer[] = [];
  for (const f of manifest.files) {
    let data = buf.subarray(off, off + f.bytes);
    off += f.bytes;
    if (f.path === 'store/snapshot.db') {
      const SQL = await loadSqlJs();
      const db = new SQL.Database(data);
      mutate(db);
      data = Buffer.from(db.export());
      db.close();
    }
    f.bytes = data.length;
    f.sha256 = createHash('sha256').update(data).digest('hex');
    files.push(data);
  }
  const v1 = join(work, `${name}-v1.backup`);
  writeFileSync(v1, Buffer.concat([Buffer.from(`agent-cell backup 1\n${JSON.stringify({ ...manifest, format: 1 })}\n`), ...files]));
  const out = [v1];
  if (format === 2) {
    const v2 = join(work, `${name}-v2.backup`);
    writeFileSync(v2, Buffer.concat([Buffer.from(`agent-cell backup 2\n${JSON.stringify(manifest)}\n`), lines[2]!, ...files]));
    out.push(v2);
  }
  return out;
}

describe('backup and restore: the embedded store while the cell serves', {
  skip: TEST_ENGINE === 'postgres' ? 'embedded store only' : false,
}, () => {
  let cell: CellProcess;
  let work: string;
  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'cell-backup-'));
    cell = await startCellProcess({ args: WRITERS_RATE });
  });
  after(async () => {
    await cell?.kill();
    cell?.cleanup();
    rmSync(work, { recursive: true, force: true });
  });

  it('backs up during writes; restore gives every table as of the backup LSN; a cell serves on it', async () => {
    let written = 0;
    let stop = false;
    const writer = (async () => {
      while (!stop) await createPrincipal(cell, cell.adminKey, `svc-${written++}`);
    })();
    while (written < 20) await new Promise((r) => setTimeout(r, 20));
    const before = written;
    const out = join(work, 'cell.backup');
    const b = await cli(['backup', '--data', cell.dataDir, '--out', out]);
    assert.equal(b.code, 0, b.err);
    assert.match(b.out, /wrote backup of cell-\S+ at LSN \d+ to /);
    assert.match(b.out, /not in the backup, keep them apart: .*secrets\.key, .*bootstrap-admin\.key/);
    // Writes go on after the backup returned: the backup must hold fewer principals than the end state.
    const more = written + 5;
    while (written < more) await new Promise((r) => setTimeout(r, 20));
    stop = true;
    await writer;
    const lsn = Number(/at LSN (\d+)/.exec(b.out)![1]);
    // SIGKILL: no checkpoint at close, so the original log still holds every record after the backup's LSN.
    await cell.kill();

    const restored = join(work, 'restored');
    const r = await cli(['restore', '--from', out, '--data', restored, '--secrets-key-file', join(cell.dataDir, 'secrets.key')]);
    assert.equal(r.code, 0, r.err);
    assert.ok(!existsSync(join(restored, 'bootstrap-admin.key')), 'the bootstrap key is not restored');
    assert.deepEqual(readFileSync(join(restored, 'secrets.key')), readFileSync(join(cell.dataDir, 'secrets.key')));

    const SQL = await loadSqlJs();
    const got = new SQL.Database(readFileSync(join(restored, 'store', 'snapshot.db')));
    const want = await copyStoreOnline(join(cell.dataDir, 'store'), { maxLsn: lsn });
    try {
      assert.equal(want.lsn, lsn);
      const g = sqliteTables(got);
      const w = sqliteTables(want.db);
      assert.deepEqual([...g.keys()], [...w.keys()]);
      assert.ok(g.size > 20, `every module's tables (${g.size})`);
      for (const [t, rows] of w) assert.deepEqual(g.get(t), rows, `table ${t}`);
      const n = g.get('principals')!.length;
      assert.ok(
        n >= before && n < written + 1,
        `principals in the backup: ${n} (acknowledged before: ${before}, at the end: ${written + 1})`,
      );
    } finally {
      got.close();
      want.db.close();
    }

    // The restored directory serves: the same owner key, the data as backed up, and new writes.
    const again = await startCellProcess({ dataDir: restored });
    try {
      const n = await principalCount(again.url, cell.adminKey);
      assert.ok(n >= before + 1 && n <= written + 1);
      await createPrincipal(again, cell.adminKey, 'after-restore');
      assert.equal(await principalCount(again.url, cell.adminKey), n + 1);
    } finally {
      await again.stop();
      rmSync(restored, { recursive: true, force: true });
    }
  });

  it('refuses a wrong secrets key, a damaged file, a non-empty target and a directory with no store; writes nothing', async () => {
    const out = join(work, 'refusals.backup');
    // The cell was killed by the previous test; a backup of a stopped cell's directory works the same.
    assert.equal((await cli(['backup', '--data', cell.dataDir, '--out', out])).code, 0);
    const key = join(cell.dataDir, 'secrets.key');

    const wrongKey = join(work, 'wrong.key');
    writeFileSync(wrongKey, randomBytes(32), { mode: 0o600 });
    const target = join(work, 'r1');
    let r = await cli(['restore', '--from', out, '--data', target, '--secrets-key-file', wrongKey]);
    assert.equal(r.code, 1);
    assert.match(r.err, /was keyed with another secrets key than the one given/);
    assert.ok(!existsSync(target), 'nothing written');

    r = await cli(['restore', '--from', out, '--data', target]);
    assert.equal(r.code, 2, 'a usage error');
    assert.match(r.err, /does not hold the secrets key/);

    const damaged = join(work, 'damaged.backup');
    const bytes = readFileSync(out);
    bytes[bytes.length - 100] = (bytes[bytes.length - 100] ?? 0) ^ 0xff;
    writeFileSync(damaged, bytes);
    r = await cli(['restore', '--from', damaged, '--data', target, '--secrets-key-file', key]);
    assert.equal(r.code, 1);
    assert.match(r.err, /is not a usable backup \(.* does not match its checksum\)/);
    assert.ok(!existsSync(target));

    // Finding 11: an owner key planted in the backup's store (every checksum recomputed), restored, worked.
    const planted = `svck_live_${'P'.repeat(43)}`;
    for (const file of await tampered(
      out,
      (db) =>
        db.run(
          `INSERT INTO api_keys (id, owner_id, name, hash, scopes, allowed_ips, allowed_regions, status, created_at, created_by, authority)
           SELECT 'key_planted', owner_id, 'planted', ?, scopes, allowed_ips, allowed_regions, 'active', created_at, created_by, authority
           FROM api_keys ORDER BY created_at LIMIT 1`,
          [hashSecret(planted)],
        ),
      work,
      'planted',
    )) {
      r = await cli(['restore', '--from', file, '--data', target, '--secrets-key-file', key]);
      assert.equal(r.code, 1, `${file}: ${r.out}`);
      assert.match(r.err, /is not a usable backup \((format 1, taken before backups were keyed|its MAC does not verify)/);
      assert.ok(!existsSync(target), 'nothing written');
    }
    // Its sealed tables emptied, to restore it under a key of one's own: refused under that key, and under the cell's.
    for (const file of await tampered(
      out,
      (db) => {
        for (const t of ['cell_keys', 'oauth_signing_keys', 'custody_key_check']) db.run(`DELETE FROM ${t}`);
      },
      work,
      'emptied',
    )) {
      for (const k of [wrongKey, key]) {
        r = await cli(['restore', '--from', file, '--data', target, '--secrets-key-file', k]);
        assert.equal(r.code, 1, `${file} under ${k}: ${r.out}`);
        assert.match(r.err, /is not a usable backup|was keyed with another secrets key/);
        assert.ok(!existsSync(target), 'nothing written');
      }
    }

    mkdirSync(target);
    writeFileSync(join(target, 'x'), 'x');
    r = await cli(['restore', '--from', out, '--data', target, '--secrets-key-file', key]);
    assert.equal(r.code, 1);
    assert.match(r.err, /exists and is not an empty directory/);
    assert.deepEqual(readdirSync(target), ['x']);

    r = await cli(['backup', '--data', join(work, 'nothing-here'), '--out', join(work, 'n.backup')]);
    assert.equal(r.code, 1);
    assert.match(r.err, /holds no embedded store .* pg_dump/);
    assert.doesNotMatch(r.err, /\n\s+at /, 'no stack trace');
  });
});

describe('restore keeps the directory modes of the backed-up data directory (issue 42)', {
  skip: TEST_ENGINE === 'postgres' ? 'embedded store only' : false,
}, () => {
  it('the data directory, its store and its SQL workspaces come back with the modes they had', async () => {
    const work = mkdtempSync(join(tmpdir(), 'cell-backup-modes-'));
    const cell = await startCellProcess();
    try {
      const res = await request(`${cell.url}${P}/jobs/runs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${cell.adminKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ job_type: 'sql', workspace_id: 'ledger', spec: { sql: 'CREATE TABLE t (n INTEGER)' } }),
      });
      assert.equal(res.statusCode, 202, await res.body.text());
      await res.body.dump();
      const db = join(cell.dataDir, 'workspaces', 'ledger', 'sql.sqlite');
      for (let i = 0; i < 400 && !existsSync(db); i++) await new Promise((r) => setTimeout(r, 25));
      assert.ok(existsSync(db), 'the SQL job made its workspace');
      await cell.stop();
      // Modes an operator chose, none of them what a new directory gets.
      const modes: Record<string, number> = { '': 0o750, store: 0o700, workspaces: 0o751, 'workspaces/ledger': 0o710 };
      for (const [p, m] of Object.entries(modes)) chmodSync(join(cell.dataDir, p), m);
      const out = join(work, 'modes.backup');
      assert.equal((await cli(['backup', '--data', cell.dataDir, '--out', out])).code, 0);
      const restored = join(work, 'restored');
      const r = await cli(['restore', '--from', out, '--data', restored, '--secrets-key-file', join(cell.dataDir, 'secrets.key')]);
      assert.equal(r.code, 0, r.err);
      for (const [p, m] of Object.entries(modes))
        assert.equal((statSync(join(restored, p)).mode & 0o7777).toString(8), m.toString(8), `mode of ${p || 'the data directory'}`);
      assert.ok(existsSync(join(restored, 'workspaces', 'ledger', 'sql.sqlite')));
    } finally {
      await cell.stop();
      cell.cleanup();
      rmSync(work, { recursive: true, force: true });
    }
  });
});

const PG_BIN = '/usr/lib/postgresql/15/bin';

/** Every table of the public schema, rows as sorted JSON lines. */
async function pgTables(url: string): Promise<Map<string, string[]>> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const out = new Map<string, string[]>();
    const names = await c.query("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name");
    for (const { table_name } of names.rows as { table_name: string }[]) {
      const r = await c.query(`SELECT * FROM "${table_name}"`);
      out.set(table_name, r.rows.map((row) => JSON.stringify(row)).sort());
    }
    return out;
  } finally {
    await c.end();
  }
}

describe('backup and restore on PostgreSQL: pg_dump and pg_restore', {
  skip: TEST_ENGINE !== 'postgres' ? 'PostgreSQL only' : false,
}, () => {
  it('a dump taken while the cell serves restores into a new database a cell serves from; every table round-trips', async () => {
    const work = mkdtempSync(join(tmpdir(), 'cell-pgdump-'));
    const cell = await startCellProcess({ args: WRITERS_RATE });
    const url = /--store (\S+)/.exec(cell.proc.spawnargs.join(' '))![1]!;
    const copy = await pgDatabase();
    const copy2 = await pgDatabase();
    try {
      // `written`: creates sent; `acknowledged`: creates answered (committed before the answer).
      let written = 0;
      let acknowledged = 0;
      let stop = false;
      const writer = (async () => {
        while (!stop) {
          await createPrincipal(cell, cell.adminKey, `svc-${written++}`);
          acknowledged++;
        }
      })();
      while (acknowledged < 10) await new Promise((r) => setTimeout(r, 20));
      // Every create acknowledged before the dump starts is in it; those in flight may be or not.
      const before = acknowledged;
      const dump = join(work, 'cell.dump');
      await run(join(PG_BIN, 'pg_dump'), ['--format=custom', '--file', dump, '--dbname', url]);
      stop = true;
      await writer;
      await run(join(PG_BIN, 'pg_restore'), ['--no-owner', '--exit-on-error', '--dbname', copy.url, dump]);

      // What the cell's data directory must keep (docs/operations.md): its id, its member key; the secrets key apart.
      const dir = join(work, 'restored-dir');
      mkdirSync(dir);
      for (const f of readdirSync(cell.dataDir))
        if (f === 'cell-id' || /^member-.*\.key$/.test(f)) cpSync(join(cell.dataDir, f), join(dir, f));
      await cell.stop();
      const again = await startCellProcess({ dataDir: dir, args: ['--store', copy.url, '--secrets-key-file', groupSecretsKeyFile()] });
      try {
        const n = await principalCount(again.url, cell.adminKey);
        // The bootstrap admin, every create acknowledged before the dump, at most every create sent.
        assert.ok(
          n >= before + 1 && n <= written + 1,
          `principals after restore: ${n} (acknowledged before the dump ${before}, sent ${written})`,
        );
        await createPrincipal(again, cell.adminKey, 'after-restore');
      } finally {
        await again.stop();
      }

      // The same round trip of the stopped cell's database: every table equal.
      const dump2 = join(work, 'cell2.dump');
      await run(join(PG_BIN, 'pg_dump'), ['--format=custom', '--file', dump2, '--dbname', url]);
      await run(join(PG_BIN, 'pg_restore'), ['--no-owner', '--exit-on-error', '--dbname', copy2.url, dump2]);
      const want = await pgTables(url);
      const got = await pgTables(copy2.url);
      assert.deepEqual([...got.keys()], [...want.keys()]);
      assert.ok(got.size > 20);
      for (const [t, rows] of want) assert.deepEqual(got.get(t), rows, `table ${t}`);
    } finally {
      await cell.stop();
      cell.cleanup();
      await copy.drop();
      await copy2.drop();
      rmSync(work, { recursive: true, force: true });
    }
  });
});
