/**
 * The TLS client certificate of a request's connection, read the same way by
 * the cell and the edge (both terminate TLS with node:https and
 * `requestCert: true, rejectUnauthorized: false`, so a connection without a
 * certificate still works). `authorized` says the leaf verified against the
 * configured client CA; only such a leaf counts for certificate-bound tokens
 * (RFC 8705) and for `tls_client_auth`.
 */
import type { TLSSocket } from 'node:tls';
import { certThumbprint } from '../core/tokens/cnf.ts';

export interface PeerCertificate {
  /** The leaf certificate, DER. */
  der: Uint8Array;
  /** Subject DN as `CN=…,O=…`. */
  subjectDn: string;
  /** True when the leaf verified against the client CA. */
  authorized: boolean;
}

/** The connection's client certificate, or null (plain HTTP, or no certificate sent). */
export function peerCertificate(socket: unknown): PeerCertificate | null {
  const sock = socket as TLSSocket | undefined;
  if (!sock || typeof sock.getPeerCertificate !== 'function') return null;
  const cert = sock.getPeerCertificate();
  if (!cert?.raw || cert.raw.length === 0) return null;
  const subj = cert.subject
    ? Object.entries(cert.subject)
        .map(([k, v]) => `${k}=${Array.isArray(v) ? v.join('+') : String(v)}`)
        .join(',')
    : '';
  return { der: new Uint8Array(cert.raw), subjectDn: subj, authorized: sock.authorized === true };
}

/** x5t#S256 of the connection's CA-verified client leaf, or null when there is none. */
export async function verifiedLeafThumbprint(socket: unknown): Promise<string | null> {
  const peer = peerCertificate(socket);
  return peer?.authorized ? certThumbprint(peer.der) : null;
}
