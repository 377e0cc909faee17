/**
 * The device's data directory:
 *   device.json   the device key pair (mode 0600), written by `edge init`
 *   trust.json    the pinned cell (id + public keys) and model publishers, by `edge trust`
 *   state.json    what the device has seen: highest bundle versions and hashes,
 *                 the clock high-water mark (bundles/accept.ts)
 *   runs/         offline runs: journal records and values, by run id
 *   dpop-replay.log  the DPoP replay cache's horizon, and its live proofs after a clean stop
 *                 (edge/replay-log.ts: a horizon appended and fdatasync'd about once a second,
 *                 rewritten by temp file, fsync, rename)
 * Every other write is temp file, fsync, rename, so a crash leaves the old or the new file.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { emptyDeviceState, parseDeviceState, type DeviceState } from '../bundles/accept.ts';
import type { TrustedKey } from '../bundles/codec.ts';
import { SetupError } from '../runtime/setup-error.ts';
import { writeFileDurable as writeDurable } from '../runtime/write-durable.ts';

export interface DeviceFile {
  format_version: 1;
  device_id: string;
  public_jwk: JsonWebKey;
  private_jwk: JsonWebKey;
}

export interface TrustFile {
  format_version: 1;
  cell_id: string;
  keys: TrustedKey[];
  /** Model publishers whose manifests this device accepts. */
  publishers: TrustedKey[];
}

export const paths = (dir: string) => ({
  device: join(dir, 'device.json'),
  trust: join(dir, 'trust.json'),
  state: join(dir, 'state.json'),
  runs: join(dir, 'runs'),
});

/** The edge's durable writes: the shared helper, directory fsync best-effort as it always was here. */
export function writeFileDurable(path: string, text: string, mode = 0o644): void {
  writeDurable(path, text, { mode, dirSyncBestEffort: true });
}

export class EdgeSetupError extends SetupError {
  override name = 'EdgeSetupError';
}

function readJson(path: string, what: string, hint: string): unknown {
  if (!existsSync(path)) throw new EdgeSetupError(`${what} missing (${path}): ${hint}`);
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    throw new EdgeSetupError(`${what} is not valid JSON (${path})`);
  }
}

export function readDevice(dir: string): DeviceFile {
  const d = readJson(paths(dir).device, 'device key', 'run `edge init --data DIR` first') as DeviceFile;
  if (d?.format_version !== 1 || typeof d.device_id !== 'string' || typeof d.private_jwk?.d !== 'string')
    throw new EdgeSetupError('device.json is malformed');
  return d;
}

export function readTrust(dir: string): TrustFile {
  const t = readJson(paths(dir).trust, 'trust anchor', 'run `edge trust --data DIR --file TRUST.json` first') as TrustFile;
  if (t?.format_version !== 1 || typeof t.cell_id !== 'string' || !Array.isArray(t.keys))
    throw new EdgeSetupError('trust.json is malformed');
  t.publishers ??= [];
  return t;
}

/**
 * The device state. `edge init` writes it beside device.json, so an initialised
 * device without it has lost what it has seen (highest bundle versions, clock
 * high-water mark): starting as if fresh would accept older bundles again.
 * Refuse, and say how to start over deliberately (a new device identity).
 */
export function readState(dir: string, deviceId: string): DeviceState {
  const p = paths(dir).state;
  if (!existsSync(p)) {
    throw new EdgeSetupError(
      `${p} is missing but this device is initialised (device.json): refusing to start, since a device that ` +
        'forgot what it has seen would accept older bundles again. Restore state.json from a backup, or start over deliberately: ' +
        'move device.json away, run `edge init --data DIR` (a new device id), register it with the cell and bring new bundles.',
    );
  }
  try {
    const s = parseDeviceState(JSON.parse(readFileSync(p, 'utf8')));
    if (s.device_id !== deviceId) throw new TypeError('state of another device');
    return s;
  } catch {
    // Fail closed: a device that cannot tell what it has seen must not guess.
    throw new EdgeSetupError(`state.json is unreadable (${p}); refusing to start rather than forget what was seen`);
  }
}

/** The state of a device that has seen nothing yet (written by `edge init`). */
export function initialState(deviceId: string): DeviceState {
  return emptyDeviceState(deviceId);
}

export function writeState(dir: string, s: DeviceState): void {
  writeFileDurable(paths(dir).state, JSON.stringify(s, null, 1) + '\n', 0o600);
}
