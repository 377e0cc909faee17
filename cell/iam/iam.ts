/**
 * The IAM module's API, as the other modules and the gateway use it: who a
 * principal is and what it holds, API keys and their judgement, the
 * containment gate, the audit trail, the cell's identity key.
 *
 * Hot records (principals, role permissions, keys by secret hash) are read
 * through in-process caches that every committed write to their tables
 * invalidates, this cell's and, on PostgreSQL, every other cell's
 * (cell/store/change-cache.ts over `store.onChange`). A read that raced a
 * write never fills a cache with the older row, and while other cells cannot
 * be heard the caches read through.
 */
import { nativeSha256Hex } from '../../runtime/native-hash.ts';
import { isSecretFormat, KEY_PREFIX } from '../../core/apikey/secret.ts';
import { verifyPresentedKey, type KeyRecord } from '../../core/apikey/verify.ts';
import type { AuthorityEnvelope } from '../../core/authority/envelope.ts';
import { meetCeilings, toCeiling, type Ceiling } from '../../core/authority/ceiling.ts';
import { contains, type Containment, type Grant, type Holding } from '../../core/authority/contain.ts';
import { effectiveAuthority, grants, normalize } from '../../core/authority/scopes.ts';
import { generateEd25519 } from '../../core/crypto/ed25519.ts';
import { ed25519Signer } from '../../runtime/ed25519-signer.ts';
import { ServiceError, forbidden, notFound, unauthorized } from '../../core/errors.ts';
import { BUILTIN_ROLES, PERMISSIONS } from '../../core/permissions.ts';
import type { AuthContext, Authenticator, CellCore } from '../context.ts';
import { clientIp } from '../http/client-ip.ts';
import { ChangeCache } from '../store/change-cache.ts';
import type { Reader, Tx } from '../store/types.ts';
import { checkPassword, hashPassword } from './passwords.ts';
import type { CredentialFacts, CredentialVerdict, NewPrincipal, Principal, PrincipalKind, Reached } from './api.ts';
import { createPrincipalTx } from './principals.ts';
import * as repo from './repository.ts';
import type { Custody } from '../custody/api.ts';

export interface Role {
  name: string;
  permissions: string[];
  builtin: boolean;
  description: string | null;
}

export interface CellKey {
  kid: string;
  jwk: JsonWebKey;
  retired_at: number | null;
}

/** An identity key of some cell of the group (journals written by several cells verify against these). */
export interface GroupCellKey extends CellKey {
  cell_id: string;
}

export interface Signer {
  kid: string;
  sign(bytes: Uint8Array): Promise<Uint8Array>;
}

/**
 * Which tables each cache reads. A key entry embeds its owner and the owner's
 * role permissions, so principals and roles clear it too; a new key (mint)
 * leaves principals and roles cached.
 */
const PRINCIPAL_TABLES = ['principals'];
const ROLE_TABLES = ['roles'];
const KEY_ENTRY_TABLES = ['principals', 'roles', 'api_keys', 'key_tombstones'];
const KEY_ROW_TABLES = ['api_keys', 'key_tombstones'];

interface KeyEntry {
  row: repo.KeyRow;
  owner: Principal | undefined;
  record: KeyRecord;
  envelope: Ceiling;
  /** The AuthContext a request presenting this key gets once judged: it follows from the entry alone. Shared: never mutate it. */
  auth?: AuthContext;
}

/**
 * core's hashSecret (lower-case hex SHA-256 of the secret's UTF-8 bytes),
 * through node's one-shot native hash: every request presenting a key hashes
 * it, and the pure-JS hash (or a createHash object) took several times longer
 * (bench/RESULTS.md). A key secret is ASCII (isSecretFormat), so the string
 * hashes as its UTF-8 bytes.
 */
function presentedHash(secret: string): string {
  return nativeSha256Hex(secret);
}

export class Iam {
  readonly #principals: ChangeCache<string, Principal | null>;
  readonly #roles: ChangeCache<string, Role | null>;
  readonly #keysByHash: ChangeCache<string, KeyEntry | null>;
  readonly #keysById: ChangeCache<string, repo.KeyRow | null>;
  #identity: { signer: Signer; keys: CellKey[] } | null = null;
  #groupKeys: { keys: GroupCellKey[]; generation: number } | null = null;
  #groupKeysGeneration = 0;
  #dummyHash: string | null = null;

