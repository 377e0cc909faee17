// What the air-gapped end-to-end tests (airgap, delegation, tokens .e2e.test.ts) share: where the real
// single executable dist/edge is, why such a test cannot run on this machine (its skip reason), a
// one-shot call of the edge CLI, a device prepared for a crew on the tiny model, and the run of a test/edge/_*-client.ts inside a network namespace
// with only loopback (`unshare -n`, root), which must see no network and no cell.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { makeTinyGguf } from '../../scripts/make-tiny-gguf.ts';

export const ROOT = resolve(import.meta.dirname, '../..');
export const EDGE = join(ROOT, 'dist/edge');

/** Why `what` cannot run here, or false; `needs` adds the local model runtime or openssl to the checks. */
export function airgapSkip(what: string, needs: { runtime?: boolean; openssl?: boolean } = {}): string | false {
  if (process.platform !== 'linux') return 'network namespaces need Linux';
  if (process.getuid?.() !== 0) return `not root: \`unshare -n\` needs root (CI runs as root); skipping ${what}`;
  if (!existsSync(EDGE) || !existsSync(join(ROOT, 'dist/cell.mjs'))) return 'dist/edge or dist/cell.mjs missing: run `make edge`';
  if (needs.runtime && !existsSync(join(ROOT, 'edge-runtime/node_modules/node-llama-cpp')))
    return 'edge-runtime/ not installed: run `make edge`';
  if (spawnSync('unshare', ['-n', 'true']).status !== 0) return 'unshare -n is not permitted here';
  if (needs.openssl && spawnSync('openssl', ['version']).status !== 0) return 'openssl is missing';
  return false;
}

/** Runs the edge CLI once (stdin `input` if given); it must exit 0. Returns what it printed. */
export function edge(args: string[], input?: string): string {
  const r = spawnSync(EDGE, args, { encoding: 'utf8', ...(input !== undefined ? { input } : {}) });
  assert.equal(r.status, 0, `edge ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

/**
 * A device in `dev` ready for a crew bundle: initialised, registered at the cell (`post`: an admin POST
 * that must succeed) and trusting it, with the tiny model (work/tiny.gguf) signed by a publisher it pins
 * (work/publisher.json, work/tiny.manifest.json). Returns what `edge init` printed.
 */
export async function deviceWithTinyModel(
  work: string,
  dev: string,
  post: (path: string, body: unknown) => Promise<{ text: string }>,
): Promise<{ device_id: string; public_jwk: JsonWebKey }> {
  const init = JSON.parse(edge(['init', '--data', dev]));
  const reg = await post('/api/public/v1/admin/edge/devices', { name: 'pump-house', public_jwk: init.public_jwk });
  writeFileSync(join(work, 'trust.json'), reg.text);
  edge(['model', 'keygen', '--out', join(work, 'publisher.json')]);
  writeFileSync(join(work, 'tiny.gguf'), makeTinyGguf(42));
  edge([
    'model',
    'sign',
    '--model',
    join(work, 'tiny.gguf'),
    '--key',
    join(work, 'publisher.json'),
    '--name',
    'tiny',
    '--out',
    join(work, 'tiny.manifest.json'),
  ]);
  edge(['trust', '--data', dev, '--file', join(work, 'trust.json'), '--publisher', join(work, 'publisher.json')]);
  return init;
}

/**
 * Runs `client` (a file under test/edge/) with `cfg` (written to work/cfg.json) inside a network
 * namespace with only loopback up. It must exit 0, report no error, see only `lo` and not reach the
 * cell; returns its last JSON line, its observations.
 */
export function runAirgapped(client: string, work: string, cfg: object, timeoutMs: number): any {
  writeFileSync(join(work, 'cfg.json'), JSON.stringify(cfg));
  const inner = spawnSync(
    'unshare',
    [
      '-n',
      '--',
      'sh',
      '-c',
      `ip link set lo up && exec "${process.execPath}" --import tsx "${join(ROOT, 'test/edge', client)}" "${join(work, 'cfg.json')}"`,
    ],
    { cwd: ROOT, encoding: 'utf8', timeout: timeoutMs },
  );
  assert.equal(inner.status, 0, inner.stderr);
  const o = JSON.parse(inner.stdout.trim().split('\n').pop()!);
  assert.equal(o.error, undefined, o.error);
  assert.deepEqual(o.interfaces, ['lo'], 'only loopback inside the namespace');
  assert.equal(o.cell_reachable, false);
  return o;
}
