/** The oauth module's tables. Migration ids are never renamed. */
import type { Migration } from '../store/types.ts';

export const OAUTH_MIGRATIONS: readonly Migration[] = [
  {
    id: 'oauth-001-tables',
    sql: `
CREATE TABLE oauth_signing_keys (
  kid TEXT PRIMARY KEY, private_jwk TEXT NOT NULL, public_jwk TEXT NOT NULL,
  created_at INTEGER NOT NULL, retired_at INTEGER
);
CREATE TABLE oauth_clients (
  client_id TEXT PRIMARY KEY, name TEXT NOT NULL, secret_hash TEXT, auth_method TEXT NOT NULL,
  redirect_uris TEXT NOT NULL, grant_types TEXT NOT NULL, scope TEXT NOT NULL, subject_id TEXT,
  tls_subject_dn TEXT, created_at INTEGER NOT NULL, created_by TEXT NOT NULL
);
CREATE TABLE oauth_denylist (jti TEXT PRIMARY KEY, exp INTEGER NOT NULL);
CREATE TABLE oauth_codes (
  code_hash TEXT PRIMARY KEY, client_id TEXT NOT NULL, subject_id TEXT NOT NULL, redirect_uri TEXT NOT NULL,
  scope TEXT NOT NULL, code_challenge TEXT NOT NULL, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,
  used_at INTEGER, issued TEXT NOT NULL DEFAULT '[]'
);
CREATE TABLE oauth_device_codes (
  device_code_hash TEXT PRIMARY KEY, user_code TEXT NOT NULL UNIQUE, client_id TEXT NOT NULL, scope TEXT NOT NULL,
  created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, interval_s INTEGER NOT NULL, last_poll_at INTEGER,
  status TEXT NOT NULL, subject_id TEXT
);
CREATE TABLE oauth_sessions (
  id_hash TEXT PRIMARY KEY, principal_id TEXT NOT NULL, csrf TEXT NOT NULL,
  created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL
);
`,
  },
  {
    // A group of cells is one authorization server: the audience of each member's API (its public URL), so a
    // token issued by one cell for its API is accepted by every member; and the DPoP proofs seen, so a proof
    // replayed on another cell is refused (cell/oauth/audiences.ts, cell/oauth/replay.ts).
    id: 'oauth-002-group-audiences-and-proofs',
    sql: `
CREATE TABLE oauth_audiences (cell_id TEXT PRIMARY KEY, audience TEXT NOT NULL, updated_at INTEGER NOT NULL);
CREATE TABLE oauth_dpop_proofs (proof_key TEXT PRIMARY KEY, expires_at INTEGER NOT NULL);
CREATE INDEX oauth_dpop_proofs_expiry ON oauth_dpop_proofs (expires_at)
`,
  },
  {
    // What a capped credential makes stays capped and dies with it (docs/security.md): a client registered
    // with an API key records that key (`api_key:<id>`); its tokens carry it as their root.
    id: 'oauth-003-client-root',
    sql: 'ALTER TABLE oauth_clients ADD COLUMN root TEXT',
  },
  {
    // The issuer URLs the group's cells declared with `--oauth-issuer` (one per cell, replaced or removed at
    // its start): every cell accepts tokens whose iss is one of them or `service://<group id>` (cell/oauth/issuers.ts).
    id: 'oauth-004-group-issuers',
    sql: 'CREATE TABLE oauth_issuers (cell_id TEXT PRIMARY KEY, issuer TEXT NOT NULL, updated_at INTEGER NOT NULL)',
  },
  {
    // RFC 8707 at the authorization endpoint: the resource an authorization request names (the MCP
    // endpoint, the API) is consented to and kept with the code; the token is for it (cell/oauth/codes.ts).
    id: 'oauth-005-code-resource',
    sql: 'ALTER TABLE oauth_codes ADD COLUMN resource TEXT',
  },
  {
    // Refresh tokens of the authorization code grant (cell/oauth/refresh.ts): stored hashed, single use,
    // rotated within a family that one consent started and that dies as one (reuse, revocation, expiry).
    id: 'oauth-006-refresh-tokens',
    sql: `
CREATE TABLE oauth_refresh_tokens (
  token_hash TEXT PRIMARY KEY, family TEXT NOT NULL, client_id TEXT NOT NULL, subject_id TEXT NOT NULL,
  scope TEXT NOT NULL, audience TEXT NOT NULL, jkt TEXT, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,
  family_expires_at INTEGER NOT NULL, used_at INTEGER
);
CREATE INDEX oauth_refresh_tokens_family ON oauth_refresh_tokens (family);
CREATE INDEX oauth_refresh_tokens_client ON oauth_refresh_tokens (client_id);
CREATE INDEX oauth_refresh_tokens_expiry ON oauth_refresh_tokens (family_expires_at)
`,
  },
];