  constructor(
    private readonly core: CellCore,
    /** The group's secrets key: identity keys are sealed under it, and only those it opens are the group's. */
    private readonly custody: Custody,
  ) {
    this.#principals = new ChangeCache(core.store, PRINCIPAL_TABLES, 50_000);
    this.#roles = new ChangeCache(core.store, ROLE_TABLES, 10_000);
    this.#keysByHash = new ChangeCache(core.store, KEY_ENTRY_TABLES, 50_000);
    this.#keysById = new ChangeCache(core.store, KEY_ROW_TABLES, 50_000);
    core.store.onChange((c) => {
      // Another cell joined (or rotated): the group's identity keys are read again.
      if (c.tables.has('cell_keys')) {
        this.#groupKeysGeneration++;
        this.#groupKeys = null;
      }
    });
  }

  /** Drops every cached IAM record. */
  invalidate(): void {
    this.#principals.clear();
    this.#roles.clear();
    this.#keysByHash.clear();
    this.#keysById.clear();
  }

  // ------------------------------------------------------------ principals and roles

  /**
   * Creates a principal inside the caller's transaction (another module's principals: Agent Teams'
   * agents). Names are unique (409 name_taken); roles exist (400 unknown_role).
   */
  createPrincipalTx(tx: Tx, input: NewPrincipal): Promise<Principal> {
    return createPrincipalTx(this.core.clock, tx, input);
  }

  async principal(id: string): Promise<Principal | undefined> {
    const hit = this.#principals.get(id);
    if (hit !== undefined) return hit ?? undefined;
    const gen = this.#principals.generation;
    const p = await repo.principalById(this.core.store, id);
    this.#principals.set(id, p ?? null, gen);
    return p;
  }

  /** A page of principals, oldest first. */
  principalsPage(limit: number, offset: number, kind?: string): Promise<Principal[]> {
    return repo.listPrincipals(this.core.store, limit, offset, kind);
  }

  principalByName(name: string): Promise<Principal | undefined> {
    return repo.principalByName(this.core.store, name);
  }

  /**
   * Sets a principal's envelope ceiling inside the caller's transaction (Agent
   * Teams: an agent's authority template is its principal's ceiling). The
   * caller has checked containment; the cache drops on commit.
   */
  setAuthorityTx(tx: Tx, principalId: string, authority: AuthorityEnvelope): Promise<void> {
    return repo.setPrincipalAuthority(tx, principalId, authority);
  }

  /** How many principals of a kind are active (Agent Teams' agent quota); pass `tx` to count inside a transaction. */
  activeCount(kind: PrincipalKind, db: Reader = this.core.store): Promise<number> {
    return repo.countActive(db, kind);
  }

  async role(name: string): Promise<Role | undefined> {
    // Own keys only: a role named `constructor` is not Object.prototype's.
    const builtin = Object.hasOwn(BUILTIN_ROLES, name) ? BUILTIN_ROLES[name] : undefined;
    if (builtin) return { name, permissions: [...builtin], builtin: true, description: null };
    const hit = this.#roles.get(name);
    if (hit !== undefined) return hit ?? undefined;
    const gen = this.#roles.generation;
    const r = await repo.customRole(this.core.store, name);
    const role = r ? { name: r.name, permissions: r.permissions, builtin: false, description: r.description } : null;
    this.#roles.set(name, role, gen);
    return role ?? undefined;
  }

  async roles(): Promise<Role[]> {
    return [
      ...Object.entries(BUILTIN_ROLES).map(([name, p]) => ({ name, permissions: [...p], builtin: true, description: null })),
      ...(await repo.customRoles(this.core.store)).map((r) => ({
        name: r.name,
        permissions: r.permissions,
        builtin: false,
        description: r.description,
      })),
    ];
  }

  /** Union of the permission selectors of the named roles (unknown roles grant nothing). */
  async rolePermissions(roles: readonly string[]): Promise<string[]> {
    const out: string[] = [];
    for (const r of roles) out.push(...((await this.role(r))?.permissions ?? []));
    return normalize(out);
  }

  /** The principal's role permissions (selectors). */
  permissionsOf(p: Pick<Principal, 'roles'>): Promise<string[]> {
    return this.rolePermissions(p.roles);
  }

