// The edge's durable DPoP replay cache (edge/replay-log.ts): a proof seen before a restart stays a
// replay after it while it could still pass the freshness check; torn tails and expired entries are
// dropped; concurrent proofs share one write; a log that cannot be written refuses (fail closed).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, appendFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DurableReplayCache, REPLAY_LOG } from '../../edge/replay-log.ts';
import { isServiceError } from '../../core/errors.ts';

const NOW = Date.UTC(2026, 0, 1);

function dir(): string {
  return mkdtempSync(join(tmpdir(), 'edge-replay-'));
}

test('an entry remembered before a restart is a replay after it, until it expires', async () => {
  const d = dir();
  try {
    const a = await DurableReplayCache.open(d, NOW);
    assert.equal(await a.remember('jkt:jti-1', NOW + 61_000, NOW), true);
    assert.equal(await a.remember('jkt:jti-1', NOW + 61_000, NOW), false, 'replay in the same process');
    // No close: as after kill -9, only what was fsync'd counts.
    const b = await DurableReplayCache.open(d, NOW + 30_000);
    assert.equal(await b.remember('jkt:jti-1', NOW + 61_000, NOW + 30_000), false, 'replay after a restart');
    assert.equal(await b.remember('jkt:jti-2', NOW + 91_000, NOW + 30_000), true);
    await a.close();
    await b.close();
    const c = await DurableReplayCache.open(d, NOW + 62_000);
    assert.equal(c.size, 1, 'the expired entry was dropped, the live one kept');
    assert.equal(readFileSync(join(d, REPLAY_LOG), 'utf8'), `[${NOW + 91_000},"jkt:jti-2"]\n`, 'rewritten with the live entries only');
    assert.equal(await c.remember('jkt:jti-1', NOW + 122_000, NOW + 62_000), true, 'expired: a proof that old fails the iat check anyway');
    await c.close();
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});

test('a torn tail and a corrupt line are ignored; keys with newlines or quotes round-trip', async () => {
  const d = dir();
  try {
    const odd = 'jkt:"quoted"\nnew-line';
    const a = await DurableReplayCache.open(d, NOW);
    assert.equal(await a.remember(odd, NOW + 60_000, NOW), true);
    await a.close();
    appendFileSync(join(d, REPLAY_LOG), 'not json\n[' + (NOW + 60_000) + ',"jkt:torn');
    const b = await DurableReplayCache.open(d, NOW);
    assert.equal(b.size, 1);
    assert.equal(await b.remember(odd, NOW + 60_000, NOW), false);
    assert.equal(await b.remember('jkt:torn', NOW + 60_000, NOW), true, 'the torn line was never acknowledged');
    await b.close();
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});

test('concurrent proofs are all made durable (group commit) before they are acknowledged', async () => {
  const d = dir();
  try {
    const a = await DurableReplayCache.open(d, NOW);
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => a.remember(`jkt:${i}`, NOW + 60_000, NOW)));
    assert.ok(results.every((r) => r === true));
    assert.equal(readFileSync(join(d, REPLAY_LOG), 'utf8').split('\n').filter(Boolean).length, 200);
    await a.close();
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});

test('a log that cannot be written refuses the proof with 503 replay_cache_unavailable', async () => {
  const d = dir();
  try {
    const a = await DurableReplayCache.open(d, NOW);
    await a.close();
    await assert.rejects(
      Promise.resolve(a.remember('jkt:x', NOW + 60_000, NOW)),
      (e) => isServiceError(e) && e.code === 'service_unavailable' && e.details?.['reason'] === 'replay_cache_unavailable',
    );
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});

test('an unreadable log refuses to start rather than forget what was seen', async () => {
  const d = dir();
  try {
    mkdirSync(join(d, REPLAY_LOG));
    await assert.rejects(DurableReplayCache.open(d, NOW), /refusing to start/);
    rmSync(join(d, REPLAY_LOG), { recursive: true });
    writeFileSync(join(d, REPLAY_LOG), '');
    const a = await DurableReplayCache.open(d, NOW);
    assert.equal(a.size, 0);
    await a.close();
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});
