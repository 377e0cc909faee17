// Property: an issued scope is never wider than what was requested nor than any cap, and empty is refused.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { selectorsSubset } from '../../../core/authority/scopes.ts';
import { narrowScope, parseScope } from '../../../cell/oauth/scope.ts';
import { isOAuthError } from '../../../cell/oauth/oauth-error.ts';

const names = [
  'iam',
  'iam.keys',
  'iam.keys.read',
  'iam.keys.write',
  'audit',
  'audit.read',
  'agent_teams',
  'agent_teams.read',
  'oauth.clients.read',
  '*',
];
const sel = fc.array(fc.constantFrom(...names), { minLength: 0, maxLength: 5 });

test('narrowScope is never wider than the request or any cap', () => {
  fc.assert(
    fc.property(sel, sel, sel, (req, capA, capB) => {
      let out: string[];
      try {
        out = narrowScope(req.length ? req : null, capA, capB);
      } catch (e) {
        assert.ok(isOAuthError(e) && e.error === 'invalid_scope');
        return;
      }
      assert.ok(out.length > 0);
      if (req.length) assert.ok(selectorsSubset(out, req), `${out} within request ${req}`);
      assert.ok(selectorsSubset(out, capA), `${out} within ${capA}`);
      assert.ok(selectorsSubset(out, capB), `${out} within ${capB}`);
    }),
    { numRuns: 500, seed: 7 },
  );
});

test('parseScope: space-separated selectors; anything else is invalid_scope', () => {
  assert.deepEqual(parseScope('audit.read  iam.keys'), ['audit.read', 'iam.keys']);
  assert.equal(parseScope(''), null);
  assert.equal(parseScope(undefined), null);
  for (const bad of ['Audit', 'a..b', 'openid profile!', 'x.']) {
    assert.throws(
      () => parseScope(bad),
      (e: unknown) => isOAuthError(e) && e.error === 'invalid_scope',
    );
  }
});
