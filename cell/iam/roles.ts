/** Roles: named permission sets. Built-ins come from core/permissions.ts and cannot change. */
import { BUILTIN_ROLES } from '../../core/permissions.ts';
import { normalize } from '../../core/authority/scopes.ts';
import type { Reader } from '../store/types.ts';

export interface Role { name: string; permissions: string[]; builtin: boolean; description: string | null }

export function getRole(db: Reader, name: string): Role | undefined {
  const builtin = BUILTIN_ROLES[name];
  if (builtin) return { name, permissions: [...builtin], builtin: true, description: null };
  const row = db.get<{ name: string; permissions: string; description: string | null }>(
    'SELECT name, permissions, description FROM roles WHERE name = ?', [name]);
  return row ? { name: row.name, permissions: JSON.parse(row.permissions) as string[], builtin: false, description: row.description } : undefined;
}

export function listRoles(db: Reader): Role[] {
  const custom = db.all<{ name: string; permissions: string; description: string | null }>(
    'SELECT name, permissions, description FROM roles ORDER BY name');
  return [
    ...Object.entries(BUILTIN_ROLES).map(([name, p]) => ({ name, permissions: [...p], builtin: true, description: null })),
    ...custom.map((r) => ({ name: r.name, permissions: JSON.parse(r.permissions) as string[], builtin: false, description: r.description })),
  ];
}

/** Union of the permission selectors of the named roles (unknown roles grant nothing). */
export function rolePermissions(db: Reader, roles: readonly string[]): string[] {
  const out: string[] = [];
  for (const r of roles) out.push(...(getRole(db, r)?.permissions ?? []));
  return normalize(out);
}
