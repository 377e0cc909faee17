/**
 * Compartments on workspace data: kv.put labels an entry only with
 * compartments the writer holds; kv.get refuses an entry whose compartments
 * the reader does not all hold (reason compartment_not_granted), and in a crew
 * run that refusal ends the run refused with a `refusal` journal record.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { ToolCaller } from '../../../cell/tools/catalog.ts';
import { isServiceError } from '../../../core/errors.ts';
import type { FakeOpenAI } from '../../fixtures/openai-server.ts';
import type { InProcess } from '../../helpers/inproc.ts';
import { T, ok, team, type Api, crewFixture } from '../../helpers/teams.ts';

let t: InProcess;
let ai: FakeOpenAI;
let api: Api;
before(async () => {
  ({ t, ai, api } = await crewFixture());
});
after(async () => {
  await t.close();
  await ai.close();
});

const ctx = (compartments: string[] | undefined, workspaceId = 'ws-c'): ToolCaller => ({
  workspaceId,
  agentId: 'agt_test',
  authority: { egress_allowlist: ['kv:*'], data_grant_ids: ['kv:*'], clearance_level: 0, ...(compartments ? { compartments } : {}) },
});
/** A catalog tool, run through the tools module's API. */
const getTool = (name: string) => ({
  run: (caller: ToolCaller, args: Record<string, unknown>) => t.modules.tools.tools.run(name, caller, args),
});
const settled = (runId: string) => t.modules.teams.teams.settled(runId);
const refusedWith = (reason: string) => (e: unknown) => isServiceError(e) && e.code === 'forbidden' && e.details?.['reason'] === reason;

test('kv.put labels an entry only with compartments the writer holds', async () => {
  const put = getTool('kv.put');
  await assert.rejects(
    put.run(ctx(['alpha']), { key: 'p1', value: 1, compartments: ['alpha', 'bravo'] }),
    (e: unknown) => refusedWith('compartment_not_granted')(e) && JSON.stringify((e as { details: unknown }).details).includes('bravo'),
  );
  await assert.rejects(put.run(ctx(undefined), { key: 'p1', value: 1, compartments: ['alpha'] }), refusedWith('compartment_not_granted'));
  assert.equal(await t.row('SELECT 1 AS x FROM tool_kv WHERE key = ?', ['p1']), undefined, 'a refused write stores nothing');
  assert.deepEqual(await put.run(ctx(['bravo', 'alpha']), { key: 'p1', value: 1, compartments: ['bravo', 'alpha', 'alpha'] }), {
    ok: true,
    key: 'p1',
    compartments: ['alpha', 'bravo'],
  });
  const row = await t.row('SELECT compartments FROM tool_kv WHERE workspace_id = ? AND key = ?', ['ws-c', 'p1']);
  assert.equal(row?.['compartments'], '["alpha","bravo"]');
  // Bad labels are bad arguments, not refusals.
  await assert.rejects(
    put.run(ctx(['alpha']), { key: 'p2', value: 1, compartments: 'alpha' }),
    (e: unknown) => isServiceError(e) && e.code === 'invalid_request',
  );
  await assert.rejects(
    put.run(ctx(['alpha']), { key: 'p2', value: 1, compartments: ['bad label!'] }),
    (e: unknown) => isServiceError(e) && e.code === 'invalid_request',
  );
  // A writer lacking the labels of an existing entry cannot overwrite (erase or relabel) it.
  await assert.rejects(put.run(ctx(['alpha']), { key: 'p1', value: 2 }), refusedWith('compartment_not_granted'));
  assert.deepEqual(await put.run(ctx(['alpha', 'bravo']), { key: 'p1', value: 3, compartments: ['alpha'] }), {
    ok: true,
    key: 'p1',
    compartments: ['alpha'],
  });
});

