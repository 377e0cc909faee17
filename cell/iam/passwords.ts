/** Cell-local user passwords, hashed with scrypt (N=2^15, r=8, p=1), compared in constant time. */
import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import type { Cell } from '../context.ts';
import { getPrincipalByName, type Principal } from './principals.ts';

const N = 1 << 15, R = 8, P = 1, LEN = 32;

function derive(password: string, salt: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password, salt, LEN, { N, r: R, p: P, maxmem: 64 * 1024 * 1024 }, (err, key) => (err ? reject(err) : resolve(key))));
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt);
  return `scrypt$${N}$${R}$${P}$${salt.toString('base64url')}$${key.toString('base64url')}`;
}

export async function checkPassword(password: string, stored: string): Promise<boolean> {
  const [alg, n, r, p, salt, key] = stored.split('$');
  if (alg !== 'scrypt' || !salt || !key || Number(n) !== N || Number(r) !== R || Number(p) !== P) return false;
  const got = await derive(password, Buffer.from(salt, 'base64url'));
  const want = Buffer.from(key, 'base64url');
  return got.length === want.length && timingSafeEqual(got, want);
}

/** Dummy hash so unknown users cost the same as known ones. */
let dummy: string | null = null;

export async function verifyUserPassword(cell: Cell, name: string, password: string): Promise<Principal | null> {
  const p = getPrincipalByName(cell.store, name);
  const stored = p?.kind === 'user' && p.status === 'active' ? cell.store.get<{ password_hash: string | null }>(
    'SELECT password_hash FROM principals WHERE id = ?', [p.id])?.password_hash ?? null : null;
  if (!stored) {
    dummy ??= await hashPassword('dummy-password-for-timing');
    await checkPassword(password, dummy);
    return null;
  }
  return (await checkPassword(password, stored)) ? p! : null;
}
