// Runs INSIDE a network namespace with only loopback (spawned by delegation.e2e.test.ts under
// `unshare -n`): starts the real dist/edge (plain http) on the key bundle, presents each exchanged
// token to an operation needing edge.read, and prints one JSON line: the interfaces it saw, whether
// the cell was reachable, and the edge's answer ("status error reason") per token.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { edgeListening } from './_listening.ts';

interface Config {
  edge: string;
  data: string;
  keyBundle: string;
  cellUrl: string;
  tokens: Record<string, string>;
}
const cfg = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as Config;
const out: Record<string, unknown> = { interfaces: Object.keys(networkInterfaces()) };

async function main(): Promise<void> {
  try {
    await fetch(`${cfg.cellUrl}/healthz`, { signal: AbortSignal.timeout(2000) });
    out['cell_reachable'] = true;
  } catch {
    out['cell_reachable'] = false;
  }
  const proc = spawn(cfg.edge, ['serve', '--data', cfg.data, '--bundle', cfg.keyBundle, '--port', '0'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const { url } = await edgeListening(proc, 60_000);
  try {
    const rows: Record<string, string> = {};
    for (const [name, token] of Object.entries(cfg.tokens)) {
      const r = await fetch(`${url}/api/public/v1/edge/authz/edge.read`, { headers: { authorization: `Bearer ${token}` } });
      const b = (await r.json()) as { error?: string; details?: { reason?: string } };
      rows[name] = `${r.status} ${b.error ?? 'ok'}${b.details?.reason ? ` ${b.details.reason}` : ''}`;
    }
    out['rows'] = rows;
  } finally {
    proc.kill('SIGTERM');
  }
}

main()
  .catch((e: unknown) => {
    out['error'] = String(e);
  })
  .finally(() => process.stdout.write(`${JSON.stringify(out)}\n`));
