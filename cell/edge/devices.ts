/**
 * Registered edge devices: a device is named by its public key's thumbprint.
 * `Devices` is built before the OAuth module (which issues tokens addressed
 * to a device and must know that it is registered and active) and handed to both.
 *
 * A device is `active`, `disabled` (no bundle is issued for it, no token is
 * issued for its audience, no journal of it is imported, until it is enabled
 * again) or `deleted` (soft: kept, so its journals still name it and its key
 * cannot be registered again; listed only on request). Acting on a device
 * (disabling, enabling, deleting it, issuing its bundles) is acting on a
 * credential of its registrant: `deviceFacts` for the containment rule.
 */
import { jwkThumbprint, publicJwkOf } from '../../core/crypto/ed25519.ts';
import { conflict, invalid, notFound } from '../../core/errors.ts';
import { isoTime } from '../../core/iso-time.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import type { CredentialFacts } from '../iam/api.ts';
import type { Store, Tx } from '../store/types.ts';
import * as repo from './repository.ts';
import type { DeviceRow } from './repository.ts';

export type { DeviceRow } from './repository.ts';

export class Devices {
  constructor(private readonly store: Store) {}

  /** The device in any state, or undefined. */
  get(deviceId: string): Promise<DeviceRow | undefined> {
    return repo.deviceById(this.store, deviceId);
  }

  /** Whether the device is registered and active: tokens are issued for its audience only then. */
  async isActive(deviceId: string): Promise<boolean> {
    return (await this.get(deviceId))?.status === 'active';
  }

  /** The device in any state but deleted, or 404. */
  async require(deviceId: string): Promise<DeviceRow> {
    const d = await this.get(deviceId);
    if (!d || d.status === 'deleted') throw notFound('device');
    return d;
  }

  /** The device when active; 404 when unknown or deleted, 409 `device_disabled` when disabled. */
  async requireActive(deviceId: string): Promise<DeviceRow> {
    const d = await this.require(deviceId);
    assertActive(d);
    return d;
  }

  list(limit: number, offset: number, includeDeleted = false): Promise<DeviceRow[]> {
    return repo.listDevices(this.store, limit, offset, includeDeleted);
  }

  /** How many devices `list` pages through. */
  count(includeDeleted = false): Promise<number> {
    return repo.countDevices(this.store, includeDeleted);
  }
}

/** Refuses (409 `device_disabled`, or `device_deleted`) unless the device is active. */
export function assertActive(d: DeviceRow): void {
  if (d.status === 'disabled')
    throw conflict('the device is disabled: enable it first', { reason: 'device_disabled', device_id: d.device_id });
  if (d.status === 'deleted') throw conflict('the device was deleted', { reason: 'device_deleted', device_id: d.device_id });
}

/**
 * A device as the right to act on a credential sees it (cell/iam/iam.ts `credentialVerdict`): it belongs
 * to whoever registered it, and what holding it lets one do is what registering it took (`edge.write`). So
 * its registrant, or a caller that manages the registrant, may disable, enable or delete it and issue its
 * bundles; a narrow `edge.write` key of another principal may not.
 */
export function deviceFacts(d: DeviceRow): CredentialFacts {
  return { kind: 'device', id: d.device_id, ownerId: d.created_by, authority: { permissions: [PERMISSIONS.edgeWrite] } };
}

/** Validates a device public JWK and returns its minimal form and thumbprint. */
export function deviceKey(jwk: unknown): { jwk: JsonWebKey; deviceId: string } {
  const j = jwk as JsonWebKey;
  if (
    typeof j !== 'object' ||
    j === null ||
    j.kty !== 'OKP' ||
    j.crv !== 'Ed25519' ||
    typeof j.x !== 'string' ||
    !/^[A-Za-z0-9_-]{43}$/.test(j.x)
  ) {
    throw invalid('public_jwk must be an Ed25519 public JWK', { reason: 'bad_device_key' });
  }
  if ('d' in j) throw invalid('public_jwk must not contain the private key', { reason: 'private_key_sent' });
  const minimal = publicJwkOf(j);
  return { jwk: minimal, deviceId: jwkThumbprint(minimal) };
}

/**
 * Registers a device inside the caller's transaction (409 device_exists when its key is already
 * registered, deleted devices included: a device starts over with a new key, `edge init`).
 */
export async function registerDeviceTx(tx: Tx, row: Parameters<typeof repo.insertDevice>[1]): Promise<void> {
  const existing = await repo.deviceById(tx, row.device_id);
  if (existing) {
    throw conflict(
      existing.status === 'deleted'
        ? 'this device key was registered and deleted: a deleted device starts over with a new key (edge init)'
        : 'this device key is already registered',
      { reason: 'device_exists', device_id: row.device_id },
    );
  }
  await repo.insertDevice(tx, row);
}

export function deviceView(row: DeviceRow) {
  return {
    device_id: row.device_id,
    name: row.name,
    public_jwk: JSON.parse(row.public_jwk) as Record<string, unknown>,
    created_at: isoTime(row.created_at),
    created_by: row.created_by,
    status: row.status,
    status_changed_at: row.status_at === null ? null : isoTime(row.status_at),
    status_changed_by: row.status_by,
  };
}
