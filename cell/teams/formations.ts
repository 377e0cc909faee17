/**
 * Formations, billets and crews.
 *
 * - A billet's `reports_to` names a billet of the same formation that already
 *   exists (so reporting lines can never form a cycle), and its
 *   `authority_cap` must stay inside its manager's cap (core `isSubset`);
 *   otherwise the billet is refused at authoring (400, reason
 *   `over_authority`, `details.fields` naming each offending field) and the
 *   refusal is audited.
 * - A crew binds one active agent to every billet (`assignments`); the seat's
 *   authority is the agent's authority ∩ the billet cap (the compiler
 *   intersects). Adding a billet later changes the formation's hash, so a
 *   run started before it cannot be recovered (graph-hash enforcement).
 */
import { isSubset, type AuthorityEnvelope } from '../../core/authority/envelope.ts';
import { parseAuthority } from '../../core/authority/schema.ts';
import { ServiceError, invalid, notFound } from '../../core/errors.ts';
import type { AuthContext, Cell } from '../context.ts';
import { assertWithinCaller } from '../iam/containment.ts';
import { recordAuditTx } from '../iam/audit.ts';
import { newId } from '../iam/ids.ts';
import { agentActive, getAgent } from './agents.ts';
import { checkContracts, checkTools, resolveSkillRefs } from './resources.ts';
import { iso, parseBody } from './schema.ts';

export const POLICIES = ['sequential', 'parallel', 'consensus', 'manager-delegates'] as const;
export type Policy = (typeof POLICIES)[number];

/** What the operator authored (mirrors core/compiler FormationInput). */
export interface FormationBody {
  name: string;
  coordination_policy: Policy;
  consensus_mode?: 'majority' | 'unanimity';
  limits?: Record<string, number>;
  topology?: Record<string, string>;
  pre?: unknown[];
  post?: unknown[];
  prompt?: string;
  /** Workspace whose storage the crew's tools use by default. */
  workspace_id?: string;
}
export interface Formation extends FormationBody { formation_id: string; created_at: number; created_by: string; updated_at: number }

export interface BilletBody {
  role_label: string;
  required_skills: string[];
  reports_to: string | null;
  authority_cap: AuthorityEnvelope;
}
export interface Billet extends BilletBody { billet_id: string; formation_id: string; position: number; created_at: number; created_by: string }

export interface CrewBody { name: string; assignments: Record<string, string>; workspace_id: string }
export interface Crew extends CrewBody { crew_id: string; formation_id: string; created_at: number; created_by: string }

type FRow = { formation_id: string; body: string; created_at: number; created_by: string; updated_at: number };

export function getFormation(cell: Cell, id: string): Formation | undefined {
  const r = cell.store.get<FRow>('SELECT * FROM team_formations WHERE formation_id = ?', [id]);
  return r ? { formation_id: r.formation_id, ...parseBody<FormationBody>(r.body), created_at: r.created_at, created_by: r.created_by, updated_at: r.updated_at } : undefined;
}
export function listFormations(cell: Cell, limit: number, offset: number): Formation[] {
  return cell.store.all<FRow>('SELECT * FROM team_formations ORDER BY created_at, formation_id LIMIT ? OFFSET ?', [limit, offset])
    .map((r) => ({ formation_id: r.formation_id, ...parseBody<FormationBody>(r.body), created_at: r.created_at, created_by: r.created_by, updated_at: r.updated_at }));
}
export const formationView = (f: Formation) => ({ ...f, created_at: iso(f.created_at), updated_at: iso(f.updated_at) });

export async function createFormation(cell: Cell, actor: string, body: FormationBody, check?: (f: Formation) => void): Promise<Formation> {
  const f: Formation = { formation_id: newId('frm'), ...body, created_at: cell.clock.now(), created_by: actor, updated_at: cell.clock.now() };
  check?.(f);
  await cell.store.write((tx) => {
    tx.run('INSERT INTO team_formations (formation_id, name, body, created_at, created_by, updated_at) VALUES (?, ?, ?, ?, ?, ?)',
      [f.formation_id, f.name, JSON.stringify(body), f.created_at, actor, f.updated_at]);
    recordAuditTx(tx, { at: f.created_at, actor, action: 'formation.create', target: f.formation_id, outcome: 'ok' });
  });
  return f;
}

type BRow = { billet_id: string; formation_id: string; position: number; body: string; created_at: number; created_by: string };
const billetFromRow = (r: BRow): Billet => ({ billet_id: r.billet_id, formation_id: r.formation_id, position: r.position, ...parseBody<BilletBody>(r.body), created_at: r.created_at, created_by: r.created_by });

export function listBillets(cell: Cell, formationId: string): Billet[] {
  return cell.store.all<BRow>('SELECT * FROM team_billets WHERE formation_id = ? ORDER BY position, billet_id', [formationId]).map(billetFromRow);
}
export function getBillet(cell: Cell, id: string): Billet | undefined {
  const r = cell.store.get<BRow>('SELECT * FROM team_billets WHERE billet_id = ?', [id]);
  return r ? billetFromRow(r) : undefined;
}
export const billetView = (b: Billet) => ({ ...b, created_at: iso(b.created_at) });

