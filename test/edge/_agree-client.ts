// Runs INSIDE a network namespace with only loopback (spawned by agreement-crew.e2e.test.ts under `unshare -n`):
// starts the real dist/edge with the crew bundle and the tiny model, runs the crew once, exports its journal,
// reads the device's published keys, and prints its observations as one JSON line.
import { spawnSync } from 'node:child_process';
import { clientConfig, observe, serveCrewDevice, type CrewDeviceConfig } from './_crew-device-client.ts';
import { stopEdge } from './_listening.ts';

interface Config extends CrewDeviceConfig {
  key: string;
  /** The key of the approver the formation's approval step names. */
  approverKey: string;
}
const cfg = clientConfig<Config>();

await observe(cfg, async (out) => {
  const { url, proc } = await serveCrewDevice(cfg);
  try {
    const headers = { authorization: `Bearer ${cfg.key}`, 'content-type': 'application/json' };
    const path = `/api/public/v1/admin/agent-teams/crews/${cfg.crewId}/runs`;
    const started = await fetch(url + path, {
      method: 'POST',
      headers,
      body: JSON.stringify({ input: 'Inspect pump 7 and record the finding.' }),
    });
    let run = (await started.json()) as { run_id: string; state: string };
    out['start_status'] = started.status;
    // Until the run ends; its approval step is decided once, by the approver, at the device.
    const view = `${url}${path}/${run.run_id}`;
    let decided = false;
    for (let i = 0; i < 1200 && started.status === 202; i++) {
      const v = (await (await fetch(view, { headers })).json()) as typeof run & { pending_approvals?: { step_id: string }[] };
      run = v;
      if (!['queued', 'running', 'waiting'].includes(v.state)) break;
      const pending = v.pending_approvals?.[0];
      if (pending !== undefined && !decided) {
        const d = await fetch(`${view}/approvals/${encodeURIComponent(pending.step_id)}`, {
          method: 'POST',
          headers: { ...headers, authorization: `Bearer ${cfg.approverKey}` },
          body: JSON.stringify({ decision: 'approve', comment: 'recorded as found' }),
        });
        out['approval_status'] = d.status;
        await d.text();
        decided = true;
        continue;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    out['run'] = run;
    out['device_keys'] = await (await fetch(`${url}/.well-known/cell-keys.json`)).json();
  } finally {
    await stopEdge(proc);
  }
  const run = out['run'] as { run_id?: string };
  const ex = spawnSync(cfg.edge, ['journal', 'export', run.run_id ?? 'none', '--data', cfg.data, '--out', cfg.exportOut], {
    encoding: 'utf8',
  });
  out['export'] = { status: ex.status, stderr: ex.stderr };
});