  /** Everything a principal holds: its role permissions and its ceiling (as a grant, or as a holder's holding). */
  async authorityOf(p: Principal): Promise<Holding> {
    return { permissions: await this.permissionsOf(p), envelope: p.authority };
  }

  /** The target principal, or not_found when the caller may not even see it. */
  async visiblePrincipal(auth: AuthContext, id: string): Promise<Principal> {
    const p = await this.principal(id);
    if (!p || p.status === 'purged') throw notFound('principal');
    if (p.id !== auth.principal.id && !grants(auth.effective, PERMISSIONS.principalsRead)) throw notFound('principal');
    return p;
  }

  /** A user principal whose password matches; the same time is spent on unknown names. */
  async verifyUserPassword(name: string, password: string): Promise<Principal | null> {
    const p = await this.principalByName(name);
    const stored = p?.kind === 'user' && p.status === 'active' ? await repo.passwordHashOf(this.core.store, p.id) : null;
    if (!stored) {
      this.#dummyHash ??= await hashPassword('dummy-password-for-timing');
      await checkPassword(password, this.#dummyHash);
      return null;
    }
    return (await checkPassword(password, stored)) ? p! : null;
  }

  // ------------------------------------------------------------ containment (docs/security.md)

  /** The verdict without side effects. */
  withinCaller(auth: AuthContext, grant: Grant): Containment {
    return contains(callerHolding(auth), grant);
  }

  /**
   * The one gate of every operation that creates, changes or uses authority:
   * refuses (audited, 403 `wider_than_caller`) unless `grant` stays inside the
   * caller's effective authority now.
   */
  async assertWithinCaller(auth: AuthContext, grant: Grant, ctx: { action: string; target: string }): Promise<void> {
    const v = contains(callerHolding(auth), grant);
    if (v.ok) return;
    const exceeds = {
      ...(v.permissions.length ? { permissions: v.permissions } : {}),
      ...(v.envelope.length ? { envelope: v.envelope } : {}),
    };
    await this.auditNow({
      actor: auth.principal.id,
      action: ctx.action,
      target: ctx.target,
      outcome: 'refused',
      details: { reason: 'wider_than_caller', exceeds },
    });
    throw forbidden(`${ctx.action}: this would carry more authority than the calling credential holds`, {
      reason: 'wider_than_caller',
      exceeds,
    });
  }

  /**
   * The gate of every operation that makes something standing (a credential or authority that
   * acts later, without the request): API keys (mint, rotate), OAuth clients (register, rotate),
   * SATs, job definitions (create, re-author, enable), published endpoints, edge devices, key and
   * crew bundles, principals and roles (create, change), agents. A delegated credential (a token
   * carrying `act`: isDelegated) makes nothing that outlives it: refused, audited with its chain,
   * 403 `delegated_credential`. Exchange again for what is needed now instead.
   */
  async assertNotDelegated(auth: AuthContext, ctx: { action: string; target: string }): Promise<void> {
    if (!isDelegated(auth)) return;
    const actors = [...(auth.credential.actors ?? [])];
    await this.auditNow({
      actor: auth.principal.id,
      action: ctx.action,
      target: ctx.target,
      outcome: 'refused',
      details: { reason: 'delegated_credential', actors, credential: auth.credential.id },
    });
    throw forbidden(`${ctx.action}: a delegated token (one that names actors) makes nothing that outlives it`, {
      reason: 'delegated_credential',
      actors,
    });
  }

  /** Refuses unless the caller holds every permission and all the envelope authority of `target`. */
  async assertManages(auth: AuthContext, target: Principal, action: string): Promise<void> {
    await this.assertWithinCaller(auth, await this.authorityOf(target), { action, target: target.id });
  }

  // ------------------------------------------------------------ acting on credentials, changing shared things

  /**
   * Whether `holder` may act on a credential (rotate, revoke, read, delete an
   * API key, an OAuth client, a SAT, a stored secret): the same right as
   * minting it. The holder is the credential's owner or manages it (holds all
   * of the owner's authority), and the credential's own authority is within
   * the holder's. Pure apart from reading the owner.
   */
  async credentialVerdict(holder: { principalId: string; holding: Holding }, c: CredentialFacts): Promise<CredentialVerdict> {
    let ownerExceeds: Containment = { ok: true };
    if (c.ownerId !== null && c.ownerId !== holder.principalId) {
      const owner = await this.principal(c.ownerId);
      if (owner) ownerExceeds = contains(holder.holding, await this.authorityOf(owner));
    }
    const own = contains(holder.holding, c.authority);
    if (ownerExceeds.ok && own.ok) return { ok: true };
    const permissions = normalize([...(ownerExceeds.ok ? [] : ownerExceeds.permissions), ...(own.ok ? [] : own.permissions)]);
    const envelope = [...new Set([...(ownerExceeds.ok ? [] : ownerExceeds.envelope), ...(own.ok ? [] : own.envelope)])];
    return {
      ok: false,
      exceeds: { ...(permissions.length ? { permissions } : {}), ...(envelope.length ? { envelope } : {}) },
      ...(ownerExceeds.ok ? {} : { owner_id: c.ownerId! }),
    };
  }

  /**
   * The one gate of every route that acts on a credential: refuses (audited,
   * 403 `wider_than_caller`, `details.credential`, `details.owner_id` when the
   * caller does not manage the owner) unless the caller could have minted it.
   */
  async assertMayActOnCredential(auth: AuthContext, c: CredentialFacts, action: string): Promise<void> {
    const v = await this.credentialVerdict({ principalId: auth.principal.id, holding: callerHolding(auth) }, c);
    if (v.ok) return;
    const details = {
      reason: 'wider_than_caller' as const,
      credential: { kind: c.kind, id: c.id },
      exceeds: v.exceeds,
      ...(v.owner_id ? { owner_id: v.owner_id } : {}),
    };
    await this.auditNow({ actor: auth.principal.id, action, target: c.id, outcome: 'refused', details });
    throw forbidden(
      v.owner_id
        ? `${action}: the credential belongs to a principal the caller does not manage`
        : `${action}: the credential carries more authority than the calling credential holds`,
      details,
    );
  }

  /**
   * The one gate of every change of a shared thing (a governing contract, a
   * skill, a blueprint, a formation's prompt and billets, a crew's bindings, a
   * model provider's destination): the caller's effective authority covers
   * each agent (and so each seat) the change reaches, or the caller manages
   * (holds all the authority of) that agent's owner. Refusal: audited, 403
   * `shared_change_exceeds_caller` with `details.reaches` (the ids not covered).
   */
  async assertMayChangeShared(
    auth: AuthContext,
    thing: { kind: string; id: string },
    reached: readonly Reached[],
    action: string,
  ): Promise<void> {
    const holding = callerHolding(auth);
    const owners = new Map<string, boolean>();
    const reaches: string[] = [];
    for (const r of reached) {
      if (contains(holding, r.authority).ok) continue;
      if (r.ownerId !== null) {
        let manages = owners.get(r.ownerId);
        if (manages === undefined) {
          const owner = await this.principal(r.ownerId);
          manages = owner !== undefined && owner.status === 'active' && contains(holding, await this.authorityOf(owner)).ok;
          owners.set(r.ownerId, manages);
        }
        if (manages) continue;
      }
      if (!reaches.includes(r.id)) reaches.push(r.id);
    }
    if (reaches.length === 0) return;
    const details = { reason: 'shared_change_exceeds_caller' as const, [`${thing.kind}_id`]: thing.id, reaches };
    await this.auditNow({ actor: auth.principal.id, action, target: thing.id, outcome: 'refused', details });
    throw forbidden(
      `${action}: the change reaches ${reaches.length} agent(s) whose authority the calling credential does not cover and whose owners it does not manage`,
      details,
    );
  }

  /**
   * The shared-things rule for what a principal owns and what acts as it (a job definition acts as
   * its author, a published endpoint as its publisher, a run as its requester): disabling, enabling,
   * re-authoring, deleting or cancelling another principal's needs the same reach as changing a crew
   * (assertMayChangeShared), the thing reaching its owner: the caller covers all of the owner's
   * authority (manages it). The owner's own, and one whose owner is gone, need only the route's
   * permission. Refusal: 403 `shared_change_exceeds_caller`, audited.
   */
  async assertMayActOnOwned(auth: AuthContext, thing: { kind: string; id: string; ownerId: string }, action: string): Promise<void> {
    if (thing.ownerId === auth.principal.id) return;
    const owner = await this.principal(thing.ownerId);
    if (!owner || owner.status === 'purged') return;
    const reached: Reached = { id: owner.id, authority: await this.authorityOf(owner), ownerId: owner.id };
    await this.assertMayChangeShared(auth, { kind: thing.kind, id: thing.id }, [reached], action);
  }

  /** What a change reaching an agent principal must cover: the agent's authority; its owner is who minted it. */
  async reachedAgent(agentId: string, ownerId: string | null): Promise<Reached | undefined> {
    const p = await this.principal(agentId);
    if (!p || p.status === 'purged') return undefined;
    return { id: agentId, authority: await this.authorityOf(p), ownerId };
  }

  // ------------------------------------------------------------ audit

  /** Records an audit entry inside the caller's transaction (`at` defaults to now). */
  audit(tx: Tx, e: Omit<repo.AuditRecord, 'at'> & { at?: number }): Promise<void> {
    return repo.insertAudit(tx, { ...e, at: e.at ?? this.core.clock.now() });
  }

  /** Records an audit entry in a transaction of its own (refusals). */
  async auditNow(e: Omit<repo.AuditRecord, 'at'> & { at?: number }): Promise<void> {
    await this.core.store.write((tx) => this.audit(tx, e));
  }

  // ------------------------------------------------------------ API keys

  /**
   * A key by id, from the cache (reads: GET, token judgement). The row is
   * shared: never mutate it. Operations that write from what they read
   * (rotate, revoke) use `keyRowFresh`.
   */
  async keyRow(id: string): Promise<repo.KeyRow | undefined> {
    const hit = this.#keysById.get(id);
    if (hit !== undefined) return hit ?? undefined;
    const gen = this.#keysById.generation;
    const row = await repo.keyById(this.core.store, id);
    this.#keysById.set(id, row ?? null, gen);
    return row;
  }

  /** A key by id, read from the store now (not the cache). */
  keyRowFresh(id: string): Promise<repo.KeyRow | undefined> {
    return repo.keyById(this.core.store, id);
  }

  /** The envelope a key holds: its owner's ceiling met with the key's own cap. */
  keyEnvelope(row: Pick<repo.KeyRow, 'authority'>, owner: Pick<Principal, 'authority'> | undefined): Ceiling {
    if (!owner) return {};
    return row.authority === null ? owner.authority : meetCeilings(owner.authority, toCeiling(row.authority));
  }

  /** Everything a key lets its holder do, as containment compares it. */
  async keyAuthority(row: repo.KeyRow): Promise<Grant> {
    const owner = await this.principal(row.owner_id);
    const perms = owner ? await this.permissionsOf(owner) : [];
    return { permissions: effectiveAuthority(perms, row.scopes), envelope: this.keyEnvelope(row, owner) };
  }

  /** The record core judges (and the edge's bundle carries), built from a row and its owner. */
  async keyRecord(row: repo.KeyRow, owner?: Principal): Promise<KeyRecord> {
    const o = owner ?? (await this.principal(row.owner_id));
    const hashes: KeyRecord['hashes'] = [{ hash: row.hash, not_after: row.expires_at }];
    if (row.prev_hash && row.prev_not_after !== null) hashes.push({ hash: row.prev_hash, not_after: row.prev_not_after });
    return {
      key_id: row.id,
      owner_id: row.owner_id,
      owner_status: o?.status ?? 'purged',
      status: row.status,
      hashes,
      expires_at: row.expires_at,
      owner_permissions: o ? await this.permissionsOf(o) : [],
      scopes: row.scopes,
      rate_limit_rpm: row.rate_limit_rpm,
      allowed_ips: row.allowed_ips,
      allowed_regions: row.allowed_regions,
    };
  }

  /** The cached entry (no promise: the gateway's hot path), or the store read that fills it. */
  #keyEntry(hash: string): KeyEntry | null | Promise<KeyEntry | null> {
    const hit = this.#keysByHash.get(hash);
    if (hit !== undefined) return hit;
    return this.#readKeyEntry(hash);
  }

