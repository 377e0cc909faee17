/**
 * The published identity keys: the Ed25519 keys that sign journals and
 * bundles, retired ones included, so anyone can verify a journal offline
 * (core/journal/verify.ts) against "the cell's published keys". Each cell of a
 * group has its own key; every cell lists every member's keys (this cell's
 * first), each with the cell it belongs to, so a journal written by several
 * cells verifies against the document of any one of them. Public, like
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
        cell_id: z.string().openapi({ description: 'The cell the key belongs to (the `cell_id` of the journal records it signs)' }),
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
      summary: "The identity keys of every cell of the group (this cell's first), which sign journals and bundles",
      security: [],
      responses: { 200: json(CellKeys, 'Current and retired identity keys of every member'), ...errorResponses() },
    }),
    async (c) =>
      c.json(
        {
          cell_id: core.config.cellId,
          keys: (await iam.groupIdentityKeys()).map((k) => ({
            cell_id: k.cell_id,
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
