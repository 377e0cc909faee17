// Runs INSIDE a network namespace with only loopback (spawned by airgap.e2e.test.ts under `unshare -n`):
// starts the real dist/edge, presents keys, runs the bundled crew on the tiny model, exports the
// journal, and prints every observation as one JSON line for the outer test to assert on.
import { spawnSync, type ChildProcess } from 'node:child_process';
import { clientConfig, observe, serveCrewDevice, type CrewDeviceConfig } from './_crew-device-client.ts';
import { stopEdge } from './_listening.ts';

interface Config extends CrewDeviceConfig {
  keys: Record<string, string>;
}
const cfg = clientConfig<Config>();

async function startEdge(extra: string[]): Promise<{ url: string; proc: ChildProcess; startMs: number }> {
  const t0 = performance.now();
  const { url, proc } = await serveCrewDevice(cfg, extra, { ...process.env, AGENT_CELL_EDGE_TEST_CLOCK: '1' });
  return { url, proc, startMs: performance.now() - t0 };
}

async function call(url: string, method: string, path: string, key: string, body?: unknown) {
  const r = await fetch(url + path, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const b = (await r.json()) as any;
  return { status: r.status, error: b.error ?? null, reason: b.details?.reason ?? null, body: b };
}

const keyCheck = async (url: string) => {
  const res: Record<string, string> = {};
  for (const [name, secret] of Object.entries(cfg.keys)) {
    const r = await call(url, 'GET', '/api/public/v1/edge/authz/edge.read', secret);
    res[name] = `${r.status} ${r.reason ?? r.error ?? 'ok'}`;
  }
  return res;
};

// The cell is unreachable from here: there is no network but loopback (observe checks it).
await observe(cfg, async (out) => {
  const e1 = await startEdge([]);
  out['cold_start_ms'] = e1.startMs;
  out['keys_now'] = await keyCheck(e1.url);
  const crewPath = `/api/public/v1/admin/agent-teams/crews/${cfg.crewId}/runs`;
  const runs: unknown[] = [];
  for (let n = 0; n < 2; n++) {
    const p = await call(e1.url, 'POST', crewPath, cfg.keys['valid']!, { input: 'Inspect pump 7 and report.' });
    let final: any = p.body;
    for (let i = 0; i < 600 && p.status === 202; i++) {
      const g = await call(e1.url, 'GET', `${crewPath}/${p.body.run_id}`, cfg.keys['valid']!);
      final = g.body;
      if (final.state !== 'running') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    runs.push({ status: p.status, ...final });
  }
  out['runs'] = runs;
  out['run_denied'] = (await call(e1.url, 'POST', crewPath, cfg.keys['wrong_region']!, { input: 'x' })).status;
  await stopEdge(e1.proc);

  // Two hours later (test clock): the rotated secret's one-hour grace has elapsed.
  const e2 = await startEdge(['--now-offset-ms', String(2 * 3600_000)]);
  out['keys_later'] = await keyCheck(e2.url);
  await stopEdge(e2.proc);

  // The clock set back before the last accepted moment: refused, fail closed.
  const back = spawnSync(cfg.edge, ['verify-key', '--data', cfg.data, '--bundle', cfg.keyBundle, `--now-offset-ms=${-3600_000}`], {
    input: cfg.keys['valid'],
    env: { ...process.env, AGENT_CELL_EDGE_TEST_CLOCK: '1' },
    encoding: 'utf8',
  });
  out['clock_back'] = { status: back.status, stdout: back.stdout, stderr: back.stderr };
  // verify-key from stdin, now (+2h to stay after the high-water mark).
  const vk = spawnSync(
    cfg.edge,
    ['verify-key', '--data', cfg.data, '--bundle', cfg.keyBundle, '--now-offset-ms', String(2 * 3600_000 + 60_000)],
    { input: cfg.keys['valid'], env: { ...process.env, AGENT_CELL_EDGE_TEST_CLOCK: '1' }, encoding: 'utf8' },
  );
  out['verify_key'] = { status: vk.status, stdout: vk.stdout };

  const firstRun = (runs[0] as { run_id?: string }).run_id ?? 'none';
  const ex = spawnSync(cfg.edge, ['journal', 'export', firstRun, '--data', cfg.data, '--out', cfg.exportOut], { encoding: 'utf8' });
  out['export'] = { status: ex.status, stdout: ex.stdout, stderr: ex.stderr };
});
