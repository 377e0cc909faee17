/**
 * The OAuth 2.1 authorization server: signing keys, clients, the token,
 * device, introspection and revocation endpoints, the authorization, login
 * and device pages, SATs, and the JWT authenticator of the bearer path.
 *
 * Tokens are judged by core's one token judge (core/tokens/judge.ts, shared
 * with the edge) over this module's lookups (cell/oauth/authenticator.ts).
 * The module instance holds the state the cell keeps in memory (the signing
 * keyring, the denylist mirror, the DPoP replay cache, the verified-token
 * and client caches), which are those lookups. The keyring and the denylist follow the store: on
 * PostgreSQL, every other cell's writes arrive through `store.onChange`
 * within about a second, so a token revoked on one cell is refused by all,
 * and a key rotated on one cell is published and used by all.
 */
import { VerifiedTokenCache } from '../../core/tokens/cache.ts';
import { MemoryReplayCache } from '../../core/tokens/replay.ts';
import { GroupAudiences } from './audiences.ts';
import { GroupIssuers } from './issuers.ts';
import { GroupReplayCache } from './replay.ts';
import type { GroupClock } from '../cluster/api.ts';
import { sharedNow, type CellCore } from '../context.ts';
import type { Custody } from '../custody/api.ts';
import type { Iam } from '../iam/api.ts';
import type { CellModule } from '../module.ts';
import { ChangeCache } from '../store/change-cache.ts';
import type { OAuthApi } from './api.ts';
import { cellTokenJudge, jwtAuthenticator } from './authenticator.ts';
import { ensureBuiltInClient } from './builtin-clients.ts';
import { getClient } from './clients.ts';
import { Denylist } from './denylist.ts';
import type { OAuthContext } from './oauth-context.ts';
import { allClientIds, deleteExpiredRefresh, TABLES } from './repository.ts';
import { adminRoutes } from './routes-admin.ts';
import { clientRoutes } from './routes-clients.ts';
import { metadataRoutes } from './routes-metadata.ts';
import { pageRoutes } from './routes-pages.ts';
import { protocolRoutes } from './routes-protocol.ts';
import { audienceOf, issuerOf, OAUTH, publicBase } from './settings.ts';
import { protectedResourceOf, toolDelegator } from './tool-delegation.ts';
import { challengeFor } from './protected-resource.ts';
import { SigningKeys } from './signing-keys.ts';
import { reloadFollower, type ReloadFollower } from './internal/follower.ts';
import { ClientDocuments } from './client-metadata.ts';
import type { Dispatcher } from 'undici';

export interface OAuthDeps {
  iam: Iam;
  /** The group's secrets key: the signing keys are sealed under it, and only those it opens are the group's. */
  custody: Custody;
  /** Whether this cell stands as a member (its clock within the bound): a member that stood down makes no background writes. */
  standing: Pick<GroupClock, 'trusted'>;
  /**
   * Whether an edge device is registered with this cell and active (the edge
   * module's answer: a disabled or deleted device gets no token), for resource
   * indicators `edge:<device_id>`. Called only while
   * serving requests, never while the module is built, so it may reach a
   * module built after this one.
   */
  deviceExists: (deviceId: string) => Promise<boolean>;
  /**
   * How the cell reaches a client's metadata document: the network floor the tools module's
   * egress stands on (no private address unless allowed; cell/server.ts hands it over).
   */
  egress: Dispatcher;
}

export interface OAuthModule extends CellModule {
  api: OAuthApi;
}

/** Retry delay of a reload that failed (a store hiccup must not leave a revocation unseen). */
const RELOAD_RETRY_MS = 1000;

export async function createOAuthModule(core: CellCore, deps: OAuthDeps): Promise<OAuthModule> {
  // Cells of a group share the proofs seen; an embedded store is one cell, and its cache stays in memory.
  const groupReplay = core.store.engine === 'postgres' ? new GroupReplayCache(core) : null;
  const ctx = oauthContext(core, deps, groupReplay);
  const follower = reloadFollower(core.log, RELOAD_RETRY_MS);
  // Subscribe before the first loads, so no write falls between a load and the subscription.
  const unsubscribe = followChanges(ctx, follower);
  const close = () => {
    unsubscribe();
    void ctx.documents.dispatcher.close();
    ctx.clients.close();
    ctx.denylist.close();
    follower.halt();
  };
  try {
    await loadBeforeServing(ctx);
  } catch (e) {
    close();
    throw e;
  }
  let stopTimers: (() => void) | undefined;
  return {
    name: 'oauth',
    authenticators: [jwtAuthenticator(ctx)],
    api: oauthApi(ctx),
    routes(app) {
      metadataRoutes(app, ctx);
      protocolRoutes(app, ctx);
      pageRoutes(app, ctx);
      adminRoutes(app, ctx);
      clientRoutes(app, ctx);
    },
    async start() {
      // The public URL is settled once the cell listens: this cell's API joins the group's audiences now.
      await ctx.audiences.register();
      stopTimers = startTimers(ctx, groupReplay, deps.standing);
    },
    async stop() {
      stopTimers?.();
      close();
    },
  };
}

