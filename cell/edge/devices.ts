/** Registered edge devices: a device is named by its public key's thumbprint. */
import { jwkThumbprint, publicJwkOf } from '../../core/crypto/ed25519.ts';
import { conflict, invalid, notFound } from '../../core/errors.ts';
import type { Cell } from '../context.ts';
import type { Reader, Tx } from '../store/types.ts';

export interface DeviceRow {
  device_id: string;
  name: string;
  public_jwk: string;
  created_at: number;
  created_by: string;
}

export function getDevice(db: Reader, deviceId: string): DeviceRow | undefined {
  return db.get<DeviceRow & Record<string, string | number>>('SELECT * FROM edge_devices WHERE device_id = ?', [deviceId]);
}

export function requireDevice(cell: Cell, deviceId: string): DeviceRow {
  const d = getDevice(cell.store, deviceId);
  if (!d) throw notFound('device');
  return d;
}

export function listDevices(db: Reader, limit: number, offset: number): DeviceRow[] {
  return db.all<DeviceRow & Record<string, string | number>>('SELECT * FROM edge_devices ORDER BY created_at, device_id LIMIT ? OFFSET ?', [limit, offset]);
}

/** Validates a device public JWK and returns its minimal form and thumbprint. */
export function deviceKey(jwk: unknown): { jwk: JsonWebKey; deviceId: string } {
  const j = jwk as JsonWebKey;
  if (typeof j !== 'object' || j === null || j.kty !== 'OKP' || j.crv !== 'Ed25519' || typeof j.x !== 'string' || !/^[A-Za-z0-9_-]{43}$/.test(j.x)) {
    throw invalid('public_jwk must be an Ed25519 public JWK', { reason: 'bad_device_key' });
  }
  if ('d' in j) throw invalid('public_jwk must not contain the private key', { reason: 'private_key_sent' });
  const minimal = publicJwkOf(j);
  return { jwk: minimal, deviceId: jwkThumbprint(minimal) };
}

export function registerDeviceTx(tx: Tx, row: DeviceRow): void {
  if (tx.get('SELECT 1 AS x FROM edge_devices WHERE device_id = ?', [row.device_id])) {
    throw conflict('this device key is already registered', { reason: 'device_exists', device_id: row.device_id });
  }
  tx.run('INSERT INTO edge_devices (device_id, name, public_jwk, created_at, created_by) VALUES (?, ?, ?, ?, ?)',
    [row.device_id, row.name, row.public_jwk, row.created_at, row.created_by]);
}

export function deviceView(row: DeviceRow) {
  return {
    device_id: row.device_id, name: row.name, public_jwk: JSON.parse(row.public_jwk) as Record<string, unknown>,
    created_at: new Date(row.created_at).toISOString(), created_by: row.created_by,
  };
}
