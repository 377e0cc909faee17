/**
 * What the catalog's sources work with: the cell's core, IAM (audit, the
 * shared-change gate), the network floor's dispatcher, the OAuth server's
 * per-call tokens and what it trusts, the stored secrets (the AI module's,
 * registered when it is built), the in-memory catalog of imported tools, the
 * open sessions, the stdio sources of the cell's configuration, and the
 * hooks through which Agent Teams says who uses and who reaches a tool.
 */
import type { Holding } from '../../../core/authority/contain.ts';
import type { CellCore } from '../../context.ts';
import type { Iam, Reached } from '../../iam/api.ts';
import type { ToolDelegation, ToolDelegationRequest } from '../../oauth/api.ts';
import type { Reader } from '../../store/types.ts';
import type { Dispatcher } from 'undici';
import type { Connections, StdioSpec } from '../../../runtime/mcp-client/connect.ts';
import type { ImportedCatalog } from './imported.ts';

/** The stored secrets, as the AI module (which owns them) lends them to the sources' client credentials. */
export interface SourceSecrets {
  /** Who stored the secret; undefined when there is no such secret. */
  creator(db: Reader, secretId: string): Promise<string | undefined>;
  /** Whether `holder` may send the secret somewhere: its creator's credential with secrets.write, or secrets.use and managing the creator. */
  mayUse(holder: { principalId: string; holding: Holding }, secretId: string): Promise<boolean>;
  /** The secret's value, for a token request; throws ServiceError (secret_missing, secret_unreadable). */
  read(secretId: string): Promise<string>;
}

/** Names the users of catalog tools by kind (Agent Teams: formations, blueprints, agents), read through `db`. */
export type ToolUsersHook = (db: Reader, names: readonly string[]) => Promise<Record<string, string[]>>;

/** The agents a change of the named tools reaches (Agent Teams: agents granted them, directly or by a blueprint or a formation). */
export type ToolReachHook = (db: Reader, names: readonly string[]) => Promise<Reached[]>;

export interface SourcesContext {
  core: CellCore;
  iam: Iam;
  dispatcher: Dispatcher;
  /** A token for one call (or one catalog read) to a server that trusts this cell. */
  delegation: ((req: ToolDelegationRequest) => Promise<ToolDelegation | null>) | undefined;
  /** What the OAuth server says of itself and of the services it issues tokens for. */
  trust: {
    /** Issuer identifiers an RFC 9728 metadata document may name for this cell. */
    issuers(): string[];
    /** The `--protected-resource` a URL falls under, or null. */
    protectedResourceOf(url: string): string | null;
  };
  /** Unset until the AI module is built; a source with client credentials needs it. */
  secrets: SourceSecrets | undefined;
  imported: ImportedCatalog;
  connections: Connections;
  /** The stdio sources of the cell's configuration (`--tool-sources`), by name. */
  stdio: ReadonlyMap<string, StdioSpec & { definition_max_age_ms: number; timeout_ms: number; description: string }>;
  /** Client-credentials tokens, by source id and version, until they are about to expire. */
  tokens: Map<string, { token: string; sha256: string; until: number }>;
  userHooks: ToolUsersHook[];
  reachHooks: ToolReachHook[];
}