  async #readKeyEntry(hash: string): Promise<KeyEntry | null> {
    const gen = this.#keysByHash.generation;
    const row = await repo.keyByHash(this.core.store, hash);
    const owner = row ? await this.principal(row.owner_id) : undefined;
    const entry = row ? { row, owner, record: await this.keyRecord(row, owner), envelope: this.keyEnvelope(row, owner) } : null;
    this.#keysByHash.set(hash, entry, gen);
    return entry;
  }

  /**
   * Judges a presented secret (core's verifyPresentedKey); returns the
   * request's authority or throws the refusal. The judgement runs on every
   * request (status, expiry, grace, IP and region rules against the entry
   * cached by hash, which every committed change to keys, principals or roles
   * drops); only what follows from the entry alone (the AuthContext) is kept
   * with it. Without a promise when the entry is cached.
   */
  authenticateKeySecret(secret: string, ip: string | null): AuthContext | Promise<AuthContext> {
    if (!isSecretFormat(secret)) throw unauthorized('malformed API key');
    const hash = presentedHash(secret);
    const entry = this.#keyEntry(hash);
    return entry instanceof Promise ? entry.then((e) => this.#judge(e, hash, ip)) : this.#judge(entry, hash, ip);
  }

  #judge(entry: KeyEntry | null, hash: string, ip: string | null): AuthContext {
    const verdict = verifyPresentedKey(entry?.record, hash, { now: this.core.clock.now(), ip, region: this.core.config.region });
    if (!verdict.ok || !entry?.owner) {
      const code = verdict.ok ? 'unauthorized' : verdict.code;
      throw new ServiceError(code, code === 'forbidden' ? 'the key may not be used from here' : 'API key refused', {
        details: { reason: verdict.ok ? 'owner_inactive' : verdict.reason },
      });
    }
    if (entry.auth) return entry.auth;
    const { record, owner } = entry;
    // Shared by every request presenting the key until the entry is dropped: frozen, so a handler that
    // tried to change one request's authority would fail loudly rather than change the next request's.
    entry.auth = Object.freeze({
      principal: Object.freeze({ id: owner.id, kind: owner.kind, name: owner.name, roles: Object.freeze([...owner.roles]) as string[] }),
      permissions: Object.freeze([...record.owner_permissions]) as string[],
      scopes: Object.freeze([...record.scopes]) as string[],
      effective: Object.freeze([...verdict.effective]) as string[],
      envelope: entry.envelope,
      credential: Object.freeze({
        type: 'api_key' as const,
        id: record.key_id,
        root: `api_key:${record.key_id}`,
        ...(record.rate_limit_rpm !== null ? { rateLimitRpm: record.rate_limit_rpm } : {}),
      }),
    });
    return entry.auth;
  }

  /** The gateway's authenticator for `Bearer svck_live_…`. */
  keyAuthenticator(): Authenticator {
    return {
      name: 'api_key',
      // A key's judgement reads the caches these tables empty on every cell: authenticating again is its recheck.
      tables: KEY_ENTRY_TABLES,
      authenticate: ({ scheme, token }, c) => {
        if (!token.startsWith(KEY_PREFIX)) return null;
        if (scheme !== 'bearer') throw unauthorized('API keys are presented with the Bearer scheme');
        return this.authenticateKeySecret(token, clientIp(c, this.core.config.trustedProxies));
      },
    };
  }

  /** Every key as the edge bundle carries it: live records, and tombstones for the dead. */
  async projectKeyRecords(): Promise<{ records: KeyRecord[]; tombstones: { key_id: string; at: number }[] }> {
    const records: KeyRecord[] = [];
    const tombstones: { key_id: string; at: number }[] = [];
    for (const r of await repo.allKeys(this.core.store)) {
      if (r.status === 'active') records.push(await this.keyRecord(r));
      else tombstones.push({ key_id: r.id, at: r.revoked_at ?? r.deleted_at ?? r.created_at });
    }
    tombstones.push(...(await repo.keyTombstones(this.core.store)));
    return { records, tombstones };
  }

  // ------------------------------------------------------------ the cell's identity (journals, bundles)

  /**
   * Creates this cell's identity key on first start and loads it. Keys are per
   * cell (`cell_keys.cell_id`): in a group each cell signs with its own key, so a
   * journal record's signer names the cell that wrote it. A key recorded before
   * keys were per cell becomes the key of the first cell that starts.
   *
   * Only the group's keys count (`#trusted`: sealed under the group's secrets
   * key and the private half of the row's public key): a row someone wrote
   * without the key (sealed under another, or in the clear) is neither used
   * nor published, and a cell whose only active key is such a row makes a new one.
   */
  async ensureIdentity(): Promise<void> {
    const cellId = this.core.config.cellId;
    const activeOf = (rows: repo.CellKeyRow[]) => [...rows].reverse().find((k) => k.retired_at === null && this.#trusted(k) !== null);
    let keys = await repo.cellKeys(this.core.store, 'identity', cellId);
    if (!activeOf(keys)) {
      const k = await generateEd25519();
      const at = this.core.clock.now();
      const sealed = this.custody.sealJwk('cell_keys', k.kid, k.privateJwk);
      await this.core.store.write(async (tx) => {
        if (activeOf(await repo.cellKeys(tx, 'identity', cellId))) return;
        await repo.claimUnownedCellKeys(tx, 'identity', cellId);
        if (activeOf(await repo.cellKeys(tx, 'identity', cellId))) return;
        await repo.insertCellKey(tx, {
          kid: k.kid,
          purpose: 'identity',
          cell_id: cellId,
          private_jwk: sealed,
          public_jwk: k.publicJwk,
          created_at: at,
          retired_at: null,
        });
      });
    }
    keys = await repo.cellKeys(this.core.store, 'identity', cellId);
    const foreign = keys.filter((k) => this.#trusted(k) === null).map((k) => k.kid);
    if (foreign.length > 0)
      this.core.log.warn(
        "identity keys stored for this cell that are not the group's (not sealed under its secrets key) are neither used nor published",
        {
          table: 'cell_keys',
          kids: foreign,
        },
      );
    const trusted = keys.filter((k) => this.#trusted(k) !== null);
    const active = activeOf(trusted)!;
    const privateJwk = this.#trusted(active)!;
    this.#identity = {
      // Node's synchronous Ed25519 (runtime/ed25519-signer.ts): the same signatures at half the CPU of WebCrypto's.
      signer: (() => {
        const sign = ed25519Signer(privateJwk);
        return { kid: active.kid, sign: async (bytes: Uint8Array) => sign(bytes) };
      })(),
      keys: trusted.map((k) => ({ kid: k.kid, jwk: k.public_jwk, retired_at: k.retired_at })),
    };
  }

  /** The private half of a stored identity key when it is the group's; null when the row is not (cell/custody). */
  #trusted(k: repo.CellKeyRow): JsonWebKey | null {
    return this.custody.trustedPrivateJwk('cell_keys', k);
  }

  /**
   * The identity keys of every cell of the group (this cell's first), retired
   * ones included: journals written by several cells verify against them.
   * Only the group's keys (sealed under its secrets key): a key row written
   * without the key is not listed, so nobody is told to trust it. Cached
   * until a cell adds or retires a key.
   */
  async groupIdentityKeys(): Promise<GroupCellKey[]> {
    const hit = this.#groupKeys;
    if (hit !== null && hit.generation === this.#groupKeysGeneration) return hit.keys;
    const generation = this.#groupKeysGeneration;
    const me = this.core.config.cellId;
    const keys = (await repo.allCellKeys(this.core.store, 'identity'))
      .filter((k): k is repo.CellKeyRow & { cell_id: string } => k.cell_id !== null && this.#trusted(k) !== null)
      .map((k) => ({ cell_id: k.cell_id, kid: k.kid, jwk: k.public_jwk, retired_at: k.retired_at }));
    keys.sort((a, b) => Number(b.cell_id === me) - Number(a.cell_id === me));
    if (generation === this.#groupKeysGeneration) this.#groupKeys = { keys, generation };
    return keys;
  }

  /** Signs journals and bundles. */
  signer(): Signer {
    if (!this.#identity) throw new TypeError('cell identity not loaded: ensureIdentity runs at start');
    return this.#identity.signer;
  }

  /** This cell's identity keys, retired ones included (journals verify against them). */
  identityKeys(): CellKey[] {
    if (!this.#identity) throw new TypeError('cell identity not loaded: ensureIdentity runs at start');
    return this.#identity.keys;
  }
}

export type { CredentialFacts, CredentialVerdict, Reached } from './api.ts';

/**
 * True when the request's credential is delegated: a token carrying `act` (RFC 8693 token exchange),
 * whose subject is spoken for by the actors it names. Anything a delegated credential could derive
 * is refused by assertNotDelegated, so nothing else is delegated.
 */
export function isDelegated(auth: Pick<AuthContext, 'credential'>): boolean {
  return (auth.credential.actors?.length ?? 0) > 0;
}

/** What the request's credential holds. */
export function callerHolding(auth: AuthContext): Holding {
  return { permissions: auth.effective, envelope: auth.envelope };
}
