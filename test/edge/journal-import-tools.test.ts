// A device run that called a device tool (edge/tools.ts) is carried back and imported by the cell: the journal
// replays on the graph the cell carried, its tool step included, and the import stores it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inProcessCell } from '../helpers/inproc.ts';
import { generateEd25519, signerFromJwk } from '../../bundles/codec.ts';
import type { ModelPort } from '../../core/engine/types.ts';
import { deviceToolsPort } from '../../edge/tools.ts';
import { crewOnDevice, deviceRun, exportRun } from './_device-run.ts';

const A = '/api/public/v1/admin';

/** A scripted model that calls clock.now on its first round, then answers. */
const clockModel: ModelPort = {
  async complete(req) {
    const called = req.messages.some((m) => m.role === 'tool');
    if (!called && req.tools.some((t) => t.name === 'clock.now'))
      return {
        content: '',
        tool_calls: [{ id: 'call_0', name: 'clock.now', arguments: {} }],
        usage: { input_tokens: 3, output_tokens: 4 },
      };
    return { content: `${req.agent.seat} read the clock`, usage: { input_tokens: 3, output_tokens: 4 } };
  },
};

test('a device run with a device tool call imports at the cell', async () => {
  const t = await inProcessCell();
  const dir = mkdtempSync(join(tmpdir(), 'edge-import-tools-'));
  try {
    const k = await generateEd25519();
    const reg = await t.request('POST', `${A}/edge/devices`, { token: t.adminKey, body: { name: 'field', public_jwk: k.publicJwk } });
    assert.equal(reg.status, 201, reg.text);
    const signer = signerFromJwk(k.kid, k.privateJwk);
    const d = await crewOnDevice(t, k.kid, reg.body.trust.keys, {
      allowed_tools: ['clock.now'],
      permission_mode: 'auto',
      clearance_level: 0,
    });
    assert.ok(d.workspaceId, 'the crew bundle names the crew workspace');
    const r = await deviceRun(signer, d.graph, d.graphHash, {
      model: clockModel,
      tools: deviceToolsPort(dir, { now: () => 1_767_225_600_000 }, d.workspaceId),
    });
    assert.equal(r.result.outcome, 'completed', JSON.stringify(r.result));
    assert.ok(
      r.records.some((x) => x.kind === 'step' && x.data?.['tool'] === 'clock.now'),
      'the tool call is journaled',
    );
    const imported = await t.request('POST', `${A}/edge/journals`, {
      token: t.adminKey,
      rawBody: await exportRun(signer, r, { crewId: d.crewId }),
      headers: { 'content-type': 'application/vnd.agent-cell.signed' },
    });
    assert.equal(imported.status, 201, imported.text);
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await t.close();
  }
});
