// What the clients that run a crew on the device inside the network namespace share (_agree-client.ts,
// _airgap-client.ts): their config (the files the outer test prepared), the observations they print as one
// JSON line (the interfaces they see, whether the cell answers, an error), and the real dist/edge serving
// the key bundle, the crew bundle and the tiny model.
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { serveEdge } from './_listening.ts';

export interface CrewDeviceConfig {
  edge: string;
  data: string;
  keyBundle: string;
  crewBundle: string;
  model: string;
  manifest: string;
  crewId: string;
  exportOut: string;
  cellUrl: string;
}

/** The config the outer test wrote (argv[2]). */
export function clientConfig<C extends CrewDeviceConfig>(): C {
  return JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as C;
}

/**
 * Runs `body` with the observations it adds to, first the interfaces seen and whether the cell answers
 * (it must not: there is no network but loopback), then prints them as one JSON line, an error included.
 */
export async function observe(cfg: CrewDeviceConfig, body: (out: Record<string, unknown>) => Promise<void>): Promise<void> {
  const out: Record<string, unknown> = { interfaces: Object.keys(networkInterfaces()) };
  try {
    out['cell_reachable'] = await fetch(cfg.cellUrl, { signal: AbortSignal.timeout(2000) }).then(
      () => true,
      () => false,
    );
    await body(out);
  } catch (e) {
    out['error'] = e instanceof Error ? e.stack : String(e);
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

/** `edge serve` with the bundles and the model on port 0 (then `extra`), once it listens. */
export function serveCrewDevice(
  cfg: CrewDeviceConfig,
  extra: string[] = [],
  env?: NodeJS.ProcessEnv,
): Promise<{ url: string; proc: ChildProcess }> {
  return serveEdge(
    cfg,
    ['--crew-bundle', cfg.crewBundle, '--model', cfg.model, '--model-manifest', cfg.manifest, '--port', '0', ...extra],
    env,
  );
}
