/**
 * The permission catalog: every concrete permission an operation can require,
 * and the built-in roles. Selectors in roles, keys and tokens are matched
 * against these names (see core/authority/scopes.ts).
 */

export const PERMISSIONS = {
  principalsRead: 'iam.principals.read',
  principalsWrite: 'iam.principals.write',
  rolesRead: 'iam.roles.read',
  rolesWrite: 'iam.roles.write',
  keysRead: 'iam.keys.read',
  keysWrite: 'iam.keys.write',
  satsWrite: 'iam.sats.write',
  auditRead: 'audit.read',
  /** Read stored secrets' metadata (never a value). */
  secretsRead: 'secrets.read',
  secretsWrite: 'secrets.write',
  /** Bind a stored secret someone else created to a provider (one's own secrets need no permission). */
  secretsUse: 'secrets.use',
  providersRead: 'ai.providers.read',
  providersWrite: 'ai.providers.write',
  catalogRead: 'catalog.read',
  /** Register, change, re-pin and delete the catalog's sources (MCP servers whose tools the catalog imports). */
  catalogSourcesWrite: 'catalog.sources.write',
  teamsRead: 'agent_teams.read',
  teamsWrite: 'agent_teams.write',
  teamsApprove: 'agent_teams.approve',
  /**
   * Mint, change and delete agents: principals of kind `agent` only (role `agent`, a ceiling within
   * the minter's). Held by `operator` (through `agent_teams`); `iam.principals.write` also allows it.
   */
  teamsAgentsWrite: 'agent_teams.agents.write',
  jobsRead: 'system.orchestration.admin.read',
  jobsWrite: 'system.orchestration.admin.write',
  oauthClientsRead: 'oauth.clients.read',
  oauthClientsWrite: 'oauth.clients.write',
  edgeRead: 'edge.read',
  edgeWrite: 'edge.write',
} as const;

export type Permission = (typeof PERMISSIONS)[keyof typeof PERMISSIONS];

export const ALL_PERMISSIONS: readonly Permission[] = Object.values(PERMISSIONS);

/**
 * What the tools of the cell's MCP endpoint need: running crews and reading runs, approving steps,
 * reading journals (docs/mcp.md). The scopes its protected resource metadata lists, and the default
 * cap of clients that register themselves (docs/oauth.md).
 */
export const MCP_TOOL_PERMISSIONS: readonly Permission[] = [
  PERMISSIONS.teamsRead,
  PERMISSIONS.teamsWrite,
  PERMISSIONS.teamsApprove,
  PERMISSIONS.jobsRead,
];

/** Built-in roles. They cannot be changed or deleted; custom roles sit beside them. */
export const BUILTIN_ROLES: Readonly<Record<string, readonly string[]>> = {
  owner: ['*'],
  admin: ['iam', 'audit', 'secrets', 'ai', 'catalog', 'agent_teams', 'system.orchestration', 'oauth', 'edge'],
  operator: ['ai', 'catalog', 'agent_teams', 'system.orchestration', 'iam.keys', 'iam.sats', 'secrets'],
  jobs: ['system.orchestration.admin', 'iam.keys', 'iam.sats'],
  viewer: [
    'iam.principals.read',
    'iam.roles.read',
    'iam.keys.read',
    'audit.read',
    'secrets.read',
    'ai.providers.read',
    'catalog.read',
    'agent_teams.read',
    'system.orchestration.admin.read',
    'oauth.clients.read',
    'edge.read',
  ],
  agent: ['catalog.read'],
};
