/**
 * Issue 36, finding 13: a member whose clock is 40 s ahead stood down (not
 * ready, no takeovers, no fires) yet still pruned the group's DPoP replay
 * records by its own clock, dropping records the others still needed: 9 of 11
 * proofs already used on one cell were then accepted again on another.
 *
 * Here one cell runs 40 s ahead (libfaketime) behind the group's one public
 * URL. Proofs are used on cell-a, a batch every 2 s, long enough that one of
 * the skewed cell's prunes (every minute) would fall between the moment its
 * clock calls a record expired and the proof's replay, and each is replayed
 * on cell-c 50 s after it was made (still fresh: the window is 60 s). A stood-down member makes no background writes, and every
 * member prunes by the database's clock: every replay is refused
 * (`dpop_replay`).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { OAUTH } from '../../../../cell/oauth/settings.ts';
import { accessTokenHash } from '../../../../core/tokens/ath.ts';
import { call, ok } from '../../../helpers/group.ts';
import { NO_FAKETIME, SKIP, faketime, sleep, startFaultGroup, until } from './_group.ts';

const PUBLIC = 'http://group.example';
const A = '/api/public/v1/admin';
const PATH = `${A}/audit?limit=1`;
/** How old a proof is when it is replayed on another cell: past what a 40 s lead would prune early, within the 60 s window. */
const REPLAY_AT_MS = 50_000;
const BATCH = 3;

test('a member 40 s ahead stands down and prunes nothing; no used DPoP proof passes again on another cell', {
  skip: SKIP || NO_FAKETIME,
  timeout: 300_000,
}, async () => {
  const g = await startFaultGroup({
    env: (i) => (i === 1 ? faketime('+40s') : {}),
    args: () => ['--public-url', PUBLIC],
    cron: false,
  });
  try {
    const [a, b, c] = g.cells as [(typeof g.cells)[0], (typeof g.cells)[0], (typeof g.cells)[0]];
    await until(
      'the cell 40 s ahead to stand down',
      async () => {
        const r = await call(b.url, 'GET', '/readyz');
        return r.status === 503 && r.body?.details?.checks?.member === 'clock_skew';
      },
      15_000,
    );

    // A service client, and a DPoP-bound token for it.
    const svc = await ok(a.url, 'POST', `${A}/principals`, {
      token: g.token,
      body: { kind: 'service', name: 'dpop-svc', roles: ['viewer'] },
    });
    const client = await ok(a.url, 'POST', `${A}/oauth/clients`, {
      token: g.token,
      body: { name: 'dpop', scope: ['audit.read'], subject_id: svc.id },
    });
    const basic = `Basic ${Buffer.from(`${encodeURIComponent(client.client_id)}:${encodeURIComponent(client.client_secret)}`).toString('base64')}`;
    const kp = await generateKeyPair('Ed25519');
    const key: { privateKey: CryptoKey; jwk: JWK } = { privateKey: kp.privateKey, jwk: await exportJWK(kp.publicKey) };
    const proof = (htm: string, htu: string, extra: Record<string, unknown> = {}) =>
      new SignJWT({ htm, htu, iat: Math.floor(Date.now() / 1000), jti: crypto.randomUUID(), ...extra })
        .setProtectedHeader({ alg: 'EdDSA', typ: 'dpop+jwt', jwk: key.jwk })
        .sign(key.privateKey);
    const tok = await call(a.url, 'POST', '/oauth/token', {
      form: { grant_type: 'client_credentials' },
      headers: { authorization: basic, dpop: await proof('POST', `${PUBLIC}/oauth/token`) },
    });
    assert.equal(tok.status, 200, tok.text);
    const token = tok.body.access_token as string;
    const ath = await accessTokenHash(token);

    // By its own clock, the cell 40 s ahead would drop a record once its proof is `earliest` old (its record lasts the
    // 60 s window plus a second). A proof used at t is exposed when one of its prunes (every interval) falls between
    // t + earliest and its replay at t + REPLAY_AT_MS: proofs used over `sendFor` expose an interval's worth of prunes.
    const skewMs = 40_000;
    const earliest = OAUTH.dpopWindow.pastSeconds * 1000 + 1000 - skewMs;
    const sendFor = OAUTH.proofPruneIntervalMs - (REPLAY_AT_MS - earliest) + 5_000;
    const used: { at: number; proof: string; replayed?: number }[] = [];
    const started = Date.now();
    while (Date.now() - started < sendFor || used.some((u) => u.replayed === undefined)) {
      if (Date.now() - started < sendFor) {
        for (let i = 0; i < BATCH; i++) {
          const p = await proof('GET', PUBLIC + PATH, { ath });
          const r = await call(a.url, 'GET', PATH, { token, scheme: 'DPoP', headers: { dpop: p } });
          assert.equal(r.status, 200, r.text);
          used.push({ at: Date.now(), proof: p });
        }
      }
      for (const u of used) {
        if (u.replayed !== undefined || Date.now() - u.at < REPLAY_AT_MS) continue;
        const r = await call(c.url, 'GET', PATH, { token, scheme: 'DPoP', headers: { dpop: u.proof } });
        u.replayed = r.status;
        if (r.status === 401) assert.equal(r.body.details.reason, 'dpop_replay', r.text);
      }
      await sleep(2000);
    }
    const accepted = used.filter((u) => u.replayed === 200).length;
    console.log(`# fault dpop-prune: ${JSON.stringify({ used: used.length, accepted_again: accepted, send_ms: sendFor })}`);
    assert.equal(accepted, 0, `${accepted} of ${used.length} used proofs were accepted again on another cell`);
    // The skewed cell still stands down (the scenario held the whole time).
    assert.equal((await call(b.url, 'GET', '/readyz')).body?.details?.checks?.member, 'clock_skew');
  } finally {
    await g.stop();
  }
});
