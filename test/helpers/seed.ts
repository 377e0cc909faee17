/**
 * A cell with at least two of everything a list can hold, for the sweeps over
 * every list and every timestamp (paging.test.ts, times.test.ts): principals,
 * keys, OAuth clients, providers, skills, blueprints, agents, contracts, two
 * formations (one with three billets), two crews with finished runs, job runs,
 * definitions, endpoints, edge devices and journals imported from them, cells of the group, catalog sources (on a real MCP server). Path parameters of nested lists are
 * filled from `ids`.
 */
import { generateEd25519, signerFromJwk } from '../../bundles/codec.ts';
import { crewOnDevice, deviceRun, exportRun } from '../edge/_device-run.ts';
import { dbNow, upsertCell } from '../../cell/cluster/repository.ts';
import { waitFinished } from '../cell/jobs/_wait.ts';
import type { FakeOpenAI } from '../fixtures/openai-server.ts';
import { startMcpServer, type McpFixture } from '../fixtures/mcp-server.ts';
import { A, T, agent, crewFixture, ok, provider, team, type Api } from './teams.ts';
import type { InProcess } from './inproc.ts';

export interface Seeded {
  t: InProcess;
  ai: FakeOpenAI;
  api: Api;
  /** Values for path parameters, by name. */
  ids: Record<string, string>;
  close(): Promise<void>;
}

export async function seededCell(): Promise<Seeded> {
  // Loopback allowed as an egress address: the catalog sources below live on this machine.
  const { t, ai, api } = await crewFixture({ egressAllowPrivate: ['127.0.0.1/32'] });
  ai.setResponder(() => ({ content: 'done' }));
  const ids: Record<string, string> = {};
  let mcp: McpFixture | undefined;
  try {
    mcp = await startMcpServer();
    for (const n of ['crm', 'crm-2']) {
      const src = await ok(api, 'POST', `${A}/catalog/sources`, { name: n, url: mcp.url }, [201]);
      ids['source_id'] = src.source_id;
    }
    for (const n of ['batch-1', 'batch-2']) await ok(api, 'POST', `${A}/principals`, { kind: 'service', name: n, roles: ['jobs'] });
    for (const n of ['k1', 'k2']) await ok(api, 'POST', `${A}/api-keys`, { name: n, scopes: ['system.orchestration.admin.read'] });
    for (const n of ['c1', 'c2'])
      await ok(api, 'POST', `${A}/oauth/clients`, { name: n, grant_types: ['client_credentials'], scope: ['agent_teams.read'] });
    await provider(api, ai);
    for (const n of ['s1', 's2']) await ok(api, 'POST', `${T}/skills`, { name: n, skill_kind: 'model' });
    for (const n of ['b1', 'b2']) await ok(api, 'POST', `${T}/blueprints`, { name: n, role_label: n });
    for (const n of ['r1', 'r2']) await ok(api, 'POST', `${T}/contracts`, { name: n, rules: [{ name: 'r', expr: 'true' }] });
    await agent(api, 'scratch');
    const one = await team(api, 'sequential', [{ role: 'first' }, { role: 'second' }, { role: 'third' }]);
    const two = await team(api, 'sequential', [{ role: 'solo' }]);
    ids['formation_id'] = one.formation;
    ids['crew_id'] = one.crew;
    for (const crew of [one.crew, one.crew, two.crew]) {
      const r = await ok(api, 'POST', `${T}/crews/${crew}/runs`, { input: 'go' });
      await t.modules.teams.teams.settled(r.run_id);
    }
    for (const xs of [[1], [2], [3]]) {
      const r = await ok(api, 'POST', `${A}/jobs/runs`, {
        job_type: 'compute',
        workspace_id: 'demo',
        spec: { code: 'return input.xs.map((x) => x * x)', input: { xs } },
      });
      await waitFinished(t.modules.runs.runs, r.run_id);
      ids['run_id'] = r.run_id;
    }
    for (const n of ['d1', 'd2'])
      await ok(api, 'POST', `${A}/jobs/definitions`, { name: n, job_type: 'compute', spec: { code: 'return 1' }, cron: '*/5 * * * *' });
    for (const n of ['e1', 'e2'])
      await ok(api, 'POST', `${A}/jobs/endpoints`, { name: n, job_type: 'compute', spec: { code: 'return 1' } });
    for (const n of ['dev-1', 'dev-2']) {
      const k = await generateEd25519();
      const dev = await ok(api, 'POST', `${A}/edge/devices`, { name: n, public_jwk: k.publicJwk });
      // Two runs of a crew the device carried, imported back.
      const signer = signerFromJwk(k.kid, k.privateJwk);
      const d = await crewOnDevice(t, k.kid, dev.trust.keys);
      for (let i = 0; i < 2 && n === 'dev-1'; i++) {
        const r = await deviceRun(signer, d.graph, d.graphHash);
        const res = await t.request('POST', `${A}/edge/journals`, {
          token: t.adminKey,
          rawBody: await exportRun(signer, r, { crewId: d.crewId, audience: t.core.config.groupId }),
          headers: { 'content-type': 'application/vnd.agent-cell.signed' },
        });
        if (res.status !== 201) throw new Error(`seed: edge journal import ${res.status} ${res.text}`);
      }
      if (n !== 'dev-1') continue;
      // The crew again, its two agents now with ledgers: the device holds budget of both (its budget holds).
      ids['device_id'] = dev.device_id;
      for (const a of d.crew.agents as { agent_id: string }[])
        await ok(api, 'POST', `${A}/agent-teams/agents/${a.agent_id}/budget-ledger`, { budget_limit: 1000 });
      await ok(api, 'POST', `${A}/edge/crew-bundles`, { device_id: dev.device_id, crew_id: d.crewId, budgets: {} });
    }
    // A second member of the group: a cell that ran on this store once and stopped.
    const at = Date.UTC(2026, 0, 1);
    await t.core.store.write((tx) =>
      upsertCell(
        tx,
        {
          cell_id: 'cell-stopped',
          region: 'default',
          clearance: 0,
          topology: {},
          posture: 'single-cell',
          url: null,
          heartbeat_ms: 1000,
          lease_ms: 5000,
          stopped_at: at + 1000,
          member_key: null,
          clock_offset_ms: null,
        },
        dbNow('embedded', at),
      ),
    );
  } catch (err) {
    await t.close();
    await ai.close();
    await mcp?.close();
    throw err;
  }
  return {
    t,
    ai,
    api,
    ids,
    async close() {
      await t.close();
      await ai.close();
      await mcp?.close();
    },
  };
}
