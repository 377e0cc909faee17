// Security round 3, finding 10: two cells rotating one API key at the same
// instant both answered 200 with different secrets, and one of them never
// worked (a lost update: each wrote its hash over the same previous one). A
// rotation now replaces the hash only if it is still the one it read; the
// loser gets 409 conflict and nothing is written. Two real cell processes on
// one PostgreSQL database, rotates sent to both at once, many rounds.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { pgUnavailable } from '../helpers/postgres.ts';
import { call, ok, startGroup, type Group } from '../helpers/group.ts';

const skip = pgUnavailable() ?? false;
const A = '/api/public/v1/admin';

describe('one key rotated on two cells at once', { skip, timeout: 180_000 }, () => {
  let g: Group;
  before(async () => {
    g = await startGroup(2);
  });
  after(async () => {
    await g?.stop();
  });

  const works = async (secret: string) =>
    (await call(g.cells[0]!.url, 'GET', `${A}/whoami`, { token: secret })).status === 200 &&
    (await call(g.cells[1]!.url, 'GET', `${A}/whoami`, { token: secret })).status === 200;

  test('exactly one 200 when they race, the other 409 conflict; every secret answered works', async () => {
    const key = await ok(g.cells[0]!.url, 'POST', `${A}/api-keys`, { token: g.adminKey, body: { name: 'raced', scopes: ['audit.read'] } });
    let raced = 0;
    for (let round = 0; round < 25; round++) {
      // grace 0: a secret superseded by a later rotation stops, so only a rotation's own outcome decides what works.
      const answers = await Promise.all(
        g.cells.map((c) => call(c.url, 'POST', `${A}/api-keys/${key.key_id}/rotate`, { token: g.adminKey, body: { grace_seconds: 0 } })),
      );
      const statuses = answers.map((a) => a.status).sort();
      const won = answers.filter((a) => a.status === 200);
      if (statuses[0] === 200 && statuses[1] === 409) {
        raced++;
        const lost = answers.find((a) => a.status === 409)!;
        assert.equal(lost.body.error, 'conflict');
        assert.equal(lost.body.details.reason, 'concurrent_rotation');
        assert.equal(lost.body.secret, undefined, 'the loser gets no secret');
        assert.ok(await works(won[0]!.body.secret), "the winner's secret works on both cells");
      } else {
        // They did not overlap: two rotations one after the other, the later one's secret is the key's.
        assert.deepEqual(statuses, [200, 200], answers.map((a) => a.text).join('\n'));
        const later = won.sort((a, b) => String(a.body.rotated_at).localeCompare(String(b.body.rotated_at))).at(-1)!;
        const now = await call(g.cells[0]!.url, 'GET', `${A}/api-keys/${key.key_id}`, { token: g.adminKey });
        assert.equal(now.body.rotated_at, later.body.rotated_at);
        const ok = await Promise.all(won.map((a) => works(a.body.secret)));
        assert.equal(ok.filter(Boolean).length, 1, 'exactly one secret is the key: the one of the later rotation');
      }
    }
    assert.ok(raced > 0, 'at least one round raced (otherwise the test proved nothing)');
  });
});
