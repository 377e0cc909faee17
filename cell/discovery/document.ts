/**
 * The served OpenAPI 3.1 document: generated from the route declarations of
 * the running app (never a hand-kept copy), then curated (./curate.ts) with
 * the allowlist (./allowlist.ts), and the refusal reasons listed on the
 * `Error` schema (./reasons.ts).
 */
import type { OpenAPIHono } from '@hono/zod-openapi';
import type { AppEnv } from '../context.ts';
import { SERVED_TAGS, isServedTag } from './allowlist.ts';
import { curateDocument, type CurationResult, type JsonObject } from './curate.ts';
import { completeOperations } from './internal/complete.ts';
import { describeReasons } from './reasons.ts';
import { PUBLIC_API_PATHS } from '../app.ts';

export const DOCUMENT_INFO = {
  title: 'agent-cell public API',
  version: '1.2.0',
  // The code base states no licence of its own (an SPDX LicenseRef says so); replace it when it does.
  license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
  description: [
    "The curated, deny-by-default projection of the cell's public API under `/api/public/v1`.",
    'Every operation listed here carries `x-status`: `Live` (backed by a working implementation) or',
    '`Partial` (only the slice named in its description is wired). Operations not listed do not exist for clients.',
    'Publication grants no access: each operation is still authenticated, authorized, scope-checked and rate-limited.',
    'Errors are always the envelope `{error, message, details?, correlation_id?, retryable?}`.',
  ].join(' '),
} as const;

/** Builds the curated document for `app` (call after every module's routes are mounted). */
export function buildDocument(app: OpenAPIHono<AppEnv>): CurationResult {
  const generated = app.getOpenAPI31Document({
    openapi: '3.1.0',
    info: { ...DOCUMENT_INFO },
    // Relative to the document's own location, so the docs page and generated
    // clients reach the cell that served it, whatever name it is reached by.
    servers: [{ url: '/', description: 'The cell that served this document' }],
    tags: Object.entries(SERVED_TAGS).map(([name, description]) => ({ name, description })),
  }) as unknown as JsonObject;
  const curated = curateDocument(generated, isServedTag);
  completeOperations(curated.document, PUBLIC_API_PATHS);
  describeReasons(curated.document);
  return curated;
}
