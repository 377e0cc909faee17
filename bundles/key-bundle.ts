/**
 * API-key records bundle: a cell's keys projected for one device, signed.
 *
 * Payload (type `api-key-records`), besides the common header:
 *   owners:     { [owner_id]: { status, permissions } }   role permissions at projection time
 *   keys:       [{ key_id, owner_id, status, hashes: [{hash, not_after}], expires_at,
 *                  scopes, rate_limit_rpm, allowed_ips, allowed_regions }]
 *   tombstones: [{ key_id, at }]                           revoked or purged keys
 *   region_note: none; the edge applies allowed_regions against its own region.
 * Owners are listed once rather than repeated per key (a 100,000-key bundle
 * stays small). `hashes[0]` is the current secret's SHA-256 (hex);
 * `hashes[1]`, when present, is the previous secret with its grace deadline.
 * No secret ever appears. The edge rebuilds core's `KeyRecord` and judges a
 * presented key with the same `verifyPresentedKey` the cell uses.
 */
import type { KeyRecord, KeyVerdict, KeyVerifyContext } from '../core/apikey/verify.ts';
import { verifyPresentedKey } from '../core/apikey/verify.ts';
import { hashSecret } from '../core/apikey/hash.ts';
import { isSecretFormat } from '../core/apikey/secret.ts';
import { PAYLOAD_FORMAT_VERSION } from './format.ts';
import { isObject, openEnvelope, refused, sealEnvelope, type OpenedEnvelope, type PayloadHeader } from './envelope.ts';
import type { Signer, TrustedKey } from './_codec.ts';

export interface BundleOwner {
  status: KeyRecord['owner_status'];
  permissions: string[];
}

export type BundleKey = Omit<KeyRecord, 'owner_status' | 'owner_permissions'>;

export interface KeyBundle extends PayloadHeader {
  type: 'api-key-records';
  owners: Record<string, BundleOwner>;
  keys: BundleKey[];
  tombstones: { key_id: string; at: number }[];
}

/** Projects core KeyRecords into a signed key bundle for one device. */
export async function buildKeyBundle(opts: {
  issuer: string; signer: Signer; audience: string; version: number; issuedAt: number; expiresAt: number;
  records: readonly KeyRecord[]; tombstones: readonly { key_id: string; at: number }[];
}): Promise<string> {
  const owners: Record<string, BundleOwner> = {};
  const keys: BundleKey[] = [];
  for (const r of opts.records) {
    owners[r.owner_id] ??= { status: r.owner_status, permissions: [...r.owner_permissions] };
    keys.push({
      key_id: r.key_id, owner_id: r.owner_id, status: r.status, hashes: r.hashes.map((h) => ({ hash: h.hash, not_after: h.not_after })),
      expires_at: r.expires_at, scopes: [...r.scopes], rate_limit_rpm: r.rate_limit_rpm,
      allowed_ips: [...r.allowed_ips], allowed_regions: [...r.allowed_regions],
    });
  }
  const payload: KeyBundle = {
    format_version: PAYLOAD_FORMAT_VERSION, type: 'api-key-records', issuer: opts.issuer, kid: opts.signer.kid,
    audience: opts.audience, version: opts.version, issued_at: opts.issuedAt, expires_at: opts.expiresAt,
    owners, keys, tombstones: opts.tombstones.map((t) => ({ key_id: t.key_id, at: t.at })),
  };
  return sealEnvelope(payload as unknown as KeyBundle & Record<string, unknown>, opts.signer);
}

/** SHA-256 (lower-case hex) of a secret's UTF-8 bytes; core's `hashSecret` by default. */
export type SecretHasher = (secret: string) => string;

/**
 * The loaded bundle: lookup by SHA-256 of a presented secret. Records are
 * rebuilt (owner joined, tombstones applied) on first lookup, so loading a
 * large bundle costs one map entry per hash.
 */
