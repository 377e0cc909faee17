/**
 * Fields a PATCH cannot change. They are declared in the request schema (so
 * the curated document says which fields are fixed and why) and refused by
 * name: 400 invalid_request, reason `immutable_field`, `details.field`, and a
 * message saying what to do instead (rather than a bare "unrecognized key").
 *
 * @example
 * const Patch = z.object({ name: z.string().optional(), provider_type: immutableField('register a new provider') }).strict();
 * refuseImmutable(body, { provider_type: 'register a new provider' });
 */
import { z } from '@hono/zod-openapi';
import { invalid } from '../../core/errors.ts';

/** The schema of a field a PATCH names only to refuse it. */
export function immutableField(instead: string) {
  return z
    .unknown()
    .optional()
    .openapi({ description: `Cannot change (400 immutable_field): ${instead}` });
}

/** Refuses the first of `fields` present in `body`, with its hint. */
export function refuseImmutable(body: object, fields: Readonly<Record<string, string>>): void {
  for (const [field, instead] of Object.entries(fields)) {
    if ((body as Record<string, unknown>)[field] !== undefined) {
      throw invalid(`${field} cannot change: ${instead}`, { reason: 'immutable_field', field });
    }
  }
}
