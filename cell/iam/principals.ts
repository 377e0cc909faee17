/**
 * Principals: users, service accounts and agents. An agent is a principal
 * too (minted by agent-teams), so it can own keys and appear in the audit.
 */
import { parseCeiling, type Ceiling } from '../../core/authority/ceiling.ts';
import { conflict } from '../../core/errors.ts';
import type { Cell } from '../context.ts';
import type { Reader, Tx } from '../store/types.ts';
import { newId } from './ids.ts';
import { rolePermissions } from './roles.ts';

export type PrincipalKind = 'user' | 'service' | 'agent';
export type PrincipalStatus = 'active' | 'archived' | 'deleted' | 'purged';

export interface Principal {
  id: string;
  kind: PrincipalKind;
  name: string;
  status: PrincipalStatus;
  roles: string[];
  /** Envelope ceiling: the most envelope authority this principal holds (core/authority/ceiling.ts). */
  authority: Ceiling;
  created_at: number;
  created_by: string | null;
  status_changed_at: number | null;
}

type PrincipalRow = Omit<Principal, 'roles' | 'authority'> & { roles: string; authority: string };

const COLUMNS = 'id, kind, name, status, roles, authority, created_at, created_by, status_changed_at';

function fromRow(r: PrincipalRow): Principal {
  return { ...r, roles: JSON.parse(r.roles) as string[], authority: parseCeiling(r.authority) };
}

export function getPrincipal(db: Reader | Cell, id: string): Principal | undefined {
  const r = reader(db).get<PrincipalRow>(`SELECT ${COLUMNS} FROM principals WHERE id = ?`, [id]);
  return r ? fromRow(r) : undefined;
}

export function getPrincipalByName(db: Reader | Cell, name: string): Principal | undefined {
  const r = reader(db).get<PrincipalRow>(`SELECT ${COLUMNS} FROM principals WHERE name = ?`, [name]);
  return r ? fromRow(r) : undefined;
}

export function listPrincipals(db: Reader, limit: number, offset: number, kind?: string): Principal[] {
  const rows = kind
    ? db.all<PrincipalRow>(`SELECT ${COLUMNS} FROM principals WHERE kind = ? ORDER BY created_at, id LIMIT ? OFFSET ?`, [kind, limit, offset])
    : db.all<PrincipalRow>(`SELECT ${COLUMNS} FROM principals ORDER BY created_at, id LIMIT ? OFFSET ?`, [limit, offset]);
  return rows.map(fromRow);
}

export function countPrincipals(db: Reader, kind: PrincipalKind, status: PrincipalStatus = 'active'): number {
  return db.get<{ n: number }>('SELECT COUNT(*) AS n FROM principals WHERE kind = ? AND status = ?', [kind, status])!.n;
}

/** The principal's role permissions (selectors). */
export function principalPermissions(db: Reader | Cell, p: Principal): string[] {
  return rolePermissions(reader(db), p.roles);
}

/** Creates a principal inside the caller's transaction. Names are unique. */
export function createPrincipalTx(
  cell: Cell, tx: Tx,
  input: { kind: PrincipalKind; name: string; roles: string[]; authority: Ceiling; passwordHash?: string | null; createdBy: string | null },
): Principal {
  if (tx.get('SELECT 1 AS x FROM principals WHERE name = ?', [input.name])) {
    throw conflict(`a principal named '${input.name}' already exists`, { reason: 'name_taken' });
  }
  const p: Principal = {
    id: newId(input.kind === 'agent' ? 'agt' : input.kind === 'service' ? 'svc' : 'usr'),
    kind: input.kind, name: input.name, status: 'active', roles: [...input.roles], authority: input.authority,
    created_at: cell.clock.now(), created_by: input.createdBy, status_changed_at: null,
  };
  tx.run(`INSERT INTO principals (${COLUMNS}, password_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, [
    p.id, p.kind, p.name, p.status, JSON.stringify(p.roles), JSON.stringify(p.authority), p.created_at, p.created_by, null, input.passwordHash ?? null,
  ]);
  return p;
}

/** Public view of a principal. */
export function principalView(p: Principal) {
  return {
    id: p.id, kind: p.kind, name: p.name, status: p.status, roles: p.roles, authority: p.authority,
    created_at: new Date(p.created_at).toISOString(), created_by: p.created_by,
  };
}

function reader(db: Reader | Cell): Reader {
  return 'store' in db ? db.store : db;
}
