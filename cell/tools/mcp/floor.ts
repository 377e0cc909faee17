/**
 * Where a source's server (and its authorization server's token endpoint)
 * may be, checked when a source is registered or changed and again before
 * every connection:
 *
 * - an http(s) URL without credentials or a fragment; plain `http` only to
 *   loopback or a private address (a token or a tool's data never crosses
 *   a network the operator does not own in clear), else https;
 * - the network floor of every tool (runtime/ssrf.ts): a loopback,
 *   private or link-local address only when the operator allowed its range
 *   (`--egress-allow-private`), names judged at connect time
 *   (`egress_private_address`);
 * - the posture: under `sovereign` (air-gapped) only loopback, or an address
 *   the operator allowed; a DNS name other than `localhost` is refused, since
 *   it can resolve anywhere (`posture_forbidden`, rule `sovereign-local-only`).
 */
import ipaddr from 'ipaddr.js';
import { ServiceError, invalid } from '../../../core/errors.ts';
import { ipAllowed } from '../../../core/apikey/network.ts';
import type { CellConfig } from '../../config.ts';
import { literalHostAllowed } from '../../../runtime/ssrf.ts';

type HostClass = 'loopback' | 'private' | 'public';

function hostClass(hostname: string): HostClass {
  const h = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost' || h.endsWith('.localhost')) return 'loopback';
  if (!ipaddr.isValid(h)) return 'public';
  let a = ipaddr.parse(h);
  if (a.kind() === 'ipv6' && (a as ipaddr.IPv6).isIPv4MappedAddress()) a = (a as ipaddr.IPv6).toIPv4Address();
  const range = a.range();
  if (range === 'loopback') return 'loopback';
  return ['private', 'uniqueLocal', 'linkLocal', 'carrierGradeNat'].includes(range) ? 'private' : 'public';
}

/** URLs already found good, by configuration (the posture and the operator's ranges do not change while a cell runs). */
const good = new WeakMap<object, Set<string>>();

/**
 * `checkSourceUrl` before a connection: the answer for a URL already found good is remembered (a source's
 * URL is checked at every call); a refusal is thrown each time.
 */
export function assertSourceUrl(config: Pick<CellConfig, 'posture' | 'egressAllowPrivate'>, raw: string): void {
  const seen = good.get(config) ?? new Set<string>();
  if (seen.has(raw)) return;
  checkSourceUrl(config, raw, 'url');
  if (seen.size > 1024) seen.clear();
  seen.add(raw);
  good.set(config, seen);
}

/**
 * The URL a source (or its token endpoint, `field`) may have under this cell's configuration, parsed;
 * throws the envelope's refusal otherwise.
 */
export function checkSourceUrl(config: Pick<CellConfig, 'posture' | 'egressAllowPrivate'>, raw: string, field: string): URL {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw invalid(`${field} is not a URL`, { reason: 'source_url_invalid', field });
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:')
    throw invalid(`${field} must be https (or http)`, { reason: 'source_url_invalid', field });
  if (u.username !== '' || u.password !== '') throw invalid(`${field} must not carry credentials`, { reason: 'source_url_invalid', field });
  if (u.hash !== '' || raw.includes('#')) throw invalid(`${field} must not have a fragment`, { reason: 'source_url_invalid', field });
  const cls = hostClass(u.hostname);
  if (u.protocol === 'http:' && cls === 'public')
    throw invalid(`${field}: plain http only to loopback or a private address; use https`, { reason: 'source_url_invalid', field });
  if (!literalHostAllowed(u.hostname, config.egressAllowPrivate)) {
    throw new ServiceError(
      'forbidden',
      `${field}: a loopback, private or link-local address the operator did not allow (--egress-allow-private)`,
      {
        details: { reason: 'egress_private_address', field, destination: u.origin },
      },
    );
  }
  if (config.posture === 'sovereign' && cls !== 'loopback') {
    const h = u.hostname.replace(/^\[|\]$/g, '');
    const allowed = ipaddr.isValid(h) && config.egressAllowPrivate.length > 0 && ipAllowed(h, config.egressAllowPrivate);
    if (!allowed) {
      throw new ServiceError('forbidden', `${field}: the sovereign posture reaches only loopback and the addresses the operator allowed`, {
        details: { reason: 'posture_forbidden', field, posture: config.posture, rule: 'sovereign-local-only' },
      });
    }
  }
  return u;
}
