/**
 * Test certificates made with the system's openssl: a CA, a server leaf for
 * 127.0.0.1, and client leaves `robot` and `intruder` signed by the CA, plus
 * `stranger`, a self-signed client leaf no CA vouches for. Each as PEM files
 * in `dir` and as DER (for x5t#S256 and for a TLS socket's peer certificate).
 */
import { execFileSync } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface TestCerts {
  dir: string;
  pem: Record<
    'ca.pem' | 'server.pem' | 'server.key' | 'robot.pem' | 'robot.key' | 'intruder.pem' | 'intruder.key' | 'stranger.pem' | 'stranger.key',
    Buffer
  >;
  der(name: 'robot' | 'intruder' | 'stranger'): Buffer;
  /** RFC 8705 x5t#S256 of a leaf. */
  x5t(name: 'robot' | 'intruder' | 'stranger'): string;
}

export function makeTestCerts(dir: string): TestCerts {
  const openssl = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  openssl(['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=test-ca']);
  const leaf = (name: string, ext: string) => {
    writeFileSync(join(dir, `${name}.ext`), ext);
    openssl(['req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`]);
    openssl([
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      `${name}.pem`,
      '-days',
      '2',
      '-extfile',
      `${name}.ext`,
    ]);
  };
  leaf('server', 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  leaf('robot', 'extendedKeyUsage=clientAuth\n');
  leaf('intruder', 'extendedKeyUsage=clientAuth\n');
  openssl(['req', '-x509', ...ec, '-keyout', 'stranger.key', '-out', 'stranger.pem', '-days', '2', '-subj', '/CN=stranger']);
  const pem = Object.fromEntries(
    ['ca.pem', 'server.pem', 'server.key', 'robot.pem', 'robot.key', 'intruder.pem', 'intruder.key', 'stranger.pem', 'stranger.key'].map(
      (f) => [f, readFileSync(join(dir, f))],
    ),
  ) as TestCerts['pem'];
  const der = (name: 'robot' | 'intruder' | 'stranger') => Buffer.from(new X509Certificate(pem[`${name}.pem`]).raw);
  return { dir, pem, der, x5t: (name) => createHash('sha256').update(der(name)).digest('base64url') };
}

/**
 * What node:https gives a handler for a TLS connection with a client
 * certificate (the `getPeerCertificate().raw` and `authorized` the cell and
 * the edge read), for in-process requests.
 */
export function tlsSocket(der: Buffer | null, authorized: boolean, remoteAddress = '127.0.0.1') {
  return {
    remoteAddress,
    encrypted: true,
    authorized,
    getPeerCertificate: () => (der ? { raw: der, subject: { CN: 'test' } } : {}),
  };
}
