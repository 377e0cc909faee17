/** Cell-local user passwords, hashed with scrypt (N=2^15, r=8, p=1), compared in constant time. */
import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

const N = 1 << 15,
  R = 8,
  P = 1,
  LEN = 32;

function derive(password: string, salt: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password, salt, LEN, { N, r: R, p: P, maxmem: 64 * 1024 * 1024 }, (err, key) => (err ? reject(err) : resolve(key))),
  );
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
