/**
 * RFC 9728 protected resource metadata: what MCP clients (and any OAuth
 * client that starts from a resource) read first. The cell is two protected
 * resources with one authorization server:
 *
 * - its API, `<public URL>/api/public/v1`, described at
 *   `/.well-known/oauth-protected-resource/api/public/v1`;
 * - its MCP endpoint, `<public URL>/mcp`, described at
 *   `/.well-known/oauth-protected-resource/mcp` (the path-inserted form
 *   RFC 9728 §3.1 gives, which MCP clients try first).
 *
 * Each names the authorization server clients discover from: the cell's
 * `--oauth-issuer` URL when it has one, else its public URL (whose
 * `/.well-known/oauth-authorization-server` is the metadata; its `issuer` is
 * then `service://<group id>`, which MCP clients accept and strict RFC 8414
 * clients do not: docs/oauth.md). Every 401 of either resource points at its
 * document (`WWW-Authenticate: Bearer resource_metadata="…"`), beside the
 * DPoP challenge.
 */
import { authChallenge } from '../../runtime/gateway.ts';
import { DPOP_ALGS } from '../../core/tokens/dpop.ts';
import { ALL_PERMISSIONS } from '../../core/permissions.ts';
import type { CellCore } from '../context.ts';
import { MCP_PATH, MCP_SCOPES, publicBase } from './settings.ts';

type Config = CellCore['config'];

const API_PATH = '/api/public/v1';
export const PRM_PATH = '/.well-known/oauth-protected-resource';

/** Which protected resource a request path belongs to. */
function resourcePathOf(path: string): string {
  return path === MCP_PATH ? MCP_PATH : API_PATH;
}

/** The metadata document's URL for the resource a request path belongs to. */
export function resourceMetadataUrl(config: Config, path: string): string {
  return `${publicBase(config)}${PRM_PATH}${resourcePathOf(path)}`;
}

/** The WWW-Authenticate challenge of a 401 at `path`. */
export function challengeFor(config: Config, path: string): string {
  return authChallenge('cell', resourceMetadataUrl(config, path));
}

/** The authorization server clients of the cell's resources discover: the issuer URL, else the public URL. */
export function authorizationServerOf(config: Config): string {
  return config.oauthIssuer ?? publicBase(config);
}

/** The RFC 9728 document of the API (`api`) or the MCP endpoint (`mcp`). */
export function protectedResourceMetadata(config: Config, which: 'api' | 'mcp') {
  const base = publicBase(config);
  return {
    resource: `${base}${which === 'mcp' ? MCP_PATH : API_PATH}`,
    authorization_servers: [authorizationServerOf(config)],
    jwks_uri: `${base}/oauth/jwks.json`,
    scopes_supported: which === 'mcp' ? [...MCP_SCOPES] : ['*', ...ALL_PERMISSIONS],
    bearer_methods_supported: ['header'],
    resource_signing_alg_values_supported: ['EdDSA'],
    dpop_signing_alg_values_supported: [...DPOP_ALGS],
    dpop_bound_access_tokens_required: false,
    tls_client_certificate_bound_access_tokens: config.clientCertificates,
    resource_name: which === 'mcp' ? `agent-cell ${config.cellId} MCP endpoint` : `agent-cell ${config.cellId} API`,
    resource_documentation: `${base}${API_PATH}/docs`,
  };
}
