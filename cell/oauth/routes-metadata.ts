/**
 * RFC 8414 metadata, RFC 9728 protected resource metadata of the API and of
 * /mcp (protected-resource.ts), and the published signing keys. Public: no
 * credential.
 * RFC 8705 (tls_client_auth, certificate-bound tokens, the mTLS endpoint
 * aliases) is advertised only by a cell that verifies client certificates
 * (`serve --client-ca`): elsewhere no client could use it.
 */
import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import { DPOP_ALGS } from '../../core/tokens/dpop.ts';
import { ALL_PERMISSIONS } from '../../core/permissions.ts';
import type { AppEnv } from '../context.ts';
import { errorResponses } from '../http/openapi.ts';
import { clientAuthMethods, GRANT_TYPES } from './clients.ts';
import { documentsEnabled } from './client-metadata.ts';
import { mountRaw } from './form.ts';
import type { OAuthContext } from './oauth-context.ts';
import { issuerOf, MCP_PATH, publicBase } from './settings.ts';
import { PRM_PATH, protectedResourceMetadata } from './protected-resource.ts';

export function metadata(ctx: OAuthContext) {
  const { config } = ctx.core;
  const base = publicBase(config);
  const methods = clientAuthMethods(config);
  // RFC 8705 §5: the endpoints a client reaches with its certificate; here the same endpoints, which ask for one.
  const mtls = config.clientCertificates
    ? {
        tls_client_certificate_bound_access_tokens: true,
        mtls_endpoint_aliases: {
          token_endpoint: `${base}/oauth/token`,
          device_authorization_endpoint: `${base}/oauth/device_authorization`,
          introspection_endpoint: `${base}/oauth/introspect`,
          revocation_endpoint: `${base}/oauth/revoke`,
        },
      }
    : {};
  return {
    issuer: issuerOf(config),
    authorization_endpoint: `${base}/oauth/authorize`,
    token_endpoint: `${base}/oauth/token`,
    device_authorization_endpoint: `${base}/oauth/device_authorization`,
    introspection_endpoint: `${base}/oauth/introspect`,
    revocation_endpoint: `${base}/oauth/revoke`,
    jwks_uri: `${base}/oauth/jwks.json`,
    grant_types_supported: [...GRANT_TYPES],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: methods,
    introspection_endpoint_auth_methods_supported: methods.filter((m) => m !== 'none'),
    revocation_endpoint_auth_methods_supported: methods,
    dpop_signing_alg_values_supported: [...DPOP_ALGS],
    authorization_response_iss_parameter_supported: true,
    // MCP clients name themselves by URL (a metadata document), or register (RFC 7591) when the operator allows it.
    client_id_metadata_document_supported: documentsEnabled(config),
    ...(config.dynamicRegistration ? { registration_endpoint: `${base}/oauth/register` } : {}),
    ...mtls,
    scopes_supported: ['*', ...ALL_PERMISSIONS],
    service_documentation: `${base}/api/public/v1/docs`,
  };
}

export function metadataRoutes(app: OpenAPIHono<AppEnv>, ctx: OAuthContext): void {
  mountRaw(
    app,
    createRoute({
      method: 'get',
      path: '/.well-known/oauth-authorization-server',
      tags: ['OAuth'],
      'x-status': 'Live',
      summary: 'Authorization server metadata (RFC 8414)',
      responses: {
        200: { description: 'Metadata', content: { 'application/json': { schema: { type: 'object' as const } } } },
        ...errorResponses(),
      },
    }),
    (c) => c.json(metadata(ctx), 200, { 'Cache-Control': 'max-age=300' }),
  );

  for (const which of ['api', 'mcp'] as const) {
    mountRaw(
      app,
      createRoute({
        method: 'get',
        path: `${PRM_PATH}${which === 'mcp' ? MCP_PATH : '/api/public/v1'}`,
        tags: ['OAuth'],
        'x-status': 'Live',
        summary:
          which === 'mcp'
            ? 'Protected resource metadata (RFC 9728) of the MCP endpoint /mcp: its resource, authorization server, scopes and bindings'
            : 'Protected resource metadata (RFC 9728) of the API: its resource, authorization server, scopes and bindings',
        responses: {
          200: { description: 'Metadata', content: { 'application/json': { schema: { type: 'object' as const } } } },
          ...errorResponses(),
        },
      }),
      (c) => c.json(protectedResourceMetadata(ctx.core.config, which), 200, { 'Cache-Control': 'max-age=300' }),
    );
  }

  mountRaw(
    app,
    createRoute({
      method: 'get',
      path: '/oauth/jwks.json',
      tags: ['OAuth'],
      'x-status': 'Live',
      summary: 'Public token signing keys (Ed25519), the active one and retired ones still in their overlap',
      responses: {
        200: { description: 'JWK set', content: { 'application/json': { schema: { type: 'object' as const } } } },
        ...errorResponses(),
      },
    }),
    (c) => c.json({ keys: ctx.keys.current().published }, 200, { 'Cache-Control': 'max-age=60' }),
  );
}
