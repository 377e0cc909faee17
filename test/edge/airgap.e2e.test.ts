// The air-gapped path end to end: a real cell mints keys and exports signed bundles, is stopped;
// the real single executable dist/edge runs in a network namespace with only loopback
// (`unshare -n`, needs root as CI has), judges keys and runs the crew on the tiny local model;
// its journal is carried back to the restarted cell, which verifies and imports it.
// Needs `make edge` (dist/cell.mjs, dist/edge, edge-runtime/).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { airgapSkip, deviceWithTinyModel, EDGE, runAirgapped } from './_airgapped.ts';
import { startCellProcess } from '../helpers/cell-process.ts';
import { team } from '../helpers/teams.ts';

const A = '/api/public/v1/admin';

test('air-gapped: keys and a crew run offline on the real dist/edge; the journal verifies back at the cell', {
  skip: airgapSkip('the air-gapped e2e', { runtime: true }),
  timeout: 180_000,
}, async () => {
  const work = mkdtempSync(join(tmpdir(), 'edge-airgap-'));
  const dev = join(work, 'device');
  let cell = await startCellProcess();
  try {
    const api = {
      token: cell.adminKey,
      async request(method: string, path: string, o: { body?: unknown; token?: string } = {}) {
        const r = await fetch(cell.url + path, {
          method,
          headers: { authorization: `Bearer ${o.token ?? cell.adminKey}`, 'content-type': 'application/json' },
          ...(o.body !== undefined ? { body: JSON.stringify(o.body) } : {}),
        });
        const text = await r.text();
        let body: any;
        try {
          body = JSON.parse(text);
        } catch {
          body = undefined;
        }
        return { status: r.status, body, text };
      },
    };
    const post = async (path: string, body: unknown) => {
      const r = await api.request('POST', path, { body });
      assert.ok(r.status === 200 || r.status === 201, `${path}: ${r.status} ${r.text}`);
      return r;
    };

    // Device, trust, model publisher, the tiny model and its signed manifest.
    const init = await deviceWithTinyModel(work, dev, post);

    // Keys of every kind the edge must judge.
    const scopes = ['agent_teams', 'system.orchestration.admin.read', 'edge.read'];
    const keys: Record<string, string> = {};
    keys['valid'] = (await post(`${A}/api-keys`, { name: 'valid', scopes })).body.secret;
    const rot = (await post(`${A}/api-keys`, { name: 'rot', scopes })).body;
    keys['rotated_old'] = rot.secret;
    keys['rotated_new'] = (await post(`${A}/api-keys/${rot.key_id}/rotate`, { grace_seconds: 3600 })).body.secret;
    const rev = (await post(`${A}/api-keys`, { name: 'rev', scopes })).body;
    await post(`${A}/api-keys/${rev.key_id}/revoke`, {});
    keys['revoked'] = rev.secret;
    keys['wrong_ip'] = (await post(`${A}/api-keys`, { name: 'ip', scopes, allowed_ips: ['10.9.9.9'] })).body.secret;
    keys['wrong_region'] = (await post(`${A}/api-keys`, { name: 'region', scopes, allowed_regions: ['mars'] })).body.secret;
    keys['unknown'] = 'svck_live_' + 'Q'.repeat(43);

    // A two-seat sequential crew, with short answers, granted the tools a device runs (edge/tools.ts: a crew
    // granted one it cannot honour, an imported MCP tool, is refused before the run starts).
    const cap = {
      allowed_tools: ['calc', 'clock.now', 'kv.get', 'kv.put'],
      permission_mode: 'auto',
      clearance_level: 0,
      egress_allowlist: ['kv:*'],
      data_grant_ids: ['kv:*'],
    };
    const t = await team(
      api,
      'sequential',
      [
        { role: 'inspector', cap },
        { role: 'reviewer', cap },
      ],
      { limits: { default_max_tokens: 48 } },
    );

    const kb = await post(`${A}/edge/key-bundles`, { device_id: init.device_id });
    writeFileSync(join(work, 'keys.bundle.json'), kb.text);
    const cb = await post(`${A}/edge/crew-bundles`, {
      device_id: init.device_id,
      crew_id: t.crew,
      model_manifest: readFileSync(join(work, 'tiny.manifest.json'), 'utf8'),
    });
    writeFileSync(join(work, 'crew.bundle.json'), cb.text);
    assert.ok(!kb.text.includes(keys['valid']!.slice(10)), 'no secret in the key bundle');
    const cellUrl = cell.url;
    await cell.stop();

    // The device, air-gapped.
    const cfg = {
      edge: EDGE,
      data: dev,
      keyBundle: join(work, 'keys.bundle.json'),
      crewBundle: join(work, 'crew.bundle.json'),
      model: join(work, 'tiny.gguf'),
      manifest: join(work, 'tiny.manifest.json'),
      crewId: t.crew,
      keys,
      exportOut: join(work, 'journal.export.json'),
      cellUrl,
    };
    const o = runAirgapped('_airgap-client.ts', work, cfg, 150_000);
    assert.deepEqual(o.keys_now, {
      valid: '200 ok',
      rotated_old: '200 ok',
      rotated_new: '200 ok',
      revoked: '401 revoked',
      wrong_ip: '403 ip_not_allowed',
      wrong_region: '403 region_not_allowed',
      unknown: '401 unknown_key',
    });
    assert.equal(o.keys_later.rotated_old, '401 grace_elapsed');
    assert.equal(o.keys_later.rotated_new, '200 ok');
    assert.equal(o.keys_later.valid, '200 ok');
    assert.equal(o.run_denied, 403);
    assert.equal(o.runs.length, 2);
    for (const r of o.runs) {
      assert.equal(r.status, 202);
      assert.equal(r.state, 'completed', JSON.stringify(r));
    }
    assert.deepEqual(o.runs[1].output, o.runs[0].output, 'greedy decoding on the tiny model: same input, same output');
    assert.equal(o.clock_back.status, 3, o.clock_back.stderr);
    assert.match(o.clock_back.stdout, /clock_rollback/);
    assert.equal(o.verify_key.status, 0);
    assert.deepEqual(JSON.parse(o.verify_key.stdout).effective, ['agent_teams', 'edge.read', 'system.orchestration.admin.read']);
    assert.equal(o.export.status, 0, o.export.stderr);
    process.stdout.write(`# edge cold start (spawn to listening, SEA, with model load): ${Math.round(o.cold_start_ms)} ms\n`);

    // Back at the cell: import and verify the journal.
    cell = await startCellProcess({ dataDir: cell.dataDir });
    const signed = { authorization: `Bearer ${cell.adminKey}`, 'content-type': 'application/vnd.agent-cell.signed' };
    const imp = await fetch(`${cell.url}${A}/edge/journals`, {
      method: 'POST',
      headers: signed,
      body: readFileSync(cfg.exportOut, 'utf8'),
    });
    const ib = (await imp.json()) as any;
    assert.equal(imp.status, 201, JSON.stringify(ib));
    assert.equal(ib.verified, true);
    assert.equal(ib.run_id, o.runs[0].run_id);
    assert.equal(ib.record_count, o.runs[0].journal_records);
    assert.equal(ib.outcome, 'completed');
    // A tampered export is refused.
    const tampered = readFileSync(cfg.exportOut, 'utf8').replace('"outcome":"completed"', '"outcome":"failed"');
    const bad = await fetch(`${cell.url}${A}/edge/journals`, { method: 'POST', headers: signed, body: tampered });
    assert.equal(bad.status, 403);
  } finally {
    await cell.stop();
    cell.cleanup();
    rmSync(work, { recursive: true, force: true });
  }
});
