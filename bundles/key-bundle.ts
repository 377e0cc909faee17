/**
 * API-key records bundle: a cell's credentials projected for one device,
 * signed: its API keys, and (format 2) what the device needs to judge the
 * cell's OAuth access tokens offline.
 *
 * Payload (type `api-key-records`), besides the common header:
 *   owners:     { [principal_id]: { status, permissions } } role permissions at projection time;
 *               format 2 lists every principal (token subjects too), format 1 key owners only
 *   scope_sets: [[selector, ...], ...]                      distinct scope lists, referenced by index
 *   key_fields: the names of a key row's columns, in order (a reader checks them):
 *               key_id, owner_id, status, hashes, expires_at, scopes, rate_limit_rpm,
 *               allowed_ips, allowed_regions
 *   keys:       [[key_id, owner_id, status, [hash, not_after, hash, not_after], expires_at,
 *                 scope_set_index, rate_limit_rpm, allowed_ips, allowed_regions], ...]
 *   tombstones: [{ key_id, at }]                            revoked, soft-deleted or purged keys
 *   tokens:     (format 2) { issuer, keys: [Ed25519 public JWK with kid], revoked: [[jti, exp], ...] } | null
 *               the cell's token issuer, its published token signing keys, and the ids of revoked
 *               tokens that have not expired (exp in seconds); null: no token is honoured
 *               (format 3) also clients: [client_id, ...], sorted: the registered OAuth clients
 *               that exist at issue time; a token of any other registered client (`ocl_…`, a
 *               self-registered `dcl_…`, a metadata document's `https://…`: core/tokens/judge.ts
 *               isRegisteredClientId) is refused, as the cell refuses the tokens of a deleted client
 *               (format 4) also max_act_depth: integer 1..16, the longest RFC 8693 `act` chain
 *               the cell honours; a device refuses longer ones (`delegation_too_deep`)
 *               (format 4, optional) issuers: [iss, ...], every issuer the cell's group accepts
 *               (`service://<group id>` and its `--oauth-issuer` URLs), `issuer` among them;
 *               absent: `issuer` alone
 * Rows instead of objects, owners and scope lists once: a 100,000-key bundle
 * stays small and parses fast. The first hash is the current secret's SHA-256
 * (hex); a second pair is the previous secret with its grace deadline. No
 * secret ever appears. The edge rebuilds core's `KeyRecord` and judges a
 * presented key with the same `verifyPresentedKey` the cell uses.
 */
import type { KeyRecord, KeyVerdict, KeyVerifyContext } from '../core/apikey/verify.ts';
import { verifyPresentedKey } from '../core/apikey/verify.ts';
import { hashSecret } from '../core/apikey/hash.ts';
import { isSecretFormat } from '../core/apikey/secret.ts';
import { KEY_BUNDLE_FORMAT_VERSION } from './format.ts';
import { DEFAULT_MAX_ACT_DEPTH, HARD_MAX_ACT_DEPTH } from '../core/tokens/delegation.ts';
import { isObject, openEnvelope, refused, sealEnvelope, type OpenedEnvelope, type PayloadHeader } from './envelope.ts';
import type { Signer, TrustedKey } from './codec.ts';

export interface BundleOwner {
  status: KeyRecord['owner_status'];
  permissions: string[];
}

export const KEY_FIELDS = [
  'key_id',
  'owner_id',
  'status',
  'hashes',
  'expires_at',
  'scopes',
  'rate_limit_rpm',
  'allowed_ips',
  'allowed_regions',
] as const;

/** One key row, columns as KEY_FIELDS. */
export type KeyRow = [
  key_id: string,
  owner_id: string,
  status: KeyRecord['status'],
  hashes: (string | number | null)[],
  expires_at: number | null,
  scopes: number,
  rate_limit_rpm: number | null,
  allowed_ips: string[],
  allowed_regions: string[],
];

