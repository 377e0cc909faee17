// Security round 3, finding 11: the consent and device pages showed only the
// client's free-text name, so anyone with oauth.clients.write registered a
// client named like the cell's own console with its own redirect URI. Names of
// built-in clients are refused (409 builtin_client_name), and the consent page
// shows who registered the client and the host the answer goes back to.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { createUser, signIn } from '../../helpers/oauth.ts';
import { actor } from '../../helpers/actors.ts';

const P = '/api/public/v1/admin/oauth/clients';
let t: InProcess;
before(async () => {
  t = await inProcessCell();
});
after(async () => {
  await t.close();
});

test('a client named like a built-in client is refused, however it is spelled; nothing is registered', async () => {
  const builtIn = await t.rows("SELECT name FROM oauth_clients WHERE created_by = 'system'");
  assert.ok(builtIn.length > 0, 'the console registers its built-in client');
  const name = String(builtIn[0]!['name']);
  const mallory = await actor(t, { name: 'mallory', permissions: ['oauth.clients.write', 'audit.read'] });
  const before = (await t.rows('SELECT client_id FROM oauth_clients')).length;
  for (const spelled of [name, name.toUpperCase(), ` ${name.replace(/[^A-Za-z0-9]+/g, '  ')} `, name.replace(/ /g, '-')]) {
    const r = await t.request('POST', P, {
      token: mallory.key,
      body: {
        name: spelled,
        grant_types: ['authorization_code'],
        token_endpoint_auth_method: 'none',
        redirect_uris: ['https://evil.example/cb'],
        scope: ['audit.read'],
      },
    });
    assert.equal(r.status, 409, `${JSON.stringify(spelled)}: ${r.text}`);
    assert.equal(r.body.error, 'conflict');
    assert.equal(r.body.details.reason, 'builtin_client_name');
  }
  assert.equal((await t.rows('SELECT client_id FROM oauth_clients')).length, before, 'nothing registered');
});

test('the consent page names the principal that registered the client and the redirect host', async () => {
  await createUser(t, 'alice', ['viewer']);
  const mallory = await actor(t, { name: 'mallory2', permissions: ['oauth.clients.write', 'audit.read'] });
  const r = await t.request('POST', P, {
    token: mallory.key,
    body: {
      name: 'Operator console',
      grant_types: ['authorization_code'],
      token_endpoint_auth_method: 'none',
      redirect_uris: ['https://evil.example:8443/cb'],
      scope: ['audit.read'],
    },
  });
  assert.equal(r.status, 201, r.text);
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: r.body.client_id,
    redirect_uri: 'https://evil.example:8443/cb',
    scope: 'audit.read',
    state: 's',
    code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
    code_challenge_method: 'S256',
  });
  const url = `/oauth/authorize?${q}`;
  const b = await signIn(t, 'alice', undefined, url);
  const consent = await b.get(url);
  assert.equal(consent.status, 200, consent.text);
  assert.match(consent.text, /<b id="client">Operator console<\/b>/);
  assert.match(consent.text, /Registered by <b id="registrant">mallory2<\/b>/);
  assert.match(consent.text, /<b id="redirect-host">evil\.example:8443<\/b>/);
});
