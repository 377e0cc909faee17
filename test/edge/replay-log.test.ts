// The edge's DPoP replay cache (edge/replay-log.ts): decided in memory, with a horizon on disk instead
// of a write per proof. After a crash every proof issued up to the last horizon is refused, and the
// start waits for the clock to pass it; after a clean stop exactly the live proofs are refused. Torn
// tails and corrupt lines are dropped, an earlier version's log reads as it was, and a cache that
// cannot write refuses (fail closed).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, appendFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DurableReplayCache, MAX_START_WAIT_MS, REPLAY_LOG } from '../../edge/replay-log.ts';
import { isServiceError } from '../../core/errors.ts';

const NOW = Date.UTC(2026, 0, 1);
const S = NOW / 1000;

function dir(): string {
  return mkdtempSync(join(tmpdir(), 'edge-replay-'));
}
const logOf = (d: string) => readFileSync(join(d, REPLAY_LOG), 'utf8');
const horizons = (d: string) =>
  logOf(d)
    .split('\n')
    .filter((l) => l.startsWith('{"horizon"'))
    .map((l) => (JSON.parse(l) as { horizon: number }).horizon);
/** A proof issued at `iat` (ms): kept until the freshness check would fail, as core's verifyDpopProof asks. */
const proof = (c: DurableReplayCache, key: string, iat: number, now = iat) => c.remember(key, iat + 61_000, now, iat);

