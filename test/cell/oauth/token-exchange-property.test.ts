// Property (fast-check) of the token exchange: no exchanged token is ever wider than any link of its
// chain. Random principals (custom roles over random selectors, random envelope ceilings) form chains
// of 1-3 hops through clients with random registered scopes, each hop asking a random scope; every
// token issued, and what the bearer path lets it do (whoami), stays within the subject token, every
// actor, every client and every earlier token of its chain, in permissions and in envelope.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { contains, type Holding } from '../../../core/authority/contain.ts';
import type { AuthorityEnvelope } from '../../../core/authority/envelope.ts';
import { normalize } from '../../../core/authority/scopes.ts';
import { inProcessCell } from '../../helpers/inproc.ts';
import { ACCESS_TOKEN_TYPE, basic, claimsOf, form, TOKEN_EXCHANGE } from '../../helpers/oauth.ts';

const A = '/api/public/v1/admin';
const SELECTORS = ['edge.read', 'audit.read', 'oauth.clients.read', 'iam.keys.read', 'catalog.read', 'iam', 'oauth', 'edge'];
const sub = (xs: readonly string[]) => fc.subarray([...xs], { minLength: 1 });
const envelopeArb = fc.record(
  {
    allowed_tools: fc.subarray(['calc', 'kv.get', 'http.get']),
    clearance_level: fc.integer({ min: 0, max: 3 }),
    permission_mode: fc.constantFrom('plan', 'ask', 'auto-read', 'auto'),
    compartments: fc.subarray(['a', 'b']),
  },
  { requiredKeys: [] },
) as fc.Arbitrary<AuthorityEnvelope>;
const partyArb = fc.record({
  perms: sub(SELECTORS),
  ceiling: envelopeArb,
  clientScope: sub(SELECTORS),
  ask: fc.option(sub(SELECTORS), { nil: undefined }),
});

function within(holder: Holding, grant: { permissions?: readonly string[]; envelope?: unknown }, what: string) {
  const v = contains(holder, grant as never);
  assert.ok(v.ok, `${what}: ${JSON.stringify(v)} holder ${JSON.stringify(holder)} grant ${JSON.stringify(grant)}`);
}

test('no exchanged token is ever wider than any link of its chain', async () => {
  const t = await inProcessCell({ config: { rate: { capacity: 1e9, refillPerSecond: 1e9 } } });
  let n = 0;
  let issued = 0;
  try {
    const ok = async (method: string, path: string, body: unknown) => {
      const r = await t.request(method, path, { token: t.adminKey, body });
      assert.ok(r.status < 300, `${path}: ${r.status} ${r.text}`);
      return r.body;
    };
    const party = async (p: { perms: string[]; ceiling: AuthorityEnvelope; clientScope: string[] }, grants: string[]) => {
      const i = ++n;
      await ok('POST', `${A}/roles`, { name: `prop-${i}`, permissions: p.perms });
      const pr = await ok('POST', `${A}/principals`, { kind: 'service', name: `prop-${i}`, roles: [`prop-${i}`], authority: p.ceiling });
      // A client's scope must be within its subject's permissions: register what both allow.
      const scope = normalize(p.clientScope.filter((s) => p.perms.some((q) => s === q || s.startsWith(`${q}.`))));
      const client = scope.length
        ? await ok('POST', `${A}/oauth/clients`, { name: `c${i}`, scope, subject_id: pr.id, grant_types: grants })
        : null;
      return { id: pr.id as string, holding: { permissions: normalize(p.perms), envelope: p.ceiling } as Holding, client, scope };
    };
    // Random parties often cannot form a chain (no client, a refused scope); the property runs in
    // rounds until enough exchanges were issued, so its coverage does not depend on luck.
    const property = fc.asyncProperty(partyArb, fc.array(partyArb, { minLength: 1, maxLength: 3 }), async (s, hopsArb) => {
      const subject = await party(s, ['client_credentials']);
      if (!subject.client) return;
      const st = await form(
        t,
        '/oauth/token',
        { grant_type: 'client_credentials' },
        basic(subject.client.client_id, subject.client.client_secret),
      );
      if (st.status !== 200) return;
      const links: Holding[] = [subject.holding, { permissions: subject.scope, envelope: subject.holding.envelope }];
      let token: string = st.body.access_token;
      for (const h of hopsArb) {
        const actor = await party(h, [TOKEN_EXCHANGE]);
        if (!actor.client) return;
        const r = await form(
          t,
          '/oauth/token',
          {
            grant_type: TOKEN_EXCHANGE,
            subject_token: token,
            subject_token_type: ACCESS_TOKEN_TYPE,
            audience: `${t.modules.oauth.api.publicBase()}/api/public/v1`,
            ...(h.ask ? { scope: h.ask.join(' ') } : {}),
          },
          basic(actor.client.client_id, actor.client.client_secret),
        );
        assert.ok(r.status === 200 || r.body?.error === 'invalid_scope', r.text);
        if (r.status !== 200) return;
        issued++;
        const prev = { permissions: claimsOf(token).scope.split(' '), envelope: 'unbounded' as const };
        links.push(actor.holding, { permissions: actor.scope, envelope: actor.holding.envelope }, prev);
        token = r.body.access_token;
        const scope = claimsOf(token).scope.split(' ');
        const who = await t.request('GET', `${A}/whoami`, { token });
        assert.equal(who.status, 200, who.text);
        for (const [i, link] of links.entries()) {
          within(link, { permissions: scope }, `issued scope vs link ${i}`);
          within(
            link,
            { permissions: who.body.effective_permissions, envelope: link.envelope === 'unbounded' ? undefined : who.body.authority },
            `at use vs link ${i}`,
          );
        }
      }
    });
    for (let round = 0; round < 8 && issued < 12; round++) await fc.assert(property, { numRuns: 25 });
    assert.ok(issued >= 12, `exchanges issued: ${issued}`);
  } finally {
    await t.close();
  }
});