/** The module's instance state: its caches, keyring, denylist mirror and the lookups over them. */
function oauthContext(core: CellCore, deps: OAuthDeps, groupReplay: GroupReplayCache | null): OAuthContext {
  return {
    core,
    iam: deps.iam,
    deviceExists: (deviceId) => deps.deviceExists(deviceId),
    keys: new SigningKeys(core, deps.custody),
    denylist: new Denylist(core),
    replay: groupReplay ?? new MemoryReplayCache(),
    audiences: new GroupAudiences(core),
    issuers: new GroupIssuers(core),
    verified: new VerifiedTokenCache(OAUTH.verifiedCacheSize),
    verifiedMcp: new VerifiedTokenCache(OAUTH.verifiedCacheSize),
    clients: new ChangeCache(core.store, [TABLES.clients], OAUTH.clientCacheSize),
    // Client metadata documents come through the network floor tools use (no private address unless allowed).
    documents: new ClientDocuments(deps.egress),
  };
}

/** Reloads what a write to its table changed, on this cell's writes and (PostgreSQL) every other cell's; returns the unsubscribe. */
function followChanges(ctx: OAuthContext, follower: ReloadFollower): () => void {
  const { follow } = follower;
  return ctx.core.store.onChange((change) => {
    if (change.tables.has(TABLES.signingKeys)) follow('signing keyring', () => ctx.keys.reload());
    // This cell's revocations reach the mirror as their transaction commits; other cells' are read here
    // (reading on this cell's own changes too costs one read per revoking transaction, and assumes nothing).
    if (change.tables.has(TABLES.denylist)) follow('denylist', () => ctx.denylist.reload());
    if (change.tables.has(TABLES.audiences)) follow('audiences', () => ctx.audiences.reload());
    if (change.tables.has(TABLES.issuers)) follow('issuers', () => ctx.issuers.reload());
  });
}

/** The first loads: a signing key (created on a fresh store), the denylist, and this cell's issuer registered. */
async function loadBeforeServing(ctx: OAuthContext): Promise<void> {
  await ctx.keys.ensure();
  await ctx.denylist.reload();
  // Before serving: this cell's `--oauth-issuer` joins the group's accepted issuers (or leaves it).
  await ctx.issuers.register();
}

/** What other modules may ask of the authorization server (OAuthApi), over the module's state. */
function oauthApi(ctx: OAuthContext): OAuthApi {
  const { config, store } = ctx.core;
  const judge = cellTokenJudge(ctx);
  return {
    issuer: () => issuerOf(config),
    acceptedIssuers: () => ctx.issuers.accepted(),
    audience: () => audienceOf(config),
    publicBase: () => publicBase(config),
    challenge: (path) => challengeFor(config, path),
    keyring: () => ctx.keys.current(),
    refreshKeyring: () => ctx.keys.reload(),
    judgeToken: (token, facts) => judge(token, facts),
    isRevoked: (jti) => ctx.denylist.isRevoked(jti),
    liveRevocations: (nowSeconds) => ctx.denylist.live(nowSeconds),
    client: (clientId) => getClient(ctx, clientId),
    clientIds: () => allClientIds(store),
    ensureBuiltInClient: (client) => ensureBuiltInClient(ctx, client),
    delegateForTool: toolDelegator(ctx),
    protectedResourceOf: (url) => protectedResourceOf(config.protectedResources, url),
  };
}

/**
 * The module's timers: the sweep (expired revocations and refresh token families dropped, then
 * the keyring, denylist and issuers read again, a safety net for whatever a notification missed)
 * and, on PostgreSQL, the pruning of the group's DPoP proofs. Both drop what the group shares, judged on the database's
 * clock, and only while this cell stands: a member whose clock is beyond the bound writes nothing
 * in the background (issue 36, finding 13). Returns what stops them.
 */
function startTimers(ctx: OAuthContext, groupReplay: GroupReplayCache | null, standing: Pick<GroupClock, 'trusted'>): () => void {
  const { core } = ctx;
  const sweep = async () => {
    if (standing.trusted()) {
      await ctx.denylist.sweep();
      await core.store.write((tx) => deleteExpiredRefresh(tx, sharedNow(core)));
    }
    await ctx.denylist.reload();
    await ctx.keys.reload();
    await ctx.issuers.reload();
  };
  const timer = setInterval(() => {
    sweep().catch((e: unknown) => core.log.error('oauth sweep failed', { error: e }));
  }, OAUTH.sweepIntervalMs);
  timer.unref();
  let pruneTimer: NodeJS.Timeout | undefined;
  if (groupReplay) {
    pruneTimer = setInterval(() => {
      if (!standing.trusted()) return;
      groupReplay.prune().catch((e: unknown) => core.log.error('oauth proof prune failed', { error: e }));
    }, OAUTH.proofPruneIntervalMs);
    pruneTimer.unref();
  }
  return () => {
    clearInterval(timer);
    clearInterval(pruneTimer);
  };
}
