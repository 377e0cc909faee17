/**
 * The store inside the real cell process (dist/cell.mjs, sql.js WebAssembly
 * embedded): acknowledged POSTs survive SIGKILL, a second cell on the same data
 * directory refuses to start while the first lives, and takes over once it is dead.
 * Needs `node scripts/build.mjs` first (make test builds).
 */
import { strict as assert } from 'node:assert';
import { spawn } from 'node:child_process';
import { describe, it } from 'node:test';
import { request } from 'undici';
import { CELL_BIN, startCellProcess } from '../../helpers/cell-process.ts';

const KEYS = '/api/public/v1/admin/api-keys';

async function call(url: string, method: 'GET' | 'POST', path: string, token: string, body?: unknown) {
  const r = await request(url + path, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: r.statusCode, body: (await r.body.json()) as Record<string, unknown> };
}

/** Runs `serve` on `dir` expecting it to refuse; returns its exit code and output. */
async function refusedStart(dir: string): Promise<{ code: number | null; out: string }> {
  const p = spawn(process.execPath, [CELL_BIN, 'serve', '--port', '0', '--data', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  p.stdout.on('data', (d: Buffer) => (out += d.toString()));
  p.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const timer = setTimeout(() => p.kill('SIGKILL'), 15_000);
  const code = await new Promise<number | null>((r) => p.once('exit', (c) => r(c)));
  clearTimeout(timer);
  return { code, out };
}

describe('store in the real cell process', () => {
  it('every 201 answered before a SIGKILL that lands mid-load is there after restart', { timeout: 60_000 }, async () => {
    const a = await startCellProcess();
    try {
      const acked: { key_id: string; secret: string }[] = [];
      let stop = false;
      const workers = Array.from({ length: 8 }, async (_, w) => {
        for (let n = 0; !stop && n < 500; n++) {
          try {
            const r = await call(a.url, 'POST', KEYS, a.adminKey, { name: `load-${w}-${n}` });
            if (r.status === 201) acked.push({ key_id: String(r.body.key_id), secret: String(r.body.secret) });
          } catch {
            return; // the connection died with the process: that answer was never given
          }
        }
      });
      for (let i = 0; i < 1000 && acked.length < 20; i++) await new Promise((r) => setTimeout(r, 10));
      await a.kill('SIGKILL');
      stop = true;
      await Promise.all(workers);
      assert.ok(acked.length >= 20, `only ${acked.length} writes acknowledged before the kill`);
      const b = await startCellProcess({ dataDir: a.dataDir });
      try {
        const missing: string[] = [];
        for (const k of acked) {
          const got = await call(b.url, 'GET', `${KEYS}/${k.key_id}`, k.secret);
          if (got.status !== 200) missing.push(`${k.key_id}: ${got.status}`);
        }
        assert.deepEqual(missing, [], `${missing.length} of ${acked.length} acknowledged keys lost`);
      } finally {
        await b.stop();
      }
    } finally {
      await a.kill('SIGKILL');
      a.cleanup();
    }
  });

  it('acknowledged POSTs survive SIGKILL; the directory lock refuses a second cell, then yields to the next', {
    timeout: 60_000,
  }, async () => {
    const a = await startCellProcess();
    try {
      assert.match(a.adminKey, /^svck_live_/);
      const minted = await Promise.all(
        Array.from({ length: 12 }, (_, i) => call(a.url, 'POST', KEYS, a.adminKey, { name: `durable-${i}` })),
      );
      for (const m of minted) assert.equal(m.status, 201, JSON.stringify(m.body));

      const second = await refusedStart(a.dataDir);
      assert.notEqual(second.code, 0);
      assert.match(second.out, new RegExp(`data directory .* is in use by pid ${a.proc.pid}`));
      assert.ok(!/listening on/.test(second.out));

      await a.kill('SIGKILL');
      const b = await startCellProcess({ dataDir: a.dataDir });
      try {
        assert.equal(b.adminKey, a.adminKey, 'the bootstrap key file is not rewritten');
        assert.ok(!b.output().includes(a.adminKey), 'a later start does not print the bootstrap key');
        assert.match(b.output(), /taking over the lock .* not running/);
        for (const m of minted) {
          const id = String(m.body.key_id);
          const got = await call(b.url, 'GET', `${KEYS}/${id}`, String(m.body.secret));
          assert.equal(got.status, 200, `key ${id} minted before the kill: ${JSON.stringify(got.body)}`);
          assert.equal(got.body.key_id, id);
        }
      } finally {
        await b.stop();
      }
    } finally {
      await a.kill('SIGKILL');
      a.cleanup();
    }
  });
});
