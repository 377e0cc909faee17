/**
 * Issuing signed bundles for a registered device (routes and the
 * `bundle keys` CLI share this), issued in the name of the cell's group (its
 * group id, cell/migrations.ts settleGroupId): the key bundle (format 3) from the IAM
 * projection plus what the device needs to judge this cell's access tokens
 * (every principal, the token issuer and signing keys, the live denylist, the
 * registered clients),
 * the crew bundle from a crew's export, and the trust anchor a device pins.
 */
import type { KeyRecord } from '../../core/apikey/verify.ts';
import { contains, type Holding } from '../../core/authority/contain.ts';
import { intersectSelectors } from '../../core/authority/scopes.ts';
import { invalid } from '../../core/errors.ts';
import type { AuthContext } from '../context.ts';
import { callerHolding } from '../iam/api.ts';
import { buildKeyBundle, type BundleOwner, type TokenTrust } from '../../bundles/key-bundle.ts';
import { buildCrewBundle, type CrewContent, type ModelReference } from '../../bundles/crew-bundle.ts';
import type { EdgeContext } from './context.ts';
import { insertCrewGraph, insertCrewIssue, insertKeyBundle, latestBundleVersion, nextBundleVersion } from './repository.ts';
import { grants } from '../../core/authority/scopes.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import type { HeldGrant } from '../teams/api.ts';

/** Default lifetime of a key bundle: a week, long enough to carry it, short enough to bound stale keys. */
export const DEFAULT_KEY_BUNDLE_TTL_SECONDS = 7 * 24 * 3600;
/** Default lifetime of a crew bundle: 30 days. */
export const DEFAULT_CREW_BUNDLE_TTL_SECONDS = 30 * 24 * 3600;
/** The longest lifetime any bundle may be given; a key bundle's is bounded lower by configuration (`--max-key-bundle-ttl`). */
export const MAX_BUNDLE_TTL_SECONDS = 365 * 24 * 3600;
/** Times a key bundle's content is read again when another issuance overtook it (then it is issued as read). */
const FRESHNESS_ATTEMPTS = 5;

export interface IssuedBundle {
  text: string;
  version: number;
  issued_at: number;
  expires_at: number | null;
}

/** A crew bundle as issued: the bundle, and what it held of each agent's ledger (teams `holdForDevice`). */
export interface IssuedCrewBundle extends IssuedBundle {
  held: Record<string, HeldGrant>;
}

function ttlMs(ttlSeconds: number | undefined, dflt: number, max = MAX_BUNDLE_TTL_SECONDS): number {
  const t = ttlSeconds ?? Math.min(dflt, max);
  if (!Number.isInteger(t) || t < 1 || t > max)
    throw invalid(`ttl_seconds must be 1 to ${max} here`, { reason: 'ttl_too_long', max_ttl_seconds: max });
  return t * 1000;
}

/**
 * Every key as the device must judge it: active records, plus the records of
 * revoked or soft-deleted keys (so the device refuses them for the same reason
 * the cell does), plus tombstones for keys that are gone.
 */
export async function keyRecordsForEdge(
  ctx: EdgeContext,
  issuer: Issuer | null = null,
): Promise<{ records: KeyRecord[]; tombstones: { key_id: string; at: number }[] }> {
  const { records, tombstones } = await ctx.iam.projectKeyRecords();
  const all = [...records];
  for (const t of tombstones) {
    const row = await ctx.iam.keyRowFresh(t.key_id);
    if (row) all.push(await ctx.iam.keyRecord(row));
  }
  if (issuer === null) return { records: all, tombstones };
  const kept: KeyRecord[] = [];
  for (const r of all) {
    const row = await ctx.iam.keyRow(r.key_id);
    if (!row) continue;
    const v = await ctx.iam.credentialVerdict(issuer, {
      kind: 'api_key',
      id: row.id,
      ownerId: row.owner_id,
      authority: await ctx.iam.keyAuthority(row),
    });
    if (v.ok) kept.push({ ...r, owner_permissions: capped(issuer, r.owner_permissions) });
  }
  // Tombstones only refuse: every one stays, so a dead key is never honoured whoever issued the bundle.
  return { records: kept, tombstones };
}

/**
 * Whoever issues a bundle through the API, as the containment rule sees them (docs/security.md): a key
 * bundle makes a device honour the keys and tokens it carries, which is acting on those credentials,
 * so it carries only the keys the issuer could act on (their owner is the issuer or one it manages, and
 * their authority is within the issuer's) and, as token subjects, only the principals it manages and
 * itself, every principal's permissions capped at what the issuer holds. Null:
 * the operator's `bundle keys` from the cell's own data directory, which holds every key.
 */
export interface Issuer {
  principalId: string;
  holding: Holding;
}