test('kv.get refuses an entry unless the reader holds every one of its compartments', async () => {
  const put = getTool('kv.put');
  const get = getTool('kv.get');
  await put.run(ctx(['alpha', 'bravo']), { key: 'g1', value: 'need-to-know', compartments: ['alpha', 'bravo'] });
  await put.run(ctx(undefined), { key: 'g2', value: 'open' });
  await assert.rejects(get.run(ctx(undefined), { key: 'g1' }), refusedWith('compartment_not_granted'));
  await assert.rejects(
    get.run(ctx(['alpha']), { key: 'g1' }),
    (e: unknown) =>
      refusedWith('compartment_not_granted')(e) &&
      JSON.stringify((e as { details: { missing_compartments: unknown } }).details.missing_compartments) === '["bravo"]',
  );
  assert.deepEqual(await get.run(ctx(['alpha', 'bravo']), { key: 'g1' }), { found: true, value: 'need-to-know' });
  assert.deepEqual(await get.run(ctx(['alpha', 'bravo', 'charlie']), { key: 'g1' }), { found: true, value: 'need-to-know' });
  // Unlabelled entries need no compartment; a labelled-seat reads them too.
  assert.deepEqual(await get.run(ctx(undefined), { key: 'g2' }), { found: true, value: 'open' });
  assert.deepEqual(await get.run(ctx(['alpha']), { key: 'g2' }), { found: true, value: 'open' });
});

test('in a crew run: a labelled write by one seat, refused read by a seat lacking the compartment (refusal record), allowed read by one holding it', async () => {
  const base = {
    allowed_tools: ['kv.get', 'kv.put'],
    permission_mode: 'auto',
    clearance_level: 0,
    egress_allowlist: ['kv:*'],
    data_grant_ids: ['kv:*'],
  };
  const withC = { ...base, compartments: ['ops'] };
  ai.setResponder((req) => {
    const last = req.messages.at(-1)!;
    if (last.role === 'tool') return { content: `tool said ${last.content}` };
    const sys = req.messages.find((m) => m.role === 'system')?.content ?? '';
    if (sys.includes('ROLE:writer'))
      return { tool_calls: [{ name: 'kv__put', arguments: { key: 'plan', value: 'launch at dawn', compartments: ['ops'] } }] };
    return { tool_calls: [{ name: 'kv__get', arguments: { key: 'plan' } }] };
  });
  const write = await team(api, 'sequential', [{ role: 'writer', cap: withC }], { workspace_id: 'ws-run' });
  const w = await ok(api, 'POST', `${T}/crews/${write.crew}/runs`, { input: 'store the plan' });
  await settled(w.run_id);
  const ws = await ok(api, 'GET', `${T}/crews/${write.crew}/runs/${w.run_id}`);
  assert.equal(ws.state, 'completed', JSON.stringify(ws.error));
  assert.equal(
    (await t.row('SELECT compartments FROM tool_kv WHERE workspace_id = ? AND key = ?', ['ws-run', 'plan']))?.['compartments'],
    '["ops"]',
  );

  const outsider = await team(api, 'sequential', [{ role: 'reader', cap: base }], { workspace_id: 'ws-run' });
  const r = await ok(api, 'POST', `${T}/crews/${outsider.crew}/runs`, { input: 'read the plan' });
  await settled(r.run_id);
  const rs = await ok(api, 'GET', `${T}/crews/${outsider.crew}/runs/${r.run_id}`);
  assert.equal(rs.state, 'refused');
  assert.equal(rs.error.reason, 'compartment_not_granted');
  const refusal = (await t.modules.runs.runs.readJournal(r.run_id)).find((x) => x.kind === 'refusal');
  assert.ok(refusal, 'a refusal journal record');
  assert.equal((refusal!.data as any).reason, 'compartment_not_granted');
  assert.equal((refusal!.data as any).tool, 'kv.get');
  assert.deepEqual((refusal!.data as any).missing_compartments, ['ops']);
  assert.ok(!JSON.stringify(rs).includes('launch at dawn'), 'the refused value never reaches the run');

  const insider = await team(api, 'sequential', [{ role: 'reader', cap: withC }], { workspace_id: 'ws-run' });
  const r2 = await ok(api, 'POST', `${T}/crews/${insider.crew}/runs`, { input: 'read the plan' });
  await settled(r2.run_id);
  const rs2 = await ok(api, 'GET', `${T}/crews/${insider.crew}/runs/${r2.run_id}`);
  assert.equal(rs2.state, 'completed', JSON.stringify(rs2.error));
  assert.match(String(rs2.output), /launch at dawn/);
});
