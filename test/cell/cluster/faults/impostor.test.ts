/**
 * One member per cell id (issue 20, finding 7): a second process started from
 * another data directory with a live member's `--cell-id` (and a higher
 * clearance) refuses to start with a clear message, and the member's row
 * (clearance, region, heartbeat key) is untouched; the real member keeps
 * beating and stays live. The same data directory restarting after a crash is
 * the same member and joins at once.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { CELL_BIN } from '../../../helpers/cell-process.ts';
import { call } from '../../../helpers/group.ts';
import { adminQuery } from '../../../helpers/postgres.ts';
import { SKIP, sleep, startFaultGroup, until } from './_group.ts';

test('a process with a live member’s --cell-id refuses to start; the member’s row and heartbeat are untouched', {
  skip: SKIP,
  timeout: 120_000,
}, async () => {
  // A lease of 3 s: a busy machine must not make the real member look dead while it is checked.
  const g = await startFaultGroup({ heartbeatMs: 250, leaseMs: 3000, cron: false });
  const dir = mkdtempSync(join(tmpdir(), 'impostor-'));
  try {
    const row = async () =>
      (await adminQuery(g.db.url, "SELECT clearance, region, member_key, stopped_at FROM cells WHERE cell_id = 'cell-b'")).rows[0];
    const before = await row();
    const r = spawnSync(
      process.execPath,
      [
        CELL_BIN,
        'serve',
        '--port',
        '0',
        '--data',
        dir,
        '--store',
        g.db.url,
        '--posture',
        'multi-cell',
        '--cell-id',
        'cell-b',
        '--clearance',
        '9',
        // The group's key, so that what refuses it is the cell id, not the missing key.
        '--secrets-key-file',
        g.secretsKeyFile,
      ],
      { encoding: 'utf8', timeout: 60_000 },
    );
    assert.equal(r.status, 1, `the impostor exits 1: ${r.stdout}${r.stderr}`);
    assert.match(r.stderr, /cell id cell-b is in use: a live member of this group holds it/);
    assert.doesNotMatch(r.stdout, /listening on/);
    assert.deepEqual(await row(), before, 'the member row is untouched (clearance, region, key, not stopped)');
    // The real member keeps beating and stays live.
    await sleep(1500);
    const cells = await call(g.cells[0]!.url, 'GET', '/api/public/v1/admin/cells', { token: g.token });
    assert.equal(cells.status, 200, cells.text);
    const b = cells.body.items.find((m: { cell_id: string }) => m.cell_id === 'cell-b');
    assert.equal(b.state, 'live');
    assert.equal(b.clearance, 0);
    assert.ok(b.heartbeat_age_ms < 3000, `heartbeat age ${b.heartbeat_age_ms} ms`);

    // The same data directory after a crash is the same member: it joins at once, within the lease.
    await g.cells[1]!.kill('SIGKILL');
    const again = await g.restart(1);
    assert.match(again.output(), /listening on/);
    await until(
      'cell-b live again',
      async () => {
        const l = await call(g.cells[0]!.url, 'GET', '/api/public/v1/admin/cells', { token: g.token });
        return l.body.items.find((m: { cell_id: string; state: string }) => m.cell_id === 'cell-b' && m.state === 'live');
      },
      10_000,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await g.stop();
  }
});
