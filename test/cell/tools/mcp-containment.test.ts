// Containment of the catalog's sources (docs/security.md): a narrow key cannot register a source, re-pin
// or change one; a caller with the catalog permission still cannot change a source whose tools reach
// agents beyond it (shared_change_exceeds_caller), nor send a secret it has no right to (secret_not_usable);
// nobody reaches an imported tool outside their grant (a `single` job of the tool is within the caller,
// and acts with the requester's own identity). Every refusal writes nothing and is audited where the
// rule says so.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { InProcess } from '../../helpers/inproc.ts';
import { jobEnded, mcpCell, SOURCES as S } from '../../helpers/mcp.ts';
import { A, ok, T, type Api } from '../../helpers/teams.ts';

async function keyOf(t: InProcess, name: string, roles: string[], authority: Record<string, unknown>, scopes?: string[]) {
  const api: Api = { request: t.request, token: t.adminKey };
  const p = await ok(api, 'POST', `${A}/principals`, { kind: 'service', name, roles, authority });
  const k = await ok(api, 'POST', `${A}/api-keys`, { name, owner_id: p.id, ...(scopes ? { scopes } : {}) });
  return { id: p.id as string, key: k.secret as string };
}

test('a narrow key cannot register, change or re-pin a source; a change reaching wider agents is refused', {
  timeout: 120_000,
}, async () => {
  const { t, mcp, api, close } = await mcpCell();
  try {
    const src = await ok(api, 'POST', S, { name: 'crm', url: mcp.url }, [201]);
    const review = await ok(api, 'GET', `${S}/${src.source_id}/review`);
    const lookupPin = review.tools.find((x: { tool: string }) => x.tool === 'lookup').live_pin as string;
    // The owner's wide agent is granted the tool.
    await ok(api, 'POST', `${T}/agents`, {
      source: 'scratch',
      role_label: 'wide',
      authority_template: { allowed_tools: ['mcp.crm.lookup', 'calc'], clearance_level: 3, egress_allowlist: [mcp.origin] },
    });
    // What the refusals must leave as it was: every source (its description and time aside, changed below) and every pin.
    const state = async () =>
      JSON.stringify(
        (await t.rows('SELECT * FROM tool_sources ORDER BY source_id')).map(({ description: _d, updated_at: _u, ...rest }) => rest),
      ) + JSON.stringify(await t.rows('SELECT * FROM tool_pins ORDER BY name'));
    const before = await state();

    // A key scoped to reading the catalog: no registration, no change, no re-pin (403 before anything).
    const reader = await keyOf(t, 'reader', ['admin'], {}, ['catalog.read']);
    for (const [method, path, body] of [
      ['POST', S, { name: 'evil', url: mcp.url }],
      ['PATCH', `${S}/${src.source_id}`, { definition_max_age_ms: 3_600_000 }],
      ['POST', `${S}/${src.source_id}/pins`, { pins: { lookup: lookupPin } }],
      ['DELETE', `${S}/${src.source_id}`, undefined],
    ] as const) {
      const r = await t.request(method, path, { token: reader.key, ...(body ? { body } : {}) });
      assert.equal(r.status, 403, `${method} ${path}: ${r.text}`);
      assert.equal(r.body.details.required_permission, 'catalog.sources.write');
    }
    assert.equal((await t.request('GET', `${S}/${src.source_id}/review`, { token: reader.key })).status, 200, 'reading is catalog.read');

    // A catalog administrator whose authority does not cover the wide agent: its change reaches it, refused.
    const narrow = await keyOf(t, 'narrow-admin', ['operator'], { allowed_tools: ['mcp.crm.lookup'], clearance_level: 0 });
    for (const [method, path, body] of [
      ['PATCH', `${S}/${src.source_id}`, { definition_max_age_ms: 3_600_000 }],
      ['POST', `${S}/${src.source_id}/pins`, { pins: { lookup: lookupPin } }],
    ] as const) {
      const r = await t.request(method, path, { token: narrow.key, body });
      assert.equal(r.status, 403, `${method} ${path}: ${r.text}`);
      assert.equal(r.body.details.reason, 'shared_change_exceeds_caller');
      assert.equal(r.body.details.reaches.length, 1);
    }
    // Its description changes nothing an agent does.
    assert.equal((await t.request('PATCH', `${S}/${src.source_id}`, { token: narrow.key, body: { description: 'crm' } })).status, 200);
    const audit = await ok(api, 'GET', `${A}/audit?limit=200`);
    assert.ok(
      audit.entries.some((e: { action: string; outcome: string }) => e.action === 'catalog.source.repin' && e.outcome === 'refused'),
    );

    // The owner's secret cannot be sent by a caller without the right to it.
    const secret = await ok(api, 'POST', `${A}/secrets`, { name: 'crm', value: 'client-secret' });
    const r = await t.request('POST', S, {
      token: narrow.key,
      body: {
        name: 'other',
        url: mcp.url,
        auth: { type: 'client_credentials', token_endpoint: `${mcp.origin}/token`, client_id: 'c', client_secret_id: secret.secret_id },
      },
    });
    assert.equal(r.status, 403, r.text);
    assert.equal(r.body.details.reason, 'secret_not_usable');
    assert.equal(await state(), before, 'refusals wrote nothing');
  } finally {
    await close();
  }
});

test('an imported tool outside the caller is not reached: single jobs and authorities are bounded by the caller', {
  timeout: 120_000,
}, async () => {
  const { t, mcp, api, close } = await mcpCell();
  try {
    await ok(api, 'POST', S, { name: 'crm', url: mcp.url }, [201]);
    const narrow = await keyOf(t, 'narrow', ['operator'], { allowed_tools: ['mcp.crm.lookup'], egress_allowlist: [mcp.origin] });
    // A `single` job of a tool outside the caller's ceiling: refused at submit, nothing called.
    const single = (tool: string) => ({
      job_type: 'single',
      workspace_id: 'w',
      spec: { tool, args: { id: '1', text: 'x' }, authority: { egress_allowlist: [mcp.origin] } },
    });
    const r = await t.request('POST', `${A}/jobs/runs`, { token: narrow.key, body: single('mcp.crm.note') });
    assert.equal(r.status, 403, r.text);
    assert.equal(r.body.details.reason, 'wider_than_caller');
    // An agent granted a tool the caller lacks: refused at authoring.
    const a = await t.request('POST', `${T}/agents`, {
      token: narrow.key,
      body: { source: 'scratch', role_label: 'x', authority_template: { allowed_tools: ['mcp.crm.note'] } },
    });
    assert.equal(a.status, 403, a.text);
    assert.equal(mcp.calls.length, 0);
    // Within the caller, the job runs; the server sees no credential of the caller (the source asks for none).
    const okRun = await ok({ request: t.request, token: narrow.key }, 'POST', `${A}/jobs/runs`, single('mcp.crm.lookup'));
    const v = await jobEnded(api, okRun.run_id);
    assert.equal(v.state, 'completed', JSON.stringify(v));
    assert.deepEqual(
      mcp.calls.map((c) => c.tool),
      ['lookup'],
    );
    assert.ok(mcp.requests.every((x) => x.authorization === undefined));
  } finally {
    await close();
  }
});
