/**
 * Registered edge devices: a device is named by its public key's thumbprint.
 * `Devices` is built before the OAuth module (which issues tokens addressed
 * to a device and must know that it is registered) and handed to both.
 */
import { jwkThumbprint, publicJwkOf } from '../../core/crypto/ed25519.ts';
import { conflict, invalid, notFound } from '../../core/errors.ts';
import { isoTime } from '../../core/iso-time.ts';
import type { Store, Tx } from '../store/types.ts';
import * as repo from './repository.ts';
import type { DeviceRow } from './repository.ts';

export type { DeviceRow } from './repository.ts';

export class Devices {
  constructor(private readonly store: Store) {}

  get(deviceId: string): Promise<DeviceRow | undefined> {
    return repo.deviceById(this.store, deviceId);
  }

  async exists(deviceId: string): Promise<boolean> {
    return (await this.get(deviceId)) !== undefined;
  }

  /** The device, or 404. */
  async require(deviceId: string): Promise<DeviceRow> {
    const d = await this.get(deviceId);
    if (!d) throw notFound('device');
    return d;
  }

  list(limit: number, offset: number): Promise<DeviceRow[]> {
    return repo.listDevices(this.store, limit, offset);
  }

  /** How many devices `list` pages through. */
  count(): Promise<number> {
    return repo.countDevices(this.store);
  }
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

/** Registers a device inside the caller's transaction (409 device_exists when its key is already registered). */
export async function registerDeviceTx(tx: Tx, row: DeviceRow): Promise<void> {
  if (await repo.deviceById(tx, row.device_id)) {
    throw conflict('this device key is already registered', { reason: 'device_exists', device_id: row.device_id });
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
  };
}
