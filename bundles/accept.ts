/**
 * The device's acceptance of a verified artifact, and what it remembers.
 *
 * After `openEnvelope` proved the signature, the device checks the rest of
 * the trust rules, in this order, each with its own `details.reason`:
 *   wrong_issuer     payload issuer is not the pinned cell        (403)
 *   wrong_audience   issued to another device                     (403)
 *   clock_rollback   device clock earlier than the last acceptance (403)
 *   clock_behind     bundle issued after the device's now + skew  (403)
 *   expired          now >= expires_at                            (403)
 *   version_rollback version lower than the highest seen          (409)
 *   version_conflict same version as seen, different hash         (409)
 * It then returns the new device state to persist (highest version and its
 * hash per issuer and type, and the clock high-water mark). Pure: the caller
 * reads and writes the state file.
 */
import { DEFAULT_SKEW_MS, type BundleType } from './format.ts';
import { refused, type OpenedEnvelope } from './envelope.ts';

export interface SeenArtifact {
  version: number;
  hash: string;
  issued_at: number;
  accepted_at: number;
}

export interface DeviceState {
  format_version: 1;
  device_id: string;
  /** Latest device time at which an artifact was accepted or a key checked. */
  clock_high_water: number;
  /** Keyed `${type}:${issuer}`. */
  seen: Record<string, SeenArtifact>;
  /**
   * Tokens each agent has spent on this device's offline runs, by agent id (its budget ledgers:
   * edge/runs.ts). Absent in a state written before the device kept its spending here.
   */
  spent?: Record<string, number>;
}

export function emptyDeviceState(deviceId: string): DeviceState {
  return { format_version: 1, device_id: deviceId, clock_high_water: 0, seen: {} };
}

export interface AcceptOptions {
  now: number;
  /** The pinned cell id (or publisher id) the artifact must come from. */
  issuer: string;
  /** Require `audience` to be this device (false for model manifests, which are for any device). */
  requireAudience?: boolean;
  skewMs?: number;
}

/** Checks a verified artifact against the device's trust rules; returns the state to persist. */
export function acceptArtifact(state: DeviceState, opened: OpenedEnvelope, opts: AcceptOptions): DeviceState {
  const p = opened.payload;
  const now = opts.now;
  const skew = opts.skewMs ?? DEFAULT_SKEW_MS;
  if (p.issuer !== opts.issuer) {
    throw refused('wrong_issuer', 'the artifact was issued by another cell', 'forbidden', { issuer: p.issuer });
  }
  if ((opts.requireAudience ?? true) && p.audience !== state.device_id) {
    throw refused('wrong_audience', 'the artifact was issued to another device', 'forbidden');
  }
  checkClock(state, now);
  if (now + skew < p.issued_at) {
    throw refused('clock_behind', "the artifact was issued after this device's current time: the clock is in doubt", 'forbidden');
  }
  if (p.expires_at !== null && now >= p.expires_at) {
    throw refused('expired', 'the artifact has expired', 'forbidden', { expires_at: p.expires_at });
  }
  const key = seenKey(p.type, p.issuer);
  const seen = state.seen[key];
  if (seen) {
    if (p.version < seen.version) {
      throw refused('version_rollback', `version ${p.version} is lower than version ${seen.version} already seen`, 'conflict', {
        seen_version: seen.version,
      });
    }
    if (p.version === seen.version && opened.hash !== seen.hash) {
      throw refused('version_conflict', `version ${p.version} was seen with different content`, 'conflict', { seen_version: seen.version });
    }
  }
  const next: SeenArtifact =
    seen && seen.version === p.version ? seen : { version: p.version, hash: opened.hash, issued_at: p.issued_at, accepted_at: now };
  return {
    ...state,
    clock_high_water: Math.max(state.clock_high_water, now),
    seen: { ...state.seen, [key]: next },
  };
}

/** Fails closed when the device clock reads earlier than the last time it trusted. */
export function checkClock(state: DeviceState, now: number): void {
  if (now < state.clock_high_water) {
    throw refused('clock_rollback', 'the device clock is earlier than the last accepted artifact: the clock is in doubt', 'forbidden', {
      high_water: state.clock_high_water,
    });
  }
}

export function seenKey(type: BundleType, issuer: string): string {
  return `${type}:${issuer}`;
}

/**
 * Two states of one device joined: every field only grows (the later clock high-water mark, per bundle
 * type the higher version seen, per agent the larger spending), so a writer holding a copy read before
 * another process wrote cannot lower what that process recorded. `a` wins a tie (the same version seen
 * with another hash is not this join's to judge: the copy already on disk stands).
 */
export function joinStates(a: DeviceState, b: DeviceState): DeviceState {
  const seen = { ...a.seen };
  for (const [k, v] of Object.entries(b.seen)) {
    const x = seen[k];
    if (x === undefined || v.version > x.version) seen[k] = v;
  }
  let spent = a.spent;
  if (b.spent !== undefined) {
    spent = { ...(a.spent ?? {}) };
    for (const [agent, n] of Object.entries(b.spent)) spent[agent] = Math.max(spent[agent] ?? 0, n);
  }
  return { ...a, clock_high_water: Math.max(a.clock_high_water, b.clock_high_water), seen, ...(spent !== undefined ? { spent } : {}) };
}

/** Validates a parsed state file; throws TypeError when it is not one (the caller decides). */
export function parseDeviceState(v: unknown): DeviceState {
  const s = v as DeviceState;
  if (
    typeof s !== 'object' ||
    s === null ||
    s.format_version !== 1 ||
    typeof s.device_id !== 'string' ||
    !Number.isFinite(s.clock_high_water) ||
    typeof s.seen !== 'object' ||
    s.seen === null ||
    (s.spent !== undefined && !isSpending(s.spent))
  ) {
    throw new TypeError('not a device state');
  }
  return s;
}

/** A plain object of token counts (finite, not negative) by agent id. */
export function isSpending(v: unknown): v is Record<string, number> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  return Object.values(v).every((n) => typeof n === 'number' && Number.isFinite(n) && n >= 0);
}
