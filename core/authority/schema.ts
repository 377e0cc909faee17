/**
 * zod schema of the authority envelope (see envelope.ts for the meaning of
 * each field). Strict: unknown fields are refused. Bounds:
 * - lists: at most 256 entries, each 1..512 printable ASCII characters
 *   without spaces (tool names, grant ids, egress destinations, labels);
 * - clearance_level: integer 0..100;
 * - permission_mode: one of PERMISSION_MODES;
 * - governing_contract_id: 1..200 characters; governing_contract_ids: 2..64
 *   of them (the form an intersection produces), never both;
 * - budget_ceiling: finite, 0..1e15.
 */
import { z } from 'zod';
import { invalid } from '../errors.ts';
import { PERMISSION_MODES, type AuthorityEnvelope } from './envelope.ts';

const entry = z
  .string()
  .min(1)
  .max(512)
  .regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces');
const list = z.array(entry).max(256);
const contractId = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces');

export const authoritySchema = z
  .strictObject({
    allowed_tools: list.optional(),
    clearance_level: z.int().min(0).max(100).optional(),
    permission_mode: z.enum(PERMISSION_MODES).optional(),
    data_grant_ids: list.optional(),
    egress_allowlist: list.optional(),
    compartments: list.optional(),
    governing_contract_id: contractId.optional(),
    governing_contract_ids: z.array(contractId).min(2).max(64).optional(),
    budget_ceiling: z.number().min(0).max(1e15).optional(),
  })
  .refine((e) => e.governing_contract_id === undefined || e.governing_contract_ids === undefined, {
    message: 'governing_contract_id and governing_contract_ids are exclusive',
    path: ['governing_contract_ids'],
  });

export type AuthoritySchemaOutput = z.infer<typeof authoritySchema>;

/**
 * Validates untrusted input as an authority envelope.
 * @throws ServiceError invalid_request, with `details.issues` ({ path, message }[]), when it is not one.
 */
export function parseAuthority(input: unknown): AuthorityEnvelope {
  const r = authoritySchema.safeParse(input);
  if (!r.success) {
    throw invalid('invalid authority envelope', {
      issues: r.error.issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message })),
    });
  }
  const out: AuthorityEnvelope = {};
  for (const [k, v] of Object.entries(r.data)) {
    if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  }
  return out;
}