/** A token signing key as carried: an Ed25519 public JWK named by its kid. */
export interface TokenSigningKey {
  kid: string;
  kty: 'OKP';
  crv: 'Ed25519';
  x: string;
  alg: 'EdDSA';
}

/** What a device needs to judge the issuing cell's access tokens offline (format 2). */
export interface TokenTrust {
  /** The issuing cell's token `iss`: `service://<group id>`, or its `--oauth-issuer` URL. */
  issuer: string;
  /**
   * Format 4, optional: every `iss` the group accepts (`service://<group id>` and the issuer URLs its
   * cells declared), `issuer` among them. Absent: `issuer` alone (older bundles, older cells).
   */
  issuers?: string[];
  /** The cell's published token signing keys (the active one and retired ones still in their overlap). */
  keys: TokenSigningKey[];
  /** Revoked token ids whose tokens have not expired at issue time: [jti, exp (seconds)]. */
  revoked: [string, number][];
  /**
   * Format 3: the registered OAuth clients that exist at issue time, sorted. Absent in format 2
   * bundles, whose devices cannot tell a deleted client (a token of one lives until its `exp`).
   */
  clients?: string[];
  /** Format 4: the longest delegation chain the issuing cell honours. Absent before: core's default. */
  max_act_depth?: number;
}

export interface KeyBundle extends PayloadHeader {
  type: 'api-key-records';
  owners: Record<string, BundleOwner>;
  scope_sets: string[][];
  key_fields: string[];
  keys: KeyRow[];
  tombstones: { key_id: string; at: number }[];
  /** Format 2; absent in format 1 bundles. */
  tokens?: TokenTrust | null;
}

/**
 * Projects core KeyRecords (and, for tokens, the principals and the token
 * trust) into a signed key bundle (format 2) for one device.
 */
