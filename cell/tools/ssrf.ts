/**
 * The network floor under every tool that reaches a URL (http.get): however
 * wide a seat's or a job's `egress_allowlist` is, a connection to a loopback,
 * private, link-local, unique-local, carrier-grade NAT, multicast, reserved or
 * unspecified address is refused, unless the operator allow-listed that range
 * for the whole cell (`--egress-allow-private CIDR,...`; docs/configuration.md).
 *
 * The check runs in the connection's own DNS lookup, so the address that is
 * checked is the address that is dialled: a name that resolves to a public
 * address for the check and a private one for the connection (DNS rebinding)
 * is not possible. Literal IP URLs are checked the same way.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { Agent } from 'undici';
import { ipAllowed } from '../../core/apikey/network.ts';

/** True when `ip` is an address a tool may reach without the operator's say-so. */
export function isPublicAddress(ip: string): boolean {
  let a: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    a = ipaddr.parse(ip);
  } catch {
    return false;
  }
  if (a.kind() === 'ipv6' && (a as ipaddr.IPv6).isIPv4MappedAddress()) a = (a as ipaddr.IPv6).toIPv4Address();
  return a.range() === 'unicast';
}

/** A refused destination: the error a tool turns into `egress_private_address`. */
export class PrivateDestinationError extends Error {
  constructor(readonly address: string) {
    super(`refusing to connect to non-public address ${address}`);
    this.name = 'PrivateDestinationError';
  }
}

type LookupCb = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** A DNS lookup for net.connect that refuses non-public answers outside `allowPrivate`. */
export function guardedLookup(allowPrivate: readonly string[]) {
  const ok = (ip: string) => isPublicAddress(ip) || (allowPrivate.length > 0 && ipAllowed(ip, allowPrivate));
  return function lookup(hostname: string, options: { all?: boolean; family?: number }, cb: LookupCb): void {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return cb(err, '');
      // Only vetted addresses are ever dialled; a name with none left is refused.
      const all = addresses as LookupAddress[];
      const list = all.filter((x) => ok(x.address));
      if (list.length === 0) return cb(Object.assign(new PrivateDestinationError(all[0]?.address ?? hostname), { code: 'EACCES' }), '');
      if (options.all) return cb(null, list);
      cb(null, list[0]!.address, list[0]!.family);
    });
  };
}

/** True when a literal-IP host may be reached (names are judged at connect time by guardedLookup). */
export function literalHostAllowed(host: string, allowPrivate: readonly string[]): boolean {
  const h = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  if (isIP(h) === 0) return true;
  return isPublicAddress(h) || (allowPrivate.length > 0 && ipAllowed(h, allowPrivate));
}

/**
 * An undici dispatcher whose connections pass the floor. The tools module
 * builds one per cell (its connections are pooled and reused) and closes it
 * when the cell stops.
 */
export function guardedDispatcher(allowPrivate: readonly string[]): Agent {
  return new Agent({ connect: { lookup: guardedLookup(allowPrivate) as never } });
}