test('after a crash, every proof issued up to the last horizon is refused, and later ones are served', async () => {
  const d = dir();
  try {
    const a = await DurableReplayCache.open(d, NOW);
    assert.equal(a.freshFrom, Number.NEGATIVE_INFINITY, 'a new device has nothing to wait for');
    assert.equal(await proof(a, 'jkt:jti-1', NOW), true);
    assert.equal(await proof(a, 'jkt:jti-1', NOW), false, 'replay in the same process');
    const horizon = Math.max(...horizons(d));
    assert.ok(horizon >= S, 'the proof was accepted under a horizon on disk');
    // No close: as after kill -9 or power loss, only what was fdatasync'd counts.
    const b = await DurableReplayCache.open(d, NOW + 1000);
    assert.equal(b.freshFrom, (horizon + 1) * 1000, 'fresh proofs from the second after the horizon');
    assert.equal(await proof(b, 'jkt:jti-1', NOW, NOW + 1000), false, 'the proof seen before the crash is a replay');
    assert.equal(await proof(b, 'jkt:never-seen', horizon * 1000, NOW + 1000), false, 'so is any proof issued up to the horizon');
    assert.equal(await proof(b, 'jkt:jti-2', (horizon + 1) * 1000), true, 'a proof issued after it is served');
    assert.equal(await proof(b, 'jkt:jti-2', (horizon + 1) * 1000), false);
    await a.close();
    await b.close();
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});

test('proofs dated now are served without a disk write each; the horizon moves ahead a second at a time', async () => {
  const d = dir();
  try {
    const a = await DurableReplayCache.open(d, NOW);
    const before = horizons(d).length;
    for (let i = 0; i < 1000; i++) assert.equal(await proof(a, `jkt:${i}`, NOW + i, NOW + i), true);
    assert.ok(horizons(d).length - before <= 1, `1,000 proofs in one second wrote ${horizons(d).length - before} horizons`);
    // Ten seconds of proofs: about one horizon a second, each ahead of the proofs it covers.
    for (let t = 1; t <= 10; t++) await proof(a, `jkt:t${t}`, NOW + t * 1000);
    await a.close();
    const written = horizons(d);
    assert.ok(written.length <= 1, 'a clean stop leaves one horizon line');
    assert.ok(written[0]! >= S + 10);
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});

test('a proof dated past the horizon on disk waits for a horizon that covers it', async () => {
  const d = dir();
  try {
    const a = await DurableReplayCache.open(d, NOW);
    const ahead = NOW + 5000; // within the freshness window's 5 s ahead
    const r = proof(a, 'jkt:ahead', ahead, NOW);
    assert.ok(r instanceof Promise, 'not answered before its horizon is written');
    assert.equal(await r, true);
    assert.ok(Math.max(...horizons(d)) >= ahead / 1000);
    // A crash now: that proof stays refused.
    const b = await DurableReplayCache.open(d, NOW);
    assert.equal(await proof(b, 'jkt:ahead', ahead, NOW), false);
    await a.close();
    await b.close();
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});

test('untilFresh holds the start until the clock passes the horizon a crash left, at most MAX_START_WAIT_MS', async () => {
  const d = dir();
  try {
    const a = await DurableReplayCache.open(d, Date.now());
    void a; // crashed: never closed
    const b = await DurableReplayCache.open(d, Date.now());
    const waited = await b.untilFresh({ now: () => Date.now() });
    assert.ok(Date.now() >= b.freshFrom, 'the clock is past the horizon');
    assert.ok(waited > 0 && waited <= MAX_START_WAIT_MS, `waited ${waited} ms`);
    // A clock far behind the horizon (it went back) is waited for no longer than the bound.
    const behind = { now: () => b.freshFrom - 3_600_000 };
    assert.equal(await b.untilFresh(behind, 0), 0);
    await a.close();
    await b.close();
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});

test('after a clean stop exactly the live proofs are refused, and nothing is waited for', async () => {
  const d = dir();
  try {
    const a = await DurableReplayCache.open(d, NOW);
    assert.equal(await proof(a, 'jkt:jti-1', NOW), true);
    assert.equal(await proof(a, 'jkt:jti-old', NOW - 60_000, NOW), true);
    await a.close(NOW + 30_000);
    assert.match(logOf(d), /\{"closed":true\}\n$/);
    const b = await DurableReplayCache.open(d, NOW + 30_000);
    assert.equal(b.freshFrom, Number.NEGATIVE_INFINITY);
    assert.equal(b.size, 1, 'the expired proof was dropped, the live one kept');
    assert.equal(await proof(b, 'jkt:jti-1', NOW, NOW + 30_000), false, 'a replay after the restart');
    assert.equal(await proof(b, 'jkt:other', NOW, NOW + 30_000), true, 'another proof of the same second is served');
    assert.doesNotMatch(logOf(d), /closed/, 'serving again: a crash from here is judged by the horizon');
    await b.close();
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});

test('a torn tail and a corrupt line are ignored; keys with newlines or quotes round-trip', async () => {
  const d = dir();
  try {
    const odd = 'jkt:"quoted"\nnew-line';
    const a = await DurableReplayCache.open(d, NOW);
    assert.equal(await proof(a, odd, NOW), true);
    await a.close(NOW);
    // A torn closing mark: the stop was not clean after all, so the horizon counts.
    appendFileSync(join(d, REPLAY_LOG), 'not json\n{"clos');
    const b = await DurableReplayCache.open(d, NOW);
    assert.equal(b.size, 1);
    assert.equal(await proof(b, odd, NOW), false);
    assert.notEqual(b.freshFrom, Number.NEGATIVE_INFINITY, 'the last complete line is not the closing mark');
    await b.close();
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});

test("an earlier version's log (a line per proof, each fdatasync'd) is read as it was: exact, nothing to wait for", async () => {
  const d = dir();
  try {
    writeFileSync(join(d, REPLAY_LOG), `[${NOW + 61_000},"jkt:old"]\n[${NOW - 1},"jkt:expired"]\n`);
    const a = await DurableReplayCache.open(d, NOW);
    assert.equal(a.freshFrom, Number.NEGATIVE_INFINITY);
    assert.equal(a.size, 1);
    assert.equal(await proof(a, 'jkt:old', NOW), false);
    assert.equal(await proof(a, 'jkt:new', NOW), true);
    // A crash from here on is covered: the rewritten log carries a horizon.
    const b = await DurableReplayCache.open(d, NOW);
    assert.equal(await proof(b, 'jkt:old', NOW), false);
    assert.equal(await proof(b, 'jkt:new', NOW), false);
    await a.close();
    await b.close();
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});

test('a cache that cannot write refuses the proof with 503 replay_cache_unavailable', async () => {
  const d = dir();
  try {
    const a = await DurableReplayCache.open(d, NOW);
    await a.close();
    await assert.rejects(
      Promise.resolve(proof(a, 'jkt:x', NOW)),
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
