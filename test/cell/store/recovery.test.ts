/**
 * A damaged log (embedded engine only: PostgreSQL recovers its own WAL): the
 * store opens, keeps every complete record before the damage, and reports
 * what it dropped.
 */
import { strict as assert } from 'node:assert';
import { readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { decodeRecord, HEADER_BYTES } from '../../../cell/store/internal/log.ts';
import { LOG_FILE, openEmbeddedStore as openStore } from '../../../cell/store/embedded.ts';
import { crashCopy, T_MIGRATIONS, tempDir } from './_util.ts';

interface Boundary {
  lsn: number;
  start: number;
  end: number;
}

/** A crashed store directory with `n` single-row transactions (ids 0..n-1) in its log, and the record boundaries. */
async function crashedWithRecords(n: number): Promise<{ dir: string; records: Boundary[]; cleanup(): void }> {
  const { dir, cleanup } = tempDir();
  const s = await openStore({ dir, migrations: T_MIGRATIONS, log: () => undefined });
  await s.checkpoint(); // the log now holds only the rows below
  for (let i = 0; i < n; i++) await s.write((tx) => tx.run('INSERT INTO t (id, v) VALUES (?, ?)', [i, `row ${i}`]));
  const copy = crashCopy(dir);
  await s.close();
  cleanup();
  const buf = readFileSync(join(copy, LOG_FILE));
  const records: Boundary[] = [];
  for (let off = HEADER_BYTES; off < buf.length; ) {
    const r = decodeRecord(buf, off);
    assert.ok(r.ok);
    records.push({ lsn: r.lsn, start: off, end: r.next });
    off = r.next;
  }
  assert.equal(records.length, n);
  return { dir: copy, records, cleanup: () => rmSync(copy, { recursive: true, force: true }) };
}

async function ids(dir: string, notes: string[]) {
  const s = await openStore({ dir, migrations: T_MIGRATIONS, log: (m) => notes.push(m) });
  const rows = (await s.all('SELECT id FROM t ORDER BY id')).map((r) => r['id']);
  return { s, rows };
}

describe('store: recovery from a damaged log', () => {
  it('a log truncated mid-record: keeps every complete record, drops the torn one, says so', async () => {
    const { dir, records, cleanup } = await crashedWithRecords(10);
    try {
      const last = records[9]!;
      const cut = last.start + Math.floor((last.end - last.start) / 2);
      const path = join(dir, LOG_FILE);
      writeFileSync(path, readFileSync(path).subarray(0, cut));
      const notes: string[] = [];
      const { s, rows } = await ids(dir, notes);
      assert.deepEqual(rows, [0, 1, 2, 3, 4, 5, 6, 7, 8]);
      assert.equal(s.recovery.replayed, 9);
      assert.equal(s.recovery.droppedBytes, cut - last.start);
      assert.match(s.recovery.droppedReason ?? '', new RegExp(`^torn record .* at offset ${last.start}$`));
      assert.ok(
        notes.some((n) => n.includes(`dropped ${cut - last.start} bytes of log tail`)),
        notes.join('\n'),
      );
      assert.equal(statSync(path).size, last.start, 'the torn tail is cut off the file');
      const saved = readdirSync(dir).filter((f) => f.startsWith(`${LOG_FILE}.dropped-`));
      assert.equal(saved.length, 1, 'the dropped bytes are kept beside the log');
      assert.equal(statSync(join(dir, saved[0]!)).size, cut - last.start);
      // Life goes on: new writes append after the cut and survive the next open.
      await s.write((tx) => tx.run('INSERT INTO t (id) VALUES (100)'));
      const copy = crashCopy(dir);
      await s.close();
      const again = await ids(copy, []);
      assert.deepEqual(again.rows, [0, 1, 2, 3, 4, 5, 6, 7, 8, 100]);
      assert.equal(again.s.recovery.droppedBytes, 0);
      await again.s.close();
      rmSync(copy, { recursive: true, force: true });
    } finally {
      cleanup();
    }
  });

  it('a log cut inside a record header is a torn tail too', async () => {
    const { dir, records, cleanup } = await crashedWithRecords(3);
    try {
      const path = join(dir, LOG_FILE);
      writeFileSync(path, readFileSync(path).subarray(0, records[2]!.start + 5));
      const { s, rows } = await ids(dir, []);
      assert.deepEqual(rows, [0, 1]);
      assert.equal(s.recovery.droppedBytes, 5);
      assert.match(s.recovery.droppedReason ?? '', /^torn record header \(5 bytes\)/);
      await s.close();
    } finally {
      cleanup();
    }
  });

  it('a flipped byte in a middle record: keeps the records before it, drops it and the rest, says so', async () => {
    const { dir, records, cleanup } = await crashedWithRecords(10);
    try {
      const path = join(dir, LOG_FILE);
      const buf = readFileSync(path);
      const bad = records[4]!;
      const at = bad.start + 16 + 3; // inside the JSON payload
      buf[at] = buf[at]! ^ 0x20;
      writeFileSync(path, buf);
      const notes: string[] = [];
      const { s, rows } = await ids(dir, notes);
      assert.deepEqual(rows, [0, 1, 2, 3]);
      assert.equal(s.recovery.replayed, 4);
      assert.equal(s.recovery.droppedBytes, buf.length - bad.start);
      assert.equal(s.recovery.droppedReason, `checksum mismatch at offset ${bad.start}`);
      assert.ok(notes.some((n) => /dropped \d+ bytes of log tail \(checksum mismatch/.test(n)));
      await s.close();
    } finally {
      cleanup();
    }
  });

  it('a corrupt length field is reported as such', async () => {
    const { dir, records, cleanup } = await crashedWithRecords(4);
    try {
      const path = join(dir, LOG_FILE);
      const buf = readFileSync(path);
      buf.writeUInt32LE(0xfffffff0, records[2]!.start);
      writeFileSync(path, buf);
      const { s, rows } = await ids(dir, []);
      assert.deepEqual(rows, [0, 1]);
      assert.match(s.recovery.droppedReason ?? '', /^bad record length 4294967280 at offset/);
      await s.close();
    } finally {
      cleanup();
    }
  });
});
