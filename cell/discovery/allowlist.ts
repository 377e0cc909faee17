/**
 * The one allowlist of the curated OpenAPI document: an operation is served
 * only if it has at least one tag and every one of its tags is listed here
 * (cell/discovery/curate.ts). A tag missing from this list hides every
 * operation that carries it: that is the point (deny by default).
 *
 * To publish a new group of operations, add its tag here with a one-line
 * description (it becomes the group's heading on the docs page), then make
 * sure each operation carries `x-status` (see docs/discovery.md).
 */
export const SERVED_TAGS: Readonly<Record<string, string>> = Object.freeze({
  Discovery:
    "Public documents, no credential needed: the curated OpenAPI document, the interactive docs page, and the cell's identity keys.",
  Principals: 'Users and service accounts, their lifecycle and roles.',
  Roles: 'Named permission sets; built-in roles cannot be changed.',
  'API keys': 'Mint, list, rotate and revoke `svck_live_` API keys (the secret is shown once).',
  Audit: 'The audit trail of decisions and changes.',
  Secrets: 'Provider secrets, stored encrypted; never read back.',
  OAuth: 'The OAuth 2.1 authorization server: clients, tokens, introspection, revocation, keys.',
  'Scoped access tokens': 'Scoped access tokens minted for the caller.',
  'Model providers': 'Model providers agents call.',
  'Catalog sources':
    'MCP servers whose tools the governed catalog imports (mcp.<source>.<tool>), each definition pinned by its hash: register, review, re-pin, change, delete.',
  Skills: 'Reusable skills referenced by blueprints.',
  Blueprints: 'Reusable agent templates.',
  Agents: 'Agents, their tools and budget ledgers.',
  Formations: 'Declarative teams of billets and their compiled graphs.',
  Crews: 'Crews bound to formations, and their runs.',
  Contracts: 'Governing contracts: CEL rules the value gate evaluates.',
  'Agent Teams': 'Agent Teams: providers, skills, blueprints, agents, formations, crews and runs.',
  Jobs: 'Job runs, their events and journals, and cron definitions.',
  'Job runs': 'Runs of every job type, their live events and journals.',
  'Job definitions': 'Scheduled templates that produce runs on a cron.',
  'Job endpoints': 'Published compute and notebook endpoints.',
  Edge: 'Edge devices, signed key and crew bundles, journal import.',
  'Run log':
    "The run log: an append-only Merkle log of finished runs' heads, its signed checkpoints and RFC 9162 proofs (public, hashes only), and its entries for monitors.",
  Cells: 'The cells of the group that share one store: their state (live, suspect, dead) and placement attributes.',
});

/** True when `tag` is on the allowlist. */
export function isServedTag(tag: string): boolean {
  return Object.hasOwn(SERVED_TAGS, tag);
}
