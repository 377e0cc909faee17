// Bundle files are bounded before they are read (issue 36, low finding: a 400 MiB bundle was read whole
// before its signature was looked at, 884 MB of memory): a file larger than --max-bundle-bytes (default
// 64 MiB) is refused `artifact_too_large` without being read, and a file signed by an untrusted key is
// refused from its header line before the rest is read. Measured as the real program's peak memory
// (/usr/bin/time) and as this process's resident set.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { emptyDeviceState } from '../../bundles/accept.ts';
import { generateEd25519, signerFromJwk } from '../../bundles/codec.ts';
import { buildKeyBundle } from '../../bundles/key-bundle.ts';
import { loadKeyBundle } from '../../edge/load.ts';
import { MAX_BUNDLE_BYTES } from '../../runtime/read-artifact.ts';

const EDGE = 'dist/edge.mjs';
const MiB = 1024 * 1024;

async function world() {
  const dir = mkdtempSync(join(tmpdir(), 'edge-size-'));
  const init = spawnSync(process.execPath, [EDGE, 'init', '--data', dir], { encoding: 'utf8' });
  assert.equal(init.status, 0, init.stderr);
  const deviceId = JSON.parse(init.stdout).device_id as string;
  const cell = await generateEd25519();
  writeFileSync(join(dir, 'anchor.json'), JSON.stringify({ cell_id: 'cell-a', keys: [{ kid: cell.kid, jwk: cell.publicJwk }] }));
  assert.equal(spawnSync(process.execPath, [EDGE, 'trust', '--data', dir, '--file', join(dir, 'anchor.json')]).status, 0);
  const now = Date.now();
  const bundle = await buildKeyBundle({
    issuer: 'cell-a',
    signer: signerFromJwk(cell.kid, cell.privateJwk),
    audience: deviceId,
    version: 1,
    issuedAt: now - 1000,
    expiresAt: now + 3_600_000,
    records: [],
    tombstones: [],
  });
  writeFileSync(join(dir, 'keys.bundle'), bundle);
  return { dir, deviceId, cell, bundle };
}

/** `verify-key` under /usr/bin/time: its verdict and its peak resident memory (KiB). */
function verify(dir: string, bundle: string, extra: string[] = []) {
  const r = spawnSync(
    '/usr/bin/time',
    ['-f', 'maxrss=%M', process.execPath, EDGE, 'verify-key', '--data', dir, '--bundle', bundle, ...extra],
    { encoding: 'utf8', input: `svck_live_${'A'.repeat(43)}` },
  );
  const rss = Number(/maxrss=(\d+)/.exec(r.stderr)?.[1] ?? NaN);
  return { status: r.status, out: r.stdout.trim() ? (JSON.parse(r.stdout) as { reason?: string; message?: string }) : null, rss };
}

const skip = !existsSync(EDGE)
  ? 'dist/edge.mjs missing: run node scripts/build.mjs'
  : !existsSync('/usr/bin/time')
    ? 'no /usr/bin/time'
    : false;

test('a 400 MiB bundle is refused before it is read: artifact_too_large, and the program stays small', { skip }, async () => {
  const w = await world();
  try {
    const big = join(w.dir, 'big.bundle');
    // The real bundle's bytes, then 400 MiB more (a sparse file: nothing is written to the disk).
    writeFileSync(big, w.bundle);
    truncateSync(big, 400 * MiB);
    const refused = verify(w.dir, big);
    assert.equal(refused.status, 3, 'refused by the rules (exit status 3), not a failure to run');
    assert.equal(refused.out?.reason, 'artifact_too_large', JSON.stringify(refused.out));
    const ok = verify(w.dir, join(w.dir, 'keys.bundle'));
    assert.equal(ok.out?.reason, 'unknown_key', 'the real bundle loads');
    assert.ok(
      refused.rss < ok.rss + 64 * 1024,
      `peak memory ${refused.rss} KiB refusing a 400 MiB file, ${ok.rss} KiB loading a small one`,
    );

    // The bound is the operator's: a smaller one refuses the real bundle too.
    const small = verify(w.dir, join(w.dir, 'keys.bundle'), ['--max-bundle-bytes', '100']);
    assert.equal(small.out?.reason, 'artifact_too_large');
    assert.match(small.out?.message ?? '', /more than the 100/);
  } finally {
    rmSync(w.dir, { recursive: true, force: true });
  }
});

test('a bundle signed by a key the device does not trust is refused from its header, before the rest is read', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'edge-size-'));
  try {
    const stranger = await generateEd25519();
    const f = join(dir, 'foreign.bundle');
    writeFileSync(f, `{"format":"agent-cell-signed/1","kid":"${stranger.kid}","signature":"${'A'.repeat(86)}"}\n`);
    appendFileSync(f, '{"payload":"');
    truncateSync(f, MAX_BUNDLE_BYTES - MiB); // under the bound: only the header decides
    const trust = { format_version: 1 as const, cell_id: 'cell-a', keys: [], publishers: [] };
    globalThis.gc?.();
    const before = process.memoryUsage().rss;
    await assert.rejects(loadKeyBundle(f, trust, emptyDeviceState('d'), Date.now()), (e: { details?: { reason?: string } }) => {
      assert.equal(e.details?.reason, 'untrusted_issuer');
      return true;
    });
    const grew = process.memoryUsage().rss - before;
    assert.ok(grew < 24 * MiB, `resident memory grew ${Math.round(grew / MiB)} MiB refusing a ${MAX_BUNDLE_BYTES / MiB - 1} MiB file`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