/**
 * A principal's permissions as a bundle of `issuer` carries them: within what the issuer holds. The same
 * for the principals it manages (theirs are within it already); for the issuer itself, when it presents a
 * credential narrower than its principal, the device then honours none of its tokens beyond that credential.
 */
function capped(issuer: Issuer, permissions: readonly string[]): string[] {
  return intersectSelectors(permissions, issuer.holding.permissions);
}

/** The issuer of a request, or null when it holds everything (nothing to leave out). */
export function issuerOf(auth: AuthContext): Issuer | null {
  const holding = callerHolding(auth);
  return contains(holding, { permissions: ['*'], envelope: 'unbounded' }).ok ? null : { principalId: auth.principal.id, holding };
}

/**
 * What a device needs to judge this cell's access tokens offline: the issuer
 * and every issuer the group accepts (`service://<group id>` and its
 * `--oauth-issuer` URLs),
 * the published token signing keys, the revoked token ids whose tokens
 * have not expired (tokens are short-lived, so the list stays short), and the
 * registered clients that exist (format 3): the cell refuses a deleted
 * client's tokens at once, and the device refuses them under any bundle issued
 * after the deletion. The live set rather than the deleted ones: deleting a
 * client removes its row, so only the live set is known, and a client missing
 * from it is refused (deny by default); a client id is ~25 bytes.
 */
export async function tokenTrustForEdge(ctx: EdgeContext): Promise<TokenTrust> {
  return {
    issuer: ctx.oauth.issuer(),
    // Tokens signed under any of the group's names verify at the device, as at every cell.
    issuers: ctx.oauth.acceptedIssuers(),
    keys: ctx.oauth
      .keyring()
      .published.map((k) => ({ kid: k.kid, kty: 'OKP' as const, crv: 'Ed25519' as const, x: k.x!, alg: 'EdDSA' as const })),
    revoked: await ctx.oauth.liveRevocations(Math.floor(ctx.core.clock.now() / 1000)),
    clients: await ctx.oauth.clientIds(),
    max_act_depth: ctx.core.config.maxDelegationDepth,
  };
}

/**
 * Every principal with its status and, when active, its role permissions: the possible token subjects;
 * with an issuer, only the issuer and the principals it manages (holds all the authority of).
 */
export async function subjectsForEdge(ctx: EdgeContext, issuer: Issuer | null = null): Promise<Record<string, BundleOwner>> {
  const out: Record<string, BundleOwner> = {};
  const PAGE = 1000;
  for (let offset = 0; ; offset += PAGE) {
    const page = await ctx.iam.principalsPage(PAGE, offset);
    for (const p of page) {
      if (issuer !== null && p.id !== issuer.principalId && !contains(issuer.holding, await ctx.iam.authorityOf(p)).ok) continue;
      const permissions = p.status === 'active' ? await ctx.iam.permissionsOf(p) : [];
      out[p.id] = { status: p.status, permissions: issuer === null ? permissions : capped(issuer, permissions) };
    }
    if (page.length < PAGE) return out;
  }
}

/**
 * A key bundle for `deviceId`. Its version comes from the store's counter
 * (one for the group of cells), and a higher version never carries older
 * authority than a lower one: the content is read after the version is
 * taken, and read again under a new version when another issuance (on any
 * cell) took a version meanwhile. Once the check passes, every later version
 * was taken, and so its content read, after this content was read.
 */
export async function issueKeyBundle(
  ctx: EdgeContext,
  deviceId: string,
  opts: { ttlSeconds?: number | undefined; issuer?: Issuer | null } = {},
): Promise<IssuedBundle> {
  await ctx.devices.requireActive(deviceId);
  // A device honours the bundle's keys until it expires: the lifetime is bounded by the cell's configuration.
  const ttl = ttlMs(opts.ttlSeconds, DEFAULT_KEY_BUNDLE_TTL_SECONDS, ctx.core.config.maxKeyBundleTtlSeconds);
  const issuer = opts.issuer ?? null;
  const { store } = ctx.core;
  for (let attempt = 1; ; attempt++) {
    const version = await store.write((tx) => nextBundleVersion(tx, 'api-key-records'));
    const now = ctx.core.clock.now();
    const { records, tombstones } = await keyRecordsForEdge(ctx, issuer);
    const subjects = await subjectsForEdge(ctx, issuer);
    const tokens = await tokenTrustForEdge(ctx);
    if (attempt < FRESHNESS_ATTEMPTS && (await latestBundleVersion(store, 'api-key-records')) !== version) continue;
    const text = await buildKeyBundle({
      issuer: ctx.core.config.groupId,
      signer: ctx.iam.signer(),
      audience: deviceId,
      version,
      issuedAt: now,
      expiresAt: now + ttl,
      records,
      tombstones,
      subjects,
      tokens,
    });
    const approvers = bundleHolders(records, subjects, PERMISSIONS.teamsApprove);
    const resolvers = bundleHolders(records, subjects, PERMISSIONS.teamsWrite);
    await store.write((tx) =>
      insertKeyBundle(tx, { device_id: deviceId, version, issued_at: now, expires_at: now + ttl, approvers, resolvers }),
    );
    return { text, version, issued_at: now, expires_at: now + ttl };
  }
}

