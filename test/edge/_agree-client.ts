// Runs INSIDE a network namespace with only loopback (spawned by agreement-crew.e2e.test.ts under `unshare -n`):
// starts the real dist/edge with the crew bundle and the tiny model, runs the crew once, exports its journal,
// reads the device's published keys, and prints its observations as one JSON line.
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { edgeListening } from './_listening.ts';

interface Config {
  edge: string;
  data: string;
  keyBundle: string;
  crewBundle: string;
  model: string;
  manifest: string;
  crewId: string;
  key: string;
  /** The key of the approver the formation's approval step names. */
  approverKey: string;
  exportOut: string;
  cellUrl: string;
}
const cfg = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as Config;
const out: Record<string, unknown> = { interfaces: Object.keys(networkInterfaces()) };

try {
  out['cell_reachable'] = await fetch(cfg.cellUrl, { signal: AbortSignal.timeout(2000) }).then(
    () => true,
    () => false,
  );
  const proc = spawn(
    cfg.edge,
    [
      'serve',
      '--data',
      cfg.data,
      '--bundle',
      cfg.keyBundle,
      '--crew-bundle',
      cfg.crewBundle,
      '--model',
      cfg.model,
      '--model-manifest',
      cfg.manifest,
      '--port',
      '0',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  try {
    const { url } = await edgeListening(proc, 30_000);
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
    const done = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    await done;
  }
  const run = out['run'] as { run_id?: string };
  const ex = spawnSync(cfg.edge, ['journal', 'export', run.run_id ?? 'none', '--data', cfg.data, '--out', cfg.exportOut], {
    encoding: 'utf8',
  });
  out['export'] = { status: ex.status, stderr: ex.stderr };
} catch (e) {
  out['error'] = e instanceof Error ? e.stack : String(e);
}
process.stdout.write(JSON.stringify(out) + '\n');
