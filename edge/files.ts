/**
 * The device's data directory:
 *   device.json   the device key pair (mode 0600), written by `edge init`
 *   trust.json    the pinned cell (id + public keys) and model publishers, by `edge trust`
 *   state.json    what the device has seen: highest bundle versions and hashes,
 *                 the clock high-water mark (bundles/accept.ts), and what each agent has
 *                 spent on offline runs, sealed with the device key (a state written by
 *                 anything but this device's program is refused); every write joins what is on
 *                 disk, holding `state.lock` (the holder's pid) meanwhile (updateState)
 *   runs/         offline runs: journal records and values, by run id
 *   dpop-replay.log  the DPoP replay cache's horizon, and its live proofs after a clean stop
 *                 (edge/replay-log.ts: a horizon appended and fdatasync'd about once a second,
 *                 rewritten by temp file, fsync, rename)
 * Every other write is temp file, fsync, rename, so a crash leaves the old or the new file.
 */
import { createPrivateKey, createPublicKey, sign, verify } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { emptyDeviceState, isSpending, joinStates, parseDeviceState, type DeviceState } from '../bundles/accept.ts';
import { canonicalJson } from '../core/canonical.ts';
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
 * The state file (format 2): the device state and the device key's Ed25519 signature over it, so a state
 * the device did not write (an empty or reset one, put there to make it accept older bundles again) is
 * refused rather than believed. Format 1 (an older release's, unsigned) is refused too, with how to adopt
 * it (`edge state adopt`).
 */
export interface StateFile {
  format_version: 2;
  state: DeviceState;
  /** Ed25519 (base64url) by the device key over STATE_DOMAIN + the RFC 8785 canonical JSON of `state`. */
  sig: string;
}

/** What a state signature covers before the state: the device key signs journals and exports too. */
const STATE_DOMAIN = 'agent-cell/device-state/2\n';

/** The device key's signature (unpadded base64url) over `domain` and the RFC 8785 canonical JSON of `body`. */
export function deviceSeal(domain: string, body: unknown, device: DeviceFile): string {
  const key = createPrivateKey({ key: device.private_jwk as import('node:crypto').JsonWebKey, format: 'jwk' });
  return sign(null, Buffer.from(domain + canonicalJson(body), 'utf8'), key).toString('base64url');
}

/** True when `sig` is this device's seal over `domain` and `body` (deviceSeal); anything that cannot be checked is not believed. */
export function sealedByDevice(domain: string, body: unknown, sig: unknown, device: DeviceFile): boolean {
  if (typeof sig !== 'string' || !/^[A-Za-z0-9_-]{86}$/.test(sig)) return false;
  try {
    const key = createPublicKey({ key: device.public_jwk as import('node:crypto').JsonWebKey, format: 'jwk' });
    return verify(null, Buffer.from(domain + canonicalJson(body), 'utf8'), key, Buffer.from(sig, 'base64url'));
  } catch {
    return false;
  }
}

/** The state file's text: the state sealed with the device key. */
export function sealState(s: DeviceState, device: DeviceFile): string {
  const file: StateFile = { format_version: 2, state: s, sig: deviceSeal(STATE_DOMAIN, s, device) };
  return JSON.stringify(file, null, 1) + '\n';
}

/** True when `sig` is this device's signature over `s`. */
function sealedBy(s: DeviceState, sig: unknown, device: DeviceFile): boolean {
  return sealedByDevice(STATE_DOMAIN, s, sig, device);
}

/** How to start over deliberately (the message of every refusal of the state). */
const START_OVER =
  'Restore state.json from a backup, or start over deliberately: move device.json away, run `edge init --data DIR` ' +
  '(a new device id), register it with the cell and bring new bundles.';

/**
 * The device state. `edge init` writes it beside device.json, so an initialised
 * device without it has lost what it has seen (highest bundle versions, clock
 * high-water mark): starting as if fresh would accept older bundles again.
 * Refuse, and say how to start over deliberately (a new device identity). The
 * same for a state this device did not seal (an empty or reset one written by
 * hand: it would lower what the device has seen) and one of another device.
 */
export function readState(dir: string, device: DeviceFile): DeviceState {
  const p = paths(dir).state;
  if (!existsSync(p)) {
    throw new EdgeSetupError(
      `${p} is missing but this device is initialised (device.json): refusing to start, since a device that ` +
        `forgot what it has seen would accept older bundles again. ${START_OVER}`,
    );
  }
  let file: { format_version?: unknown; state?: unknown; sig?: unknown };
  try {
    file = JSON.parse(readFileSync(p, 'utf8')) as typeof file;
  } catch {
    // Fail closed: a device that cannot tell what it has seen must not guess.
    throw new EdgeSetupError(`state.json is unreadable (${p}); refusing to start rather than forget what was seen`);
  }
  if (file?.format_version === 1) {
    throw new EdgeSetupError(
      `state.json (${p}) is not sealed by this device (format 1: written by an older release, or by hand). A state this ` +
        'device did not write could make it accept older bundles again, so it is refused. If this file was written by an ' +
        'older release of the edge on this device, adopt it as it is: `edge state adopt --data DIR`. Otherwise: ' +
        START_OVER,
    );
  }
  let s: DeviceState;
  try {
    if (file?.format_version !== 2) throw new TypeError('unknown state format');
    s = parseDeviceState(file.state);
    if (s.device_id !== device.device_id) throw new TypeError('state of another device');
  } catch {
    throw new EdgeSetupError(`state.json is unreadable (${p}); refusing to start rather than forget what was seen`);
  }
  if (!sealedBy(s, file.sig, device)) {
    throw new EdgeSetupError(
      `state.json (${p}) is not sealed by this device's key: it was changed or replaced, and could make the device accept ` +
        `older bundles again. Refusing to start. ${START_OVER}`,
    );
  }
  return s;
}

/** The state of a device that has seen nothing yet (written by `edge init`). */
export function initialState(deviceId: string): DeviceState {
  return emptyDeviceState(deviceId);
}

/**
 * Writes `s` joined with the state on disk (bundles/accept.ts joinStates) and returns what was written:
 * `edge serve` keeps its state in memory while other commands (`verify-key` accepting a newer bundle) write
 * the file, and a plain overwrite by either would lower what the other recorded (a bundle version seen,
 * what an agent spent). `replace`: write `s` as it is, whatever is on disk (`edge init` starting afresh,
 * `edge state adopt` sealing an older release's unsealed file).
 */
export function writeState(dir: string, s: DeviceState, device: DeviceFile, opts: { replace?: boolean } = {}): DeviceState {
  return updateState(dir, device, (current) => (current === null || opts.replace === true ? s : joinStates(current, s)), opts);
}

/**
 * Reads the state, changes it and writes it back, holding the data directory's state lock throughout,
 * so two processes' changes never overwrite each other (what `edge serve` adds to an agent's spending is
 * added to the file's, not to its own older copy). `change` gets null when there is no state yet; with
 * `replace` it gets null whatever is on disk (unread: it may be unsealed). Returns the state written.
 */
export function updateState(
  dir: string,
  device: DeviceFile,
  change: (current: DeviceState | null) => DeviceState,
  opts: { replace?: boolean; lockWaitMs?: number } = {},
): DeviceState {
  return withStateLock(
    dir,
    () => {
      const current = opts.replace === true || !existsSync(paths(dir).state) ? null : readState(dir, device);
      const next = change(current);
      writeFileDurable(paths(dir).state, sealState(next, device), 0o600);
      return next;
    },
    opts.lockWaitMs,
  );
}

/** How long a write of the state waits for another process's hold on it before it fails. */
export const STATE_LOCK_WAIT_MS = 10_000;

/**
 * Runs `fn` holding `state.lock` (created exclusively, holding the holder's pid). A lock whose holder is
 * gone (a process killed while it held it) is taken over: renamed aside, and put back if what was renamed
 * is not the dead holder's (another process took it over first).
 */
function withStateLock<T>(dir: string, fn: () => T, waitMs = STATE_LOCK_WAIT_MS): T {
  const lock = join(dir, 'state.lock');
  // `edge init` may name a directory that does not exist yet (the state is its first file).
  mkdirSync(dir, { recursive: true });
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      const fd = openSync(lock, 'wx', 0o600);
      try {
        writeSync(fd, String(process.pid));
      } finally {
        closeSync(fd);
      }
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    const holder = lockHolder(lock);
    if (holder === null ? createdBefore(lock, Date.now() - 2000) : !alive(holder)) {
      const aside = `${lock}.stale-${process.pid}`;
      try {
        renameSync(lock, aside);
        if (lockHolder(aside) === holder && (holder !== null || createdBefore(aside, Date.now() - 2000))) rmSync(aside, { force: true });
        else renameSync(aside, lock);
      } catch {
        // Another process moved it first: try again.
      }
      continue;
    }
    if (Date.now() >= deadline)
      throw new EdgeSetupError(`state.json is held by another process (${lock}${holder !== null ? `, pid ${holder}` : ''}); try again`);
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
  }
  try {
    return fn();
  } finally {
    rmSync(lock, { force: true });
  }
}

