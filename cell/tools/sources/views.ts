/**
 * The catalog's sources as the API shows them: the request bodies and the
 * answers (zod, so the OpenAPI document is the code), and the views that
 * build the answers from rows. A client secret is shown by its stored id
 * only, never a value.
 */
import { z } from '@hono/zod-openapi';
import { isoTime } from '../../../core/iso-time.ts';
import { immutableField } from '../../http/immutable.ts';
import { IsoTime } from '../../http/openapi.ts';
import { descriptorOf } from './imported.ts';
import { SOURCE_NAME } from './names.ts';
import type { ReviewedTool } from './review.ts';
import type { PinRow, SourceRow } from './types.ts';

const SecretId = z
  .string()
  .regex(/^sec_[0-9a-f]{20}$/)
  .openapi({ description: 'A secret stored with POST /admin/secrets (the client secret); a raw secret is never accepted' });

export const AuthInputSchema = z
  .discriminatedUnion('type', [
    z.object({ type: z.literal('none') }).strict(),
    z
      .object({ type: z.literal('cell') })
      .strict()
      .openapi({
        description:
          "The server trusts this cell: its RFC 9728 metadata names the cell as authorization server, or it is a --protected-resource. Each call carries the cell's per-call token.",
      }),
    z
      .object({
        type: z.literal('client_credentials'),
        token_endpoint: z.string().min(1).max(2048),
        client_id: z.string().min(1).max(512),
        client_secret_id: SecretId,
        scope: z.string().min(1).max(1024).optional(),
        resource: z.string().min(1).max(2048).optional().openapi({ description: 'RFC 8707 resource of the token request' }),
      })
      .strict()
      .openapi({ description: "The server's own authorization server: the source's client credentials (client_secret_basic)" }),
  ])
  .openapi('CatalogSourceAuthInput');

export const CreateSource = z
  .object({
    name: z
      .string()
      .regex(SOURCE_NAME)
      .openapi({ description: 'Its tools are named mcp.<name>.<tool>: lower-case letters, digits and -, a letter first, at most 24' }),
    url: z
      .string()
      .min(1)
      .max(2048)
      .openapi({ description: 'The Streamable HTTP endpoint of the MCP server (https; http on loopback or a private address)' }),
    description: z.string().max(1000).optional(),
    auth: AuthInputSchema.optional().openapi({ description: 'How the cell presents itself to the server; default none' }),
    definition_max_age_ms: z.number().int().min(0).max(3_600_000).optional().openapi({
      description:
        "How old the server's tool list may be when a call is checked against its pin (0: listed before every call; default 1000)",
    }),
    timeout_ms: z.number().int().min(100).max(600_000).optional().openapi({ description: 'Per request to the server (default 30000)' }),
  })
  .strict()
  .openapi('CreateCatalogSource');

/** Fields a PATCH refuses by name, with what to do instead. */
export const IMMUTABLE = {
  name: 'the tools are named after it: register a new source and move the grants',
  transport: 'register a new source',
};

export const UpdateSource = z
  .object({
    name: immutableField(IMMUTABLE.name),
    transport: immutableField(IMMUTABLE.transport),
    url: CreateSource.shape.url.optional(),
    auth: AuthInputSchema.optional(),
    description: CreateSource.shape.description,
    definition_max_age_ms: CreateSource.shape.definition_max_age_ms,
    timeout_ms: CreateSource.shape.timeout_ms,
  })
  .strict()
  .openapi('UpdateCatalogSource');

export const Repin = z
  .object({
    pins: z
      .record(
        z.string().min(1).max(128),
        z
          .string()
          .regex(/^sha256:[0-9a-f]{64}$/)
          .nullable(),
      )
      .openapi({
        description:
          "By the tool's name on its server: the live_pin of its review (pinned only if the server still lists exactly that), or null to remove the tool from the catalog",
      }),
  })
  .strict()
  .openapi('RepinCatalogSource');

const AuthView = z
  .object({
    type: z.enum(['none', 'cell', 'client_credentials']),
    audience: z.string().optional(),
    token_endpoint: z.string().optional(),
    client_id: z.string().optional(),
    client_secret_id: z.string().optional(),
    scope: z.string().nullable().optional(),
    resource: z.string().nullable().optional(),
  })
  .openapi('CatalogSourceAuth');