export class KeyIndex {
  readonly #keys: BundleKey[];
  readonly #owners: Record<string, BundleOwner>;
  readonly #byHash = new Map<string, number>();
  readonly #byId = new Map<string, number>();
  readonly #records: (KeyRecord | undefined)[];
  readonly #hash: SecretHasher;
  readonly tombstoned: ReadonlySet<string>;

  constructor(bundle: KeyBundle, hash: SecretHasher = hashSecret) {
    this.#keys = bundle.keys;
    this.#owners = bundle.owners;
    this.#hash = hash;
    this.#records = new Array<KeyRecord | undefined>(bundle.keys.length);
    this.tombstoned = new Set(bundle.tombstones.map((t) => t.key_id));
    for (let i = 0; i < bundle.keys.length; i++) {
      const k = bundle.keys[i]!;
      this.#byId.set(k.key_id, i);
      for (const h of k.hashes) this.#byHash.set(h.hash, i);
    }
  }

  get size(): number {
    return this.#byId.size;
  }

  #record(i: number): KeyRecord {
    let r = this.#records[i];
    if (r === undefined) {
      const k = this.#keys[i]!;
      const owner = Object.hasOwn(this.#owners, k.owner_id) ? this.#owners[k.owner_id] : undefined;
      r = {
        key_id: k.key_id, owner_id: k.owner_id, status: k.status, hashes: k.hashes, expires_at: k.expires_at,
        scopes: k.scopes, rate_limit_rpm: k.rate_limit_rpm, allowed_ips: k.allowed_ips, allowed_regions: k.allowed_regions,
        // A key whose owner is missing from the bundle has no authority: judged as a purged owner.
        owner_status: owner?.status ?? 'purged',
        owner_permissions: owner?.permissions ?? [],
      };
      // A tombstoned key id is never honoured, whatever its record says.
      if (this.tombstoned.has(k.key_id) && r.status === 'active') r.status = 'revoked';
      this.#records[i] = r;
    }
    return r;
  }

  byHash(hash: string): KeyRecord | undefined {
    const i = this.#byHash.get(hash);
    return i === undefined ? undefined : this.#record(i);
  }

  byId(keyId: string): KeyRecord | undefined {
    const i = this.#byId.get(keyId);
    return i === undefined ? undefined : this.#record(i);
  }

  /** Judges a presented secret exactly as the cell does: core's verifyPresentedKey on the bundled record. */
  check(secret: string, ctx: KeyVerifyContext): KeyVerdict & { record?: KeyRecord } {
    if (!isSecretFormat(secret)) return { ok: false, code: 'unauthorized', reason: 'unknown_key' };
    const hash = this.#hash(secret);
    const record = this.byHash(hash);
    const verdict = verifyPresentedKey(record, hash, ctx);
    return record ? { ...verdict, record } : verdict;
  }
}

/** Verifies signature and shape of a key bundle and indexes it. */
export async function openKeyBundle(input: string | Uint8Array, trusted: readonly TrustedKey[], hash?: SecretHasher): Promise<{ opened: OpenedEnvelope<KeyBundle>; index: KeyIndex }> {
  const opened = await openEnvelope(input, trusted, 'api-key-records');
  const p = opened.payload as Partial<KeyBundle>;
  if (!isObject(p.owners) || !Array.isArray(p.keys) || !Array.isArray(p.tombstones)) {
    throw refused('malformed', 'the key bundle is malformed', 'invalid_request');
  }
  for (const k of p.keys) {
    if (!isObject(k) || typeof k.key_id !== 'string' || typeof k.owner_id !== 'string' || !Array.isArray(k.hashes)
      || !Array.isArray(k.scopes) || !Array.isArray(k.allowed_ips) || !Array.isArray(k.allowed_regions)) {
      throw refused('malformed', 'a key record in the bundle is malformed', 'invalid_request');
    }
    for (const h of k.hashes) {
      if (!isObject(h) || typeof h.hash !== 'string') throw refused('malformed', 'a key record in the bundle is malformed', 'invalid_request');
    }
  }
  return { opened: opened as OpenedEnvelope<KeyBundle>, index: new KeyIndex(opened.payload as KeyBundle, hash) };
}