/**
 * The principals a key bundle lets act with `permission` on its device (agent_teams.approve: decide approvals;
 * agent_teams.write: resolve lost outcomes): those it carries active with it, as the bundle lists its owners (a
 * key's owner as its record says, then the other subjects). Kept per issued bundle, for re-judging on import.
 */
function bundleHolders(records: readonly KeyRecord[], subjects: Record<string, BundleOwner>, permission: string): string[] {
  const owners = new Map<string, BundleOwner>();
  for (const r of records)
    if (!owners.has(r.owner_id)) owners.set(r.owner_id, { status: r.owner_status, permissions: [...r.owner_permissions] });
  for (const [id, o] of Object.entries(subjects)) if (!owners.has(id)) owners.set(id, o);
  return [...owners]
    .filter(([, o]) => o.status === 'active' && grants(o.permissions, permission))
    .map(([id]) => id)
    .sort();
}

/**
 * A crew bundle for `deviceId`. Its `budgets` are held on the ledgers for the device in the transaction that
 * takes the bundle's version (teams `holdForDevice`: `shares[agent]`, by default all that is left), so a
 * refused share or a failed issue holds nothing; each agent's entry is the device's cumulative ceiling
 * (what it was handed in all, less what was released), since the device counts its spending across
 * bundles (edge/runs.ts deviceBudget). Agents without a ledger get no entry.
 */
export async function issueCrewBundle(
  ctx: EdgeContext,
  deviceId: string,
  crew: CrewContent,
  model: ModelReference | null,
  opts: { ttlSeconds?: number | undefined; shares?: Readonly<Record<string, number>> | undefined } = {},
): Promise<IssuedCrewBundle> {
  await ctx.devices.requireActive(deviceId);
  const ttl = ttlMs(opts.ttlSeconds, DEFAULT_CREW_BUNDLE_TTL_SECONDS);
  const now = ctx.core.clock.now();
  // The graph is kept by its hash: a journal carried back from a device is replayed on it (journal-import.ts).
  const { version, held } = await ctx.core.store.write(async (tx) => {
    await insertCrewGraph(tx, crew.graph_hash, JSON.stringify(crew.graph), now);
    // To whom: the device's journals of this graph are charged to the ledgers it holds budget of (journal-import.ts).
    await insertCrewIssue(tx, deviceId, crew.graph_hash, now);
    const agentIds = crew.agents.flatMap((a) => {
      const id = (a as { agent_id?: unknown }).agent_id;
      return typeof id === 'string' ? [id] : [];
    });
    const held = await ctx.teams.holdForDevice(tx, deviceId, agentIds, opts.shares, now + ttl);
    return { version: await nextBundleVersion(tx, 'crew'), held };
  });
  const budgets = Object.fromEntries(Object.entries(held).map(([a, h]) => [a, h.ceiling]));
  const text = await buildCrewBundle({
    issuer: ctx.core.config.groupId,
    signer: ctx.iam.signer(),
    audience: deviceId,
    version,
    issuedAt: now,
    expiresAt: now + ttl,
    crew: { ...crew, budgets },
    model,
  });
  return { text, version, issued_at: now, expires_at: now + ttl, held };
}

/**
 * What a device pins with `edge trust`: the group's id (a single cell's is its
 * cell id) and the active identity public keys of every member, in kid order.
 * Bundles carry the group's id as their issuer and are signed by the issuing
 * cell's own key, so a device accepts the bundles of every member it pinned,
 * and their versions (one counter per bundle type in the store) only go up. A
 * cell that joins later signs with a key the device has not pinned: pin the
 * anchor again (docs/multi-cell.md).
 */
export async function trustAnchor(
  ctx: Pick<EdgeContext, 'core' | 'iam'>,
): Promise<{ cell_id: string; keys: { kid: string; jwk: JsonWebKey }[] }> {
  const keys = (await ctx.iam.groupIdentityKeys())
    .filter((k) => k.retired_at === null)
    .map((k) => ({ kid: k.kid, jwk: k.jwk }))
    .sort((a, b) => (a.kid < b.kid ? -1 : a.kid > b.kid ? 1 : 0));
  return { cell_id: ctx.core.config.groupId, keys };
}
