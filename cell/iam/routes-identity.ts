/**
 * The cell's published identity keys: the Ed25519 keys that sign its journals
 * and bundles, retired ones included, so anyone can verify a journal offline
 * (core/journal/verify.ts) against "the cell's published keys". Public, like
 * /oauth/jwks.json (whose keys sign tokens only: the two sets never mix).
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import type { AppEnv, CellCore } from '../context.ts';
import { isoTimeOrNull } from '../../core/iso-time.ts';
import { IsoTime, errorResponses, json } from '../http/openapi.ts';
import type { Iam } from './iam.ts';

const CellKeys = z
  .object({
    cell_id: z.string(),
    keys: z.array(
      z.object({
        kid: z.string().openapi({ description: 'RFC 7638 thumbprint; the `signer_kid` of journal records' }),
        jwk: z.record(z.string(), z.unknown()).openapi({ description: 'Public Ed25519 JWK (OKP)' }),
        retired_at: IsoTime.nullable(),
      }),
    ),
  })
  .openapi('CellIdentityKeys');

export const CELL_KEYS_PATH = '/.well-known/cell-keys.json';

export function identityRoutes(app: OpenAPIHono<AppEnv>, core: CellCore, iam: Iam): void {
  app.openapi(
    createRoute({
      method: 'get',
      path: CELL_KEYS_PATH,
      tags: ['Discovery'],
      'x-status': 'Live',
      summary: "The cell's identity keys, which sign its journals and bundles",
      security: [],
      responses: { 200: json(CellKeys, 'Current and retired identity keys'), ...errorResponses() },
    }),
    (c) =>
      c.json(
        {
          cell_id: core.config.cellId,
          keys: iam.identityKeys().map((k) => ({
            kid: k.kid,
            jwk: k.jwk as Record<string, unknown>,
            retired_at: isoTimeOrNull(k.retired_at),
          })),
        },
        200,
        { 'Cache-Control': 'max-age=60' },
      ),
  );
}