export async function buildKeyBundle(opts: {
  issuer: string;
  signer: Signer;
  audience: string;
  version: number;
  issuedAt: number;
  expiresAt: number;
  records: readonly KeyRecord[];
  tombstones: readonly { key_id: string; at: number }[];
  /** Principals that may be token subjects, beyond the keys' owners. */
  subjects?: Readonly<Record<string, BundleOwner>>;
  /** Null or absent: the device honours no access token. */
  tokens?: TokenTrust | null;
}): Promise<string> {
  const owners: Record<string, BundleOwner> = {};
  const scopeSets: string[][] = [];
  const scopeIndex = new Map<string, number>();
  const keys: KeyRow[] = [];
  for (const r of opts.records) {
    owners[r.owner_id] ??= { status: r.owner_status, permissions: [...r.owner_permissions] };
    const sk = JSON.stringify(r.scopes);
    let si = scopeIndex.get(sk);
    if (si === undefined) {
      si = scopeSets.length;
      scopeSets.push([...r.scopes]);
      scopeIndex.set(sk, si);
    }
    keys.push([
      r.key_id,
      r.owner_id,
      r.status,
      r.hashes.flatMap((h) => [h.hash, h.not_after]),
      r.expires_at,
      si,
      r.rate_limit_rpm,
      [...r.allowed_ips],
      [...r.allowed_regions],
    ]);
  }
  for (const [id, o] of Object.entries(opts.subjects ?? {})) owners[id] ??= { status: o.status, permissions: [...o.permissions] };
  const t = opts.tokens ?? null;
  const payload: KeyBundle = {
    format_version: KEY_BUNDLE_FORMAT_VERSION,
    type: 'api-key-records',
    issuer: opts.issuer,
    kid: opts.signer.kid,
    audience: opts.audience,
    version: opts.version,
    issued_at: opts.issuedAt,
    expires_at: opts.expiresAt,
    owners,
    scope_sets: scopeSets,
    key_fields: [...KEY_FIELDS],
    keys,
    tombstones: opts.tombstones.map((x) => ({ key_id: x.key_id, at: x.at })),
    tokens: t && {
      issuer: t.issuer,
      ...(t.issuers ? { issuers: [...new Set([t.issuer, ...t.issuers])] } : {}),
      keys: t.keys.map((k) => ({ kid: k.kid, kty: 'OKP' as const, crv: 'Ed25519' as const, x: k.x, alg: 'EdDSA' as const })),
      revoked: t.revoked.map(([jti, exp]) => [jti, exp] as [string, number]),
      clients: [...new Set(t.clients ?? [])].sort(),
      max_act_depth: t.max_act_depth ?? DEFAULT_MAX_ACT_DEPTH,
    },
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
  readonly #keys: KeyRow[];
  readonly #owners: Record<string, BundleOwner>;
  readonly #scopeSets: string[][];
  readonly #byHash = new Map<string, number>();
  readonly #byId = new Map<string, number>();
  readonly #records: (KeyRecord | undefined)[];
  readonly #hash: SecretHasher;
  readonly tombstoned: ReadonlySet<string>;
  /** The token section (format 2), or null when the bundle lets no token through. */
  readonly tokens: TokenTrust | null;

  constructor(bundle: KeyBundle, hash: SecretHasher = hashSecret) {
    this.tokens = bundle.tokens ?? null;
    this.#keys = bundle.keys;
    this.#owners = bundle.owners;
    this.#scopeSets = bundle.scope_sets;
    this.#hash = hash;
    this.#records = new Array<KeyRecord | undefined>(bundle.keys.length);
    this.tombstoned = new Set(bundle.tombstones.map((t) => t.key_id));
    for (let i = 0; i < bundle.keys.length; i++) {
      const k = bundle.keys[i]!;
      this.#byId.set(k[0], i);
      const hs = k[3];
      for (let j = 0; j < hs.length; j += 2) this.#byHash.set(hs[j] as string, i);
    }
  }

  get size(): number {
    return this.#byId.size;
  }

  #record(i: number): KeyRecord {
    let r = this.#records[i];
    if (r === undefined) {
      const [keyId, ownerId, status, hs, expiresAt, scopes, rpm, ips, regions] = this.#keys[i]!;
      const owner = Object.hasOwn(this.#owners, ownerId) ? this.#owners[ownerId] : undefined;
      const hashes: KeyRecord['hashes'] = [];
      for (let j = 0; j < hs.length; j += 2) hashes.push({ hash: hs[j] as string, not_after: hs[j + 1] as number | null });
      r = {
        key_id: keyId,
        owner_id: ownerId,
        status,
        hashes,
        expires_at: expiresAt,
        scopes: this.#scopeSets[scopes] ?? [],
        rate_limit_rpm: rpm,
        allowed_ips: ips,
        allowed_regions: regions,
        // A key whose owner is missing from the bundle has no authority: judged as a purged owner.
        owner_status: owner?.status ?? 'purged',
        owner_permissions: owner?.permissions ?? [],
      };
      // A tombstoned key id is never honoured, whatever its record says.
      if (this.tombstoned.has(keyId) && r.status === 'active') r.status = 'revoked';
      this.#records[i] = r;
    }
    return r;
  }

  byHash(hash: string): KeyRecord | undefined {
    const i = this.#byHash.get(hash);
    return i === undefined ? undefined : this.#record(i);
  }

  /** A principal as the bundle knows it (key owners, and in format 2 every principal). */
  owner(principalId: string): BundleOwner | undefined {
    return Object.hasOwn(this.#owners, principalId) ? this.#owners[principalId] : undefined;
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
export async function openKeyBundle(
  input: string | Uint8Array,
  trusted: readonly TrustedKey[],
  hash?: SecretHasher,
): Promise<{ opened: OpenedEnvelope<KeyBundle>; index: KeyIndex }> {
  const opened = await openEnvelope(input, trusted, 'api-key-records');
  const p = opened.payload as Partial<KeyBundle>;
  if (
    !isObject(p.owners) ||
    !Array.isArray(p.keys) ||
    !Array.isArray(p.tombstones) ||
    !Array.isArray(p.scope_sets) ||
    !Array.isArray(p.key_fields) ||
    p.key_fields.join(',') !== KEY_FIELDS.join(',')
  ) {
    throw refused('malformed', 'the key bundle is malformed', 'invalid_request');
  }
  const sets = p.scope_sets.length;
  for (const k of p.keys) {
    if (
      !Array.isArray(k) ||
      k.length !== 9 ||
      typeof k[0] !== 'string' ||
      typeof k[1] !== 'string' ||
      typeof k[2] !== 'string' ||
      !Array.isArray(k[3]) ||
      k[3].length % 2 !== 0 ||
      !Number.isInteger(k[5]) ||
      (k[5] as number) < 0 ||
      (k[5] as number) >= sets ||
      !Array.isArray(k[7]) ||
      !Array.isArray(k[8])
    ) {
      throw refused('malformed', 'a key row in the bundle is malformed', 'invalid_request');
    }
    for (let j = 0; j < k[3].length; j += 2) {
      if (typeof k[3][j] !== 'string') throw refused('malformed', 'a key row in the bundle is malformed', 'invalid_request');
    }
  }
  for (const o of Object.values(p.owners)) {
    if (
      !isObject(o) ||
      typeof o['status'] !== 'string' ||
      !Array.isArray(o['permissions']) ||
      !o['permissions'].every((x) => typeof x === 'string')
    ) {
      throw refused('malformed', 'an owner in the bundle is malformed', 'invalid_request');
    }
  }
  if (p.format_version === 1) {
    if (p.tokens !== undefined) throw refused('malformed', 'a format 1 key bundle has no token section', 'invalid_request');
  } else if (p.tokens !== null && !isTokenTrust(p.tokens, p.format_version === 2 ? 'absent' : 'required', (p.format_version ?? 0) >= 4)) {
    throw refused('malformed', 'the token section of the key bundle is malformed', 'invalid_request');
  }
  return { opened: opened as OpenedEnvelope<KeyBundle>, index: new KeyIndex(opened.payload as KeyBundle, hash) };
}

/**
 * The token section's shape; `clients` is absent in format 2 and a list of strings from format 3;
 * `max_act_depth` an integer 1..16 from format 4, absent before; `issuers` optional from format 4 (a
 * list of strings naming `issuer` too), absent before.
 */
function isTokenTrust(t: unknown, clients: 'absent' | 'required', depth: boolean): t is TokenTrust {
  if (!isObject(t) || typeof t['issuer'] !== 'string' || !Array.isArray(t['keys']) || !Array.isArray(t['revoked'])) return false;
  const iss = t['issuers'];
  if (
    iss !== undefined &&
    (!depth || !Array.isArray(iss) || !iss.every((x) => typeof x === 'string' && x !== '') || !iss.includes(t['issuer']))
  )
    return false;
  const d = t['max_act_depth'];
  if (depth ? !Number.isInteger(d) || (d as number) < 1 || (d as number) > HARD_MAX_ACT_DEPTH : d !== undefined) return false;
  if (clients === 'absent' ? t['clients'] !== undefined : !Array.isArray(t['clients']) || !t['clients'].every((c) => typeof c === 'string'))
    return false;
  for (const k of t['keys']) {
    if (
      !isObject(k) ||
      typeof k['kid'] !== 'string' ||
      k['kty'] !== 'OKP' ||
      k['crv'] !== 'Ed25519' ||
      typeof k['x'] !== 'string' ||
      k['alg'] !== 'EdDSA' ||
      'd' in k
    )
      return false;
  }
  for (const r of t['revoked']) {
    if (!Array.isArray(r) || r.length !== 2 || typeof r[0] !== 'string' || !Number.isFinite(r[1])) return false;
  }
  return true;
}
