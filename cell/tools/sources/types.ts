/**
 * The shapes of the catalog's sources (MCP servers whose tools the catalog
 * imports, docs/tools.md) and of their pins, as stored. No logic: the room's
 * repository imports nothing else of the module.
 */
import type { PinnedDefinition } from '../../../core/catalog/pin.ts';

/** How the cell presents itself to a source's server. */
export type SourceAuth =
  /** No credential (a server on the operator's own network that asks for none; every stdio server). */
  | { type: 'none' }
  /**
   * The server trusts this cell as its authorization server (RFC 9728 metadata, or `--protected-resource`):
   * each call carries a token the cell issues for that call alone, `aud` = `audience`.
   */
  | { type: 'cell'; audience: string }
  /** The server has its own authorization server: the source's client credentials (RFC 6749 §4.4), the secret sealed. */
  | {
      type: 'client_credentials';
      token_endpoint: string;
      client_id: string;
      /** A stored secret (POST /secrets): the client secret, never held here. */
      client_secret_id: string;
      scope: string | null;
      /** RFC 8707 `resource` of the token request; null: none sent. */
      resource: string | null;
    };

export type SourceTransport = 'http' | 'stdio';

/** A stored source. `url` is null for stdio sources, whose command only the cell's configuration holds. */
export interface SourceRow {
  source_id: string;
  name: string;
  transport: SourceTransport;
  url: string | null;
  auth: SourceAuth;
  /** `api`: registered through the API; `config`: a stdio source of `--tool-sources`. */
  origin: 'api' | 'config';
  description: string;
  /** How old the server's tool list may be when a call is checked against its pin (0: listed before every call). */
  definition_max_age_ms: number;
  timeout_ms: number;
  /** Who bound the client secret (client_credentials): their right to it is checked at every token fetch. */
  bound_by: string | null;
  created_at: number;
  created_by: string;
  updated_at: number;
}

/** An imported tool: its source, its MCP name, its catalog name, and the definition an operator pinned. */
export interface PinRow {
  source_id: string;
  /** The tool's name on its server. */
  tool: string;
  /** The catalog name, `mcp.<source>.<tool>`. */
  name: string;
  definition: PinnedDefinition;
  pin: string;
  pinned_at: number;
  pinned_by: string;
}
