/**
 * Owner recovery (issue 25, part 2): `admin reset-owner` against the real
 * cell's data (embedded store, or PostgreSQL with CELL_TEST_STORE=postgres).
 * Refused while the cell serves; on a stopped cell it mints a new owner key
 * that works, revokes nothing (the old key still works), writes an audit
 * record, and prints the secret only to a terminal, naming its file always.
 */
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { CELL_BIN, startCellProcess, type CellProcess } from '../helpers/cell-process.ts';

const run = promisify(execFile);
const P = '/api/public/v1/admin';

async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  try {
    const r = await run(process.execPath, [CELL_BIN, ...args]);
    return { code: 0, out: r.stdout, err: r.stderr };
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    return { code: x.code, out: x.stdout, err: x.stderr };
  }
}

async function get(url: string, key: string, path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await request(`${url}${path}`, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
}

describe('admin reset-owner', () => {
  let cell: CellProcess;
  /** The flags that name this cell's store (the PostgreSQL URL and the group's secrets key, when on PostgreSQL). */
  let storeArgs: string[];
  before(async () => {
    cell = await startCellProcess();
    const a = cell.proc.spawnargs;
    const i = a.indexOf('--store');
    storeArgs = i >= 0 ? ['--store', a[i + 1]!, '--secrets-key-file', a[a.indexOf('--secrets-key-file') + 1]!] : [];
  });
  after(async () => {
    await cell?.kill();
    cell?.cleanup();
  });

  it('is refused while the cell serves, saying what to do', async () => {
    const r = await cli(['admin', 'reset-owner', '--data', cell.dataDir, ...storeArgs]);
    assert.equal(r.code, 3, 'a refusal');
    assert.match(
      r.err,
      storeArgs.length ? /cells of this group are serving \(.+\): stop them first/ : /a cell \(pid \d+\) serves on .*: stop it first/,
    );
    assert.doesNotMatch(r.err, /\n\s+at /);
  });

  it('on the stopped cell: a new owner key in a 0600 file, not printed to a pipe; the old key still works; audited', async () => {
    await cell.stop();
    const r = await cli(['admin', 'reset-owner', '--data', cell.dataDir, ...storeArgs]);
    assert.equal(r.code, 0, r.err);
    const m = /new owner key (key_\S+) in (\S+) \(mode 0600; not printed: stdout is not a terminal\)/.exec(r.out);
    assert.ok(m, r.out);
    assert.doesNotMatch(r.out, /svck_live_/);
    assert.match(r.out, /its other active keys are left as they were/);
    const file = m[2]!;
    assert.equal(statSync(file).mode & 0o777, 0o600);
    const secret = readFileSync(file, 'utf8').trim();
    assert.match(secret, /^svck_live_/);

    const again = await startCellProcess({ dataDir: cell.dataDir, ...(storeArgs.length ? { args: storeArgs } : {}) });
    try {
      const who = await get(again.url, secret, `${P}/whoami`);
      assert.equal(who.status, 200, JSON.stringify(who.body));
      const old = await get(again.url, cell.adminKey, `${P}/whoami`);
      assert.equal(old.status, 200, 'the old key is not revoked');
      const id = (b: Record<string, unknown>) => (b['principal'] as { id: string }).id;
      assert.equal(id(who.body), id(old.body), 'a key of the same owner');
      const audit = await get(again.url, secret, `${P}/audit?actor=system:reset-owner`);
      assert.equal(audit.status, 200);
      const entries = audit.body['entries'] as { action: string; target: string; details: { reason: string } }[];
      assert.equal(entries.length, 1);
      assert.equal(entries[0]!.action, 'api_key.mint');
      assert.equal(entries[0]!.target, m[1]);
      assert.equal(entries[0]!.details.reason, 'reset_owner');
    } finally {
      await again.stop();
    }
  });

  it('prints the secret when stdout is a terminal', async () => {
    const cmd = [process.execPath, CELL_BIN, 'admin', 'reset-owner', '--data', cell.dataDir, ...storeArgs].map((s) => `'${s}'`).join(' ');
    const { stdout } = await run('script', ['-qec', cmd, '/dev/null']);
    assert.match(stdout, /new owner key key_\S+ \(shown once, also in \S+\):\r?\nsvck_live_/);
  });
});