const PinView = z
  .object({
    name: z.string().openapi({ description: 'The catalog name, mcp.<source>.<tool>' }),
    tool: z.string().openapi({ description: 'The name on its server' }),
    pin: z.string().openapi({ description: 'sha256: of the canonical JSON of the pinned definition' }),
    description: z.string(),
    side_effects: z.boolean().openapi({ description: 'True unless the definition declares readOnlyHint: true' }),
    idempotent: z.boolean().openapi({
      description:
        'True when side-effecting and declared idempotentHint: true: a call whose outcome was lost is issued again with its effect key; otherwise it waits outcome_unknown',
    }),
    definition: z.record(z.string(), z.unknown()),
    pinned_at: IsoTime,
    pinned_by: z.string(),
  })
  .openapi('CatalogPin');

export const SourceView = z
  .object({
    source_id: z.string(),
    name: z.string(),
    transport: z.enum(['http', 'stdio']),
    url: z.string().nullable(),
    auth: AuthView,
    origin: z.enum(['api', 'config']).openapi({ description: 'config: a stdio source of the cell configuration (--tool-sources)' }),
    description: z.string(),
    definition_max_age_ms: z.number().int(),
    timeout_ms: z.number().int(),
    secret_bound_by: z.string().nullable(),
    created_at: IsoTime,
    created_by: z.string(),
    updated_at: IsoTime,
    tools: z.array(PinView),
  })
  .openapi('CatalogSource');
export type SourceViewT = z.infer<typeof SourceView>;

const RefusedView = z.object({ tool: z.string(), reason: z.string(), problem: z.string() }).openapi('CatalogRefusedTool');

export const SourceCreated = SourceView.extend({ refused_tools: z.array(RefusedView) }).openapi('CatalogSourceCreated');

const Change = z
  .object({ path: z.string(), pinned: z.unknown().optional(), live: z.unknown().optional() })
  .openapi('CatalogDefinitionChange');

export const ReviewView = z
  .object({
    source_id: z.string(),
    name: z.string(),
    tools: z.array(
      z
        .object({
          tool: z.string(),
          name: z.string().nullable(),
          status: z.enum(['pinned', 'changed', 'missing', 'new', 'refused']),
          pin: z.string().nullable(),
          live_pin: z.string().nullable().openapi({ description: 'What a re-pin names to pin the live definition' }),
          pinned: z.record(z.string(), z.unknown()).nullable(),
          live: z.record(z.string(), z.unknown()).nullable(),
          diff: z.array(Change),
          reason: z.string().optional(),
          problem: z.string().optional(),
        })
        .openapi('CatalogReviewedTool'),
    ),
  })
  .openapi('CatalogSourceReview');
export type ReviewViewT = z.infer<typeof ReviewView>;

function authView(s: SourceRow): z.infer<typeof AuthView> {
  const a = s.auth;
  switch (a.type) {
    case 'none':
      return { type: 'none' };
    case 'cell':
      return { type: 'cell', audience: a.audience };
    case 'client_credentials':
      return {
        type: 'client_credentials',
        token_endpoint: a.token_endpoint,
        client_id: a.client_id,
        client_secret_id: a.client_secret_id,
        scope: a.scope,
        resource: a.resource,
      };
  }
}

export function sourceView(s: SourceRow, pins: readonly PinRow[]): SourceViewT {
  return {
    source_id: s.source_id,
    name: s.name,
    transport: s.transport,
    url: s.url,
    auth: authView(s),
    origin: s.origin,
    description: s.description,
    definition_max_age_ms: s.definition_max_age_ms,
    timeout_ms: s.timeout_ms,
    secret_bound_by: s.bound_by,
    created_at: isoTime(s.created_at),
    created_by: s.created_by,
    updated_at: isoTime(s.updated_at),
    tools: pins.map((p) => {
      const d = descriptorOf(p);
      return {
        name: p.name,
        tool: p.tool,
        pin: p.pin,
        description: d.description,
        side_effects: d.side_effects,
        idempotent: d.idempotent === true,
        definition: p.definition as unknown as Record<string, unknown>,
        pinned_at: isoTime(p.pinned_at),
        pinned_by: p.pinned_by,
      };
    }),
  };
}

export function reviewView(s: SourceRow, tools: readonly ReviewedTool[]): ReviewViewT {
  return {
    source_id: s.source_id,
    name: s.name,
    tools: tools.map((t) => ({
      ...t,
      pinned: t.pinned as unknown as Record<string, unknown> | null,
      live: t.live as unknown as Record<string, unknown> | null,
    })),
  };
}