/** True when `path` was last written before `at` (a lock left empty by a holder killed as it created it). */
function createdBefore(path: string, at: number): boolean {
  try {
    return statSync(path).mtimeMs < at;
  } catch {
    return false;
  }
}

/** The pid a lock file names, or null while it is being written (or unreadable): then it is held. */
function lockHolder(path: string): number | null {
  try {
    const pid = Number(readFileSync(path, 'utf8'));
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Where releases before the sealed spending kept what each agent spent on the device: unsealed. */
export const LEGACY_BUDGETS_FILE = 'budgets.json';

/**
 * The spending an older release kept in budgets.json, taken into the sealed state once (the state
 * written first, then the file removed: a crash in between leaves the state holding it and the file
 * to remove). A state that holds its spending already keeps it: a budgets.json put back beside it is
 * removed unread. An unreadable one stops the device (it must not forget what its agents spent).
 */
export function takeLegacySpending(dir: string, s: DeviceState, device: DeviceFile): DeviceState {
  const file = join(dir, LEGACY_BUDGETS_FILE);
  if (!existsSync(file)) return s;
  let next = s;
  if (s.spent === undefined) {
    let old: unknown;
    try {
      old = JSON.parse(readFileSync(file, 'utf8'));
    } catch {
      old = undefined;
    }
    if (!isSpending(old))
      throw new EdgeSetupError(`${file} is unreadable: refusing to start rather than forget what the device's agents spent`);
    next = writeState(dir, { ...s, spent: { ...old } }, device);
  }
  rmSync(file, { force: true });
  return next;
}
