/**
 * The oauth module's face (docs/architecture.md, "Faces"): what another module of cell/ may use of
 * the authorization server. `OAuthApi` is the instance's API (issuers, audience, keyring, core's
 * token judgement with this cell's lookups, revocations, clients); the types are those it speaks.
 */
import type { NoRequestFacts, TokenRequestFacts } from '../../core/tokens/judge.ts';
import type { CellTokenSubject, CellTokenVerdict } from './authenticator.ts';
import type { BuiltInClient } from './builtin-clients.ts';
import type { ClientRecord } from './clients.ts';
import type { Keyring, PublishedKey } from './signing-keys.ts';
import type { ToolDelegation, ToolDelegationRequest } from './tool-delegation.ts';

export type {
  BuiltInClient,
  CellTokenSubject,
  CellTokenVerdict,
  ClientRecord,
  Keyring,
  PublishedKey,
  ToolDelegation,
  ToolDelegationRequest,
};
/** The group's signing keys as witnesses of its secrets key, for a store from before the key check (cell/custody). */
export { signingKeyWitnesses } from './signing-keys.ts';

/** What other modules may ask of the authorization server. */
export interface OAuthApi {
  /** This cell's token issuer: `--oauth-issuer`, else `service://<group id>`. */
  issuer(): string;
  /** Every issuer the group accepts: `service://<group id>` and the members' declared issuer URLs. */
  acceptedIssuers(): string[];
  /** Token audience, `<public URL>/api/public/v1`. */
  audience(): string;
  /** The cell's public base URL, from configuration (settled once the cell listens), without a trailing slash. */
  publicBase(): string;
  /** The WWW-Authenticate challenge of a 401 at `path`: bearer (naming the resource's RFC 9728 metadata) and DPoP. */
  challenge(path: string): string;
  /** A token for an agent's tool call to a registered protected resource, on behalf of the run's requester (null: not such a URL). */
  delegateForTool(req: ToolDelegationRequest): Promise<ToolDelegation | null>;
  /** The registered protected resource (`--protected-resource`) a URL falls under (the resource itself, or below it), or null. */
  protectedResourceOf(url: string): string | null;
  /** The signing keys now: the active one and the published set (what /oauth/jwks.json serves). */
  keyring(): Keyring;
  /** Reads the signing keys again; a retired key whose overlap has passed leaves the published set. */
  refreshKeyring(): Promise<void>;
  /**
   * Core's one token judgement (core/tokens/judge.ts) with this cell's
   * lookups, for a token addressed to the cell's own API: with request facts,
   * the bearer path's verdict (bindings judged); with `{ now }` only,
   * introspection's (bindings aside). A refusal is `{ ok: false, code }`;
   * only a failing lookup throws.
   */
  judgeToken(token: string, facts: TokenRequestFacts | NoRequestFacts): Promise<CellTokenVerdict>;
  /** Whether a token id is on the denylist (asks the store while other cells' revocations may be unheard). */
  isRevoked(jti: string): boolean | Promise<boolean>;
  /** Revoked token ids whose tokens expire after `nowSeconds`, as [jti, exp] sorted by jti. */
  liveRevocations(nowSeconds: number): [string, number][];
  /** A registered client. */
  client(clientId: string): Promise<ClientRecord | undefined>;
  /** Every registered client's id, sorted: the clients whose tokens still verify (a key bundle carries them). */
  clientIds(): Promise<string[]>;
  /** Creates or updates a built-in public client (the console's); a no-op when it is already as given. */
  ensureBuiltInClient(client: BuiltInClient): Promise<void>;
}
