/**
 * The authority envelope (service spec, "Authority envelope"): what an agent
 * may do, used as a blueprint's `authority_template` and a billet's
 * `authority_cap`. Two operations, both pure: `intersectAuthority` (what two
 * envelopes both allow) and `isSubset` (does a child stay inside its parent;
 * a child billet outside its parent's cap fails to compile).
 *
 * Every field is optional. An absent field means the LEAST authority for
 * that field, except where a field is a ceiling or a constraint whose
 * absence means "this envelope adds no limit" (budget, contracts):
 *
 * | field                  | absent means                    | intersection            | child ⊆ parent when                  |
 * |------------------------|---------------------------------|-------------------------|--------------------------------------|
 * | allowed_tools          | no tools (same as `[]`)         | set intersection        | child's set ⊆ parent's set           |
 * | data_grant_ids         | no data (same as `[]`)          | set intersection        | child's set ⊆ parent's set           |
 * | egress_allowlist       | no egress (same as `[]`)        | set intersection        | child's set ⊆ parent's set           |
 * | compartments           | no compartments (same as `[]`)  | set intersection        | child's set ⊆ parent's set           |
 * | clearance_level        | 0, the lowest level             | minimum                 | child ≤ parent                       |
 * | permission_mode        | `ask` (the spec's default)      | the less autonomous     | child no more autonomous than parent |
 * | budget_ceiling         | no ceiling from this envelope   | minimum (absent = ∞)    | child ≤ parent (absent child ⊄ set parent) |
 * | governing_contract_id  | no contract                     | union of contracts      | child is bound by every parent contract |
 *
 * Lists are sets of exact strings (no wildcards or patterns; `*` is just a
 * name). A list field is present in an intersection when it is present on
 * either side, so `intersectAuthority(a, a)` equals `normalizeAuthority(a)`.
 * A scalar (clearance, mode, budget) is present when present on either side
 * and takes the stricter value, absent standing for its meaning above.
 *
 * Contracts: an agent governed by two different contracts must satisfy both,
 * so the intersection of envelopes governed by `c1` and `c2` is governed by
 * `{c1, c2}`. One contract is written `governing_contract_id`; two or more
 * (only ever the result of an intersection) `governing_contract_ids`, sorted
 * and without `governing_contract_id`. Being bound by more contracts is
 * stricter: child ⊆ parent needs child's contracts ⊇ parent's.
 *
 * Permission modes, least to most autonomous (the security floor, e.g. the
 * tool catalog's governance, egress and classification checks, applies in
 * every mode; a mode never widens what the other fields allow):
 * - `plan`: the agent proposes; no tool runs.
 * - `ask`: every side-effecting tool call waits for a human's approval (default).
 * - `auto-read`: read-only tools run without asking; side effects still ask.
 * - `auto`: every granted tool runs without asking.
 */

/** Permission modes ordered least to most autonomous. */
export const PERMISSION_MODES = ['plan', 'ask', 'auto-read', 'auto'] as const;
export type PermissionMode = (typeof PERMISSION_MODES)[number];
/** The mode of an envelope that does not name one (service spec: `ask` is the default). */
export const DEFAULT_PERMISSION_MODE: PermissionMode = 'ask';

/** What a credential, an agent or a seat may do. A type, not an interface: a `Record<string, unknown>`, as responses show it. */
export type AuthorityEnvelope = {
  allowed_tools?: string[];
  clearance_level?: number;
  permission_mode?: PermissionMode;
  data_grant_ids?: string[];
  egress_allowlist?: string[];
  compartments?: string[];
  governing_contract_id?: string;
  /** Two or more contracts that all govern; only produced by intersection. Never together with `governing_contract_id`. */
  governing_contract_ids?: string[];
  budget_ceiling?: number;
};

/** The fields `isSubset` reports (contracts are reported as `governing_contract_id`). */
export type AuthorityField =
  | 'allowed_tools'
  | 'clearance_level'
  | 'permission_mode'
  | 'data_grant_ids'
  | 'egress_allowlist'
  | 'compartments'
  | 'governing_contract_id'
  | 'budget_ceiling';

const LIST_FIELDS = ['allowed_tools', 'data_grant_ids', 'egress_allowlist', 'compartments'] as const;
type ListField = (typeof LIST_FIELDS)[number];

