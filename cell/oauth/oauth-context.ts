/**
 * What every function of the OAuth module works with: the cell core, the
 * module's dependencies (the IAM API, whether an edge device is registered),
 * and the module's in-memory state. One per module instance
 * (createOAuthModule builds it); nothing of the module lives at module level.
 */
import type { VerifiedTokenCache } from '../../core/tokens/cache.ts';
import type { ReplayCache } from '../../core/tokens/replay.ts';
import type { CellCore } from '../context.ts';
import type { Iam } from '../iam/api.ts';
import type { ChangeCache } from '../store/change-cache.ts';
import type { GroupAudiences } from './audiences.ts';
import type { GroupIssuers } from './issuers.ts';
import type { Denylist } from './denylist.ts';
import type { ClientRecord } from './repository.ts';
import type { ClientDocuments } from './client-metadata.ts';
import type { SigningKeys } from './signing-keys.ts';

export interface OAuthContext {
  readonly core: CellCore;
  readonly iam: Iam;
  /**
   * Whether `deviceId` is an edge device registered with this cell (the edge
   * module's answer; this module never reads the edge module's tables). Asked
   * only while serving requests (resource indicators, cell/oauth/resource.ts).
   */
  readonly deviceExists: (deviceId: string) => Promise<boolean>;
  /** The signing keyring, following oauth_signing_keys on every cell of the group. */
  readonly keys: SigningKeys;
  /** The revoked token ids, mirrored in memory, following oauth_denylist on every cell of the group. */
  readonly denylist: Denylist;
  /**
   * DPoP proofs seen (RFC 9449 §11.1), each kept for the proof window: the
   * group's (in the store, cell/oauth/replay.ts) on PostgreSQL, in memory on
   * the embedded engine.
   */
  readonly replay: ReplayCache;
  /** The audiences of the group's APIs: a token for any member's API is accepted by every member. */
  readonly audiences: GroupAudiences;
  /** The issuers the group accepts: `service://<group id>` and every member's declared `--oauth-issuer`. */
  readonly issuers: GroupIssuers;
  /** Claims of tokens for the cell's own API whose signature and claims verified, by token, until their exp (tokens are immutable). */
  readonly verified: VerifiedTokenCache;
  /** The same for tokens presented at the MCP endpoint (their audience is /mcp: one cache belongs to one audience). */
  readonly verifiedMcp: VerifiedTokenCache;
  /** Registered clients by id (null: no such client); every write to oauth_clients, on any cell of the group, empties it. */
  readonly clients: ChangeCache<string, ClientRecord | null>;
  /** Client ID Metadata Documents fetched lately (cell/oauth/client-metadata.ts), through the egress floor. */
  readonly documents: ClientDocuments;
}
