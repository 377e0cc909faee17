// The edge's log from the real single executable dist/edge (issue 28): pino bundled into the SEA,
// one JSON access-log line per request on stdout (the cell's fields), no secret in any line,
// --log-level warn silencing it, --log-format pretty, and every line written on SIGTERM.
// Needs `scripts/build-sea.sh` (make edge).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { generateEd25519 } from '../../bundles/codec.ts';

const EDGE = resolve(import.meta.dirname, '../../dist/edge');
const KEY = `svck_live_${'Q'.repeat(43)}`;

/** A device with a pinned (made-up) cell and no key bundle: every API request is refused, which is enough to log. */
async function device(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'edge-log-'));
  const init = spawnSync(EDGE, ['init', '--data', dir], { encoding: 'utf8' });
  assert.equal(init.status, 0, init.stderr);
  const cell = await generateEd25519();
  writeFileSync(
    join(dir, 'cell-trust.json'),
    JSON.stringify({ format_version: 1, cell_id: 'cell-a', keys: [{ kid: cell.kid, jwk: cell.publicJwk }], publishers: [] }),
  );
  const trust = spawnSync(EDGE, ['trust', '--data', dir, '--file', join(dir, 'cell-trust.json')], { encoding: 'utf8' });
  assert.equal(trust.status, 0, trust.stderr);
  return dir;
}

async function serve(dir: string, args: string[]) {
  const proc = spawn(EDGE, ['serve', '--data', dir, '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  proc.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  proc.stderr.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  const url = await new Promise<string>((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`edge did not start: ${out}${err}`)), 30_000);
    const check = () => {
      const m = /listening on (https?:\/\/[^\s"]+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        res(m[1]!);
      }
    };
    proc.stdout.on('data', check);
  });
  return {
    url,
    out: () => out,
    err: () => err,
    stop: async () => {
      proc.kill('SIGTERM');
      return exited;
    },
  };
}

test('the edge logs through pino from the single executable', {
  skip: existsSync(EDGE) ? false : 'dist/edge missing: run scripts/build-sea.sh',
  timeout: 120_000,
}, async () => {
  const dir = await device();
  try {
    const edge = await serve(dir, []);
    const meta = await fetch(`${edge.url}/.well-known/oauth-protected-resource`);
    assert.equal(meta.status, 200);
    const ids = [meta.headers.get('x-request-id')!];
    for (let i = 0; i < 50; i++) {
      const r = await fetch(`${edge.url}/api/public/v1/agent-runs`, { headers: { authorization: `Bearer ${KEY}`, cookie: `s=${KEY}` } });
      await r.arrayBuffer();
      assert.equal(r.status, 401);
      ids.push(r.headers.get('x-request-id')!);
    }
    // Every line is written before the process exits.
    assert.equal(await edge.stop(), 0, edge.err());
    const lines = edge
      .out()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const byId = new Map(lines.map((l) => [l['request_id'], l]));
    assert.deepEqual(
      ids.filter((id) => !byId.has(id)),
      [],
      edge.out(),
    );
    const ok = byId.get(ids[0])!;
    assert.equal(ok['level'], 30, "pino's numeric level for info");
    assert.equal(ok['msg'], 'request');
    assert.equal(ok['route'], '/.well-known/oauth-protected-resource');
    assert.equal(ok['status'], 200);
    assert.equal(typeof ok['duration_ms'], 'number');
    assert.match(String(ok['time']), /^\d{4}-\d\d-\d\dT.*Z$/);
    assert.equal(ok['principal_id'], null);
    const refused = byId.get(ids[1])!;
    assert.equal(refused['status'], 401);
    assert.equal(refused['method'], 'GET');
    assert.ok(!`${edge.out()}${edge.err()}`.includes('svck_live_'), 'a line carries the presented key');

    const quiet = await serve(dir, ['--log-level', 'warn']);
    const q = await fetch(`${quiet.url}/.well-known/oauth-protected-resource`);
    assert.equal(q.status, 200);
    assert.equal(await quiet.stop(), 0);
    assert.ok(!quiet.out().includes(q.headers.get('x-request-id')!), quiet.out());

    const pretty = await serve(dir, ['--log-format', 'pretty']);
    const p = await fetch(`${pretty.url}/.well-known/oauth-protected-resource`);
    assert.equal(await pretty.stop(), 0);
    const id = p.headers.get('x-request-id')!;
    const line = pretty
      .out()
      .split('\n')
      .find((l) => l.includes(id));
    assert.match(
      line ?? pretty.out(),
      new RegExp(`^\\d{4}-\\S+ INFO  request GET /\\.well-known/oauth-protected-resource 200 [\\d.]+ms request_id=${id}$`),
    );

    const bad = spawnSync(EDGE, ['serve', '--data', dir, '--log-level', 'loud'], { encoding: 'utf8' });
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /--log-level must be one of debug, info, warn, error/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
