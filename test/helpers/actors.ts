/**
 * Principals for authority tests: a custom role with exactly the given
 * permissions, a principal holding it (and an envelope ceiling), and one API
 * key of that principal (optionally narrowed by scopes or an envelope cap),
 * all created by the bootstrap owner of an in-process cell.
 *
 * @example
 * const a = await actor(t, { name: 'ops', permissions: ['iam.keys'], authority: { clearance_level: 1 } });
 * await t.request('GET', '/api/public/v1/admin/api-keys', { token: a.key });
 */
import assert from 'node:assert/strict';
import type { InProcess } from './inproc.ts';

export interface Actor {
  id: string;
  key: string;
  keyId: string;
  role: string | null;
}

let seq = 0;

export async function actor(
  t: InProcess,
  o: {
    name?: string;
    kind?: 'user' | 'service';
    permissions?: string[];
    roles?: string[];
    authority?: unknown;
    scopes?: string[];
    keyAuthority?: unknown;
    rpm?: number;
    password?: string;
  },
): Promise<Actor> {
  const name = o.name ?? `actor${++seq}`;
  const roles = [...(o.roles ?? [])];
  let role: string | null = null;
  if (o.permissions && o.permissions.length > 0) {
    role = `r-${name}`.toLowerCase().replace(/[^a-z0-9_-]/g, '-');
    const r = await t.request('POST', '/api/public/v1/admin/roles', {
      token: t.adminKey,
      body: { name: role, permissions: o.permissions },
    });
    assert.equal(r.status, 201, r.text);
    roles.push(role);
  }
  const p = await t.request('POST', '/api/public/v1/admin/principals', {
    token: t.adminKey,
    body: {
      kind: o.kind ?? 'service',
      name,
      roles,
      ...(o.authority !== undefined ? { authority: o.authority } : {}),
      ...(o.password ? { password: o.password } : {}),
    },
  });
  assert.equal(p.status, 201, p.text);
  const k = await t.request('POST', '/api/public/v1/admin/api-keys', {
    token: t.adminKey,
    body: {
      name: `${name}-key`,
      owner_id: p.body.id,
      ...(o.scopes ? { scopes: o.scopes } : {}),
      ...(o.keyAuthority !== undefined ? { authority: o.keyAuthority } : {}),
      ...(o.rpm ? { rate_limit_rpm: o.rpm } : {}),
    },
  });
  assert.equal(k.status, 201, k.text);
  return { id: p.body.id as string, key: k.body.secret as string, keyId: k.body.key_id as string, role };
}