/** Adds a billet after the authoring checks; over-authority is refused and audited. */
export async function addBillet(cell: Cell, auth: AuthContext, formationId: string, input: {
  role_label: string; required_skills: string[]; reports_to?: string | null | undefined; authority_cap: unknown;
}): Promise<Billet> {
  const f = getFormation(cell, formationId);
  if (!f) throw notFound('formation');
  resolveSkillRefs(cell, input.required_skills, 'required_skills');
  const cap = parseAuthority(input.authority_cap);
  checkTools(cap, 'authority_cap');
  checkContracts(cell, cap, 'authority_cap');
  const actor = auth.principal.id;
  await assertWithinCaller(cell, auth, { envelope: cap }, { action: 'billet.create', target: formationId });
  const reportsTo = input.reports_to ?? null;
  if (reportsTo !== null) {
    const parent = getBillet(cell, reportsTo);
    if (!parent || parent.formation_id !== formationId) {
      throw invalid('reports_to must name a billet of the same formation', { reason: 'unknown_reports_to', field: 'reports_to' });
    }
    const sub = isSubset(cap, parent.authority_cap);
    if (!sub.ok) {
      const details = { reason: 'over_authority', fields: sub.fields, reports_to: reportsTo, formation_id: formationId };
      await cell.store.write((tx) => recordAuditTx(tx, { at: cell.clock.now(), actor, action: 'billet.create', target: formationId, outcome: 'refused', details }));
      throw new ServiceError('invalid_request', `the billet's authority_cap exceeds its manager's on: ${sub.fields.join(', ')}`, { details });
    }
  }
  const at = cell.clock.now();
  return cell.store.write((tx) => {
    const position = tx.get<{ n: number }>('SELECT COUNT(*) AS n FROM team_billets WHERE formation_id = ?', [formationId])!.n;
    if (position >= 10_000) throw invalid('a formation holds at most 10000 billets', { reason: 'too_many_billets' });
    const b: Billet = {
      billet_id: newId('blt'), formation_id: formationId, position, role_label: input.role_label,
      required_skills: [...input.required_skills], reports_to: reportsTo, authority_cap: cap, created_at: at, created_by: actor,
    };
    const body: BilletBody = { role_label: b.role_label, required_skills: b.required_skills, reports_to: b.reports_to, authority_cap: b.authority_cap };
    tx.run('INSERT INTO team_billets (billet_id, formation_id, position, body, created_at, created_by) VALUES (?, ?, ?, ?, ?, ?)',
      [b.billet_id, formationId, position, JSON.stringify(body), at, actor]);
    tx.run('UPDATE team_formations SET updated_at = ? WHERE formation_id = ?', [at, formationId]);
    recordAuditTx(tx, { at, actor, action: 'billet.create', target: b.billet_id, outcome: 'ok', details: { formation_id: formationId } });
    return b;
  });
}

type CRow = { crew_id: string; formation_id: string; body: string; created_at: number; created_by: string };
const crewFromRow = (r: CRow): Crew => ({ crew_id: r.crew_id, formation_id: r.formation_id, ...parseBody<CrewBody>(r.body), created_at: r.created_at, created_by: r.created_by });

export function getCrew(cell: Cell, id: string): Crew | undefined {
  const r = cell.store.get<CRow>('SELECT * FROM team_crews WHERE crew_id = ?', [id]);
  return r ? crewFromRow(r) : undefined;
}
export function listCrews(cell: Cell, limit: number, offset: number): Crew[] {
  return cell.store.all<CRow>('SELECT * FROM team_crews ORDER BY created_at, crew_id LIMIT ? OFFSET ?', [limit, offset]).map(crewFromRow);
}
export const crewView = (c: Crew) => ({ ...c, created_at: iso(c.created_at) });

/** Checks that every billet has an active agent and nothing else is assigned. */
export function checkAssignments(cell: Cell, billets: readonly Billet[], assignments: Record<string, string>): void {
  const ids = new Set(billets.map((b) => b.billet_id));
  const unbound = billets.filter((b) => !assignments[b.billet_id]).map((b) => b.billet_id);
  const extra = Object.keys(assignments).filter((k) => !ids.has(k));
  if (billets.length === 0) throw invalid('the formation has no billets', { reason: 'empty_formation' });
  if (unbound.length) throw invalid('every billet needs an agent', { reason: 'unbound_seat', billets: unbound });
  if (extra.length) throw invalid('assignments name billets outside the formation', { reason: 'unknown_billet', billets: extra });
  const bad = Object.entries(assignments).filter(([, a]) => !getAgent(cell, a) || !agentActive(cell, a)).map(([b]) => b);
  if (bad.length) throw invalid('assignments name agents that do not exist or are not active', { reason: 'unknown_agent', billets: bad });
}
