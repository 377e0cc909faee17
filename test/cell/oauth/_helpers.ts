// Shared helpers of the oauth route tests (in-process cell, form posts).
import type { InProcess, TestResponse } from '../../helpers/inproc.ts';

export function form(t: InProcess, path: string, fields: Record<string, string>, headers: Record<string, string> = {}): Promise<TestResponse> {
  return t.request('POST', path, {
    rawBody: new URLSearchParams(fields).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
  });
}

export function basic(id: string, secret: string): Record<string, string> {
  return { authorization: `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}` };
}

export async function registerClient(t: InProcess, body: Record<string, unknown>): Promise<{ client_id: string; client_secret?: string }> {
  const r = await t.request('POST', '/api/public/v1/admin/oauth/clients', { token: t.adminKey, body });
  if (r.status !== 201) throw new Error(`register failed ${r.status} ${r.text}`);
  return r.body;
}

export async function createUser(t: InProcess, name: string, roles: string[], password = 'correct horse battery staple'): Promise<string> {
  const r = await t.request('POST', '/api/public/v1/admin/principals', { token: t.adminKey, body: { kind: 'user', name, roles, password } });
  if (r.status !== 201) throw new Error(`create user failed ${r.status} ${r.text}`);
  return r.body.id;
}

export async function createService(t: InProcess, name: string, roles: string[]): Promise<string> {
  const r = await t.request('POST', '/api/public/v1/admin/principals', { token: t.adminKey, body: { kind: 'service', name, roles } });
  if (r.status !== 201) throw new Error(`create service failed ${r.status} ${r.text}`);
  return r.body.id;
}

export function claimsOf(token: string): Record<string, any> {
  return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString());
}