/** Rank of a mode: 0 (plan) to 3 (auto). Absent is the default, `ask`. */
export function modeRank(mode: PermissionMode | undefined): number {
  const i = PERMISSION_MODES.indexOf(mode ?? DEFAULT_PERMISSION_MODE);
  if (i < 0) throw new TypeError(`unknown permission_mode ${String(mode)}`);
  return i;
}

/** The less autonomous of two modes. */
export function lessAutonomous(a: PermissionMode | undefined, b: PermissionMode | undefined): PermissionMode {
  return PERMISSION_MODES[Math.min(modeRank(a), modeRank(b))]!;
}

function setOf(list: readonly string[] | undefined): string[] {
  return [...new Set(list ?? [])].sort();
}

/** The contracts binding an envelope, sorted and unique. */
export function contractsOf(e: AuthorityEnvelope): string[] {
  const all = [...(e.governing_contract_ids ?? [])];
  if (e.governing_contract_id !== undefined) all.push(e.governing_contract_id);
  return setOf(all);
}

function setContracts(out: AuthorityEnvelope, contracts: string[]): void {
  if (contracts.length === 1) out.governing_contract_id = contracts[0]!;
  else if (contracts.length > 1) out.governing_contract_ids = contracts;
}

/**
 * The canonical form of an envelope: lists sorted and de-duplicated,
 * contracts in their one spelling; absent fields stay absent.
 */
export function normalizeAuthority(e: AuthorityEnvelope): AuthorityEnvelope {
  const out: AuthorityEnvelope = {};
  for (const f of LIST_FIELDS) {
    const v = e[f];
    if (v !== undefined) out[f] = setOf(v);
  }
  if (e.clearance_level !== undefined) out.clearance_level = e.clearance_level;
  if (e.permission_mode !== undefined) out.permission_mode = e.permission_mode;
  if (e.budget_ceiling !== undefined) out.budget_ceiling = e.budget_ceiling;
  setContracts(out, contractsOf(e));
  return out;
}

/** What both envelopes allow. Commutative, idempotent up to `normalizeAuthority`, never wider than either side. */
export function intersectAuthority(a: AuthorityEnvelope, b: AuthorityEnvelope): AuthorityEnvelope {
  const out: AuthorityEnvelope = {};
  for (const f of LIST_FIELDS) {
    if (a[f] === undefined && b[f] === undefined) continue;
    const right = new Set(b[f] ?? []);
    out[f] = setOf(a[f]).filter((x) => right.has(x));
  }
  if (a.clearance_level !== undefined || b.clearance_level !== undefined) {
    out.clearance_level = Math.min(a.clearance_level ?? 0, b.clearance_level ?? 0);
  }
  if (a.permission_mode !== undefined || b.permission_mode !== undefined) {
    out.permission_mode = lessAutonomous(a.permission_mode, b.permission_mode);
  }
  if (a.budget_ceiling !== undefined || b.budget_ceiling !== undefined) {
    out.budget_ceiling = Math.min(a.budget_ceiling ?? Infinity, b.budget_ceiling ?? Infinity);
  }
  setContracts(out, setOf([...contractsOf(a), ...contractsOf(b)]));
  return out;
}

function listSubset(child: readonly string[] | undefined, parent: readonly string[] | undefined): boolean {
  if (child === undefined || child.length === 0) return true;
  const p = new Set(parent ?? []);
  return child.every((x) => p.has(x));
}

/**
 * Whether `child` stays inside `parent` on every field; when not, every
 * offending field is named (in the order of `AuthorityField`).
 */
export function isSubset(child: AuthorityEnvelope, parent: AuthorityEnvelope): { ok: true } | { ok: false; fields: AuthorityField[] } {
  const fields: AuthorityField[] = [];
  const list = (f: ListField) => {
    if (!listSubset(child[f], parent[f])) fields.push(f);
  };
  list('allowed_tools');
  if ((child.clearance_level ?? 0) > (parent.clearance_level ?? 0)) fields.push('clearance_level');
  if (modeRank(child.permission_mode) > modeRank(parent.permission_mode)) fields.push('permission_mode');
  list('data_grant_ids');
  list('egress_allowlist');
  list('compartments');
  const childContracts = new Set(contractsOf(child));
  if (!contractsOf(parent).every((c) => childContracts.has(c))) fields.push('governing_contract_id');
  if ((child.budget_ceiling ?? Infinity) > (parent.budget_ceiling ?? Infinity)) fields.push('budget_ceiling');
  return fields.length === 0 ? { ok: true } : { ok: false, fields };
}
