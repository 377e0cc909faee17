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
 *
 * An IPv6 address that embeds an IPv4 address is judged by the IPv4 address it
 * carries, since that is where the packet ends up: IPv4-compatible `::a.b.c.d`
 * (`::7f00:1` is loopback), IPv4-mapped `::ffff:a.b.c.d`, IPv4-translated
 * `::ffff:0:a.b.c.d`, NAT64 `64:ff9b::/96` and 6to4 `2002::/16`. Other
 * transition forms (Teredo, the local-use NAT64 prefix `64:ff9b:1::/48`) are
 * not public.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { Agent } from 'undici';
import { ipAllowed } from '../core/apikey/network.ts';

/** The IPv4 address an IPv6 address carries in one of the forms that route to it, or null. */
export function embeddedIPv4(a: ipaddr.IPv6): ipaddr.IPv4 | null {
  const p = a.parts;
  const v4 = (hi: number, lo: number) => new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
  const zero = (from: number, to: number) => p.slice(from, to).every((x) => x === 0);
  if (zero(0, 6)) return v4(p[6]!, p[7]!); // IPv4-compatible ::a.b.c.d (RFC 4291 2.5.5.1), :: and ::1 included
  if (zero(0, 5) && p[5] === 0xffff) return v4(p[6]!, p[7]!); // IPv4-mapped ::ffff:a.b.c.d
  if (zero(0, 4) && p[4] === 0xffff && p[5] === 0) return v4(p[6]!, p[7]!); // IPv4-translated (RFC 6145)
  if (p[0] === 0x64 && p[1] === 0xff9b && zero(2, 6)) return v4(p[6]!, p[7]!); // NAT64 well-known prefix (RFC 6052)
  if (p[0] === 0x2002) return v4(p[1]!, p[2]!); // 6to4 (RFC 3056)
  return null;
}

/** The address a connection to `ip` reaches for judging: the embedded IPv4 address, if any, else `ip`. */
function judged(ip: string): ipaddr.IPv4 | ipaddr.IPv6 | null {
  let a: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    a = ipaddr.parse(ip);
  } catch {
    return null;
  }
  return a.kind() === 'ipv6' ? (embeddedIPv4(a as ipaddr.IPv6) ?? a) : a;
}

/** True when `ip` is an address a tool may reach without the operator's say-so. */
export function isPublicAddress(ip: string): boolean {
  return judged(ip)?.range() === 'unicast';
}

/** True when the operator allow-listed `ip`, or the IPv4 address it embeds, for the whole cell. */
function operatorAllowed(ip: string, allowPrivate: readonly string[]): boolean {
  if (allowPrivate.length === 0) return false;
  if (ipAllowed(ip, allowPrivate)) return true;
  const a = judged(ip);
  return a !== null && a.kind() === 'ipv4' && ipAllowed(a.toString(), allowPrivate);
}

/** A refused destination: the error a tool turns into `egress_private_address`. */
export class PrivateDestinationError extends Error {
  constructor(readonly address: string) {
    super(`refusing to connect to non-public address ${address}`);
    this.name = 'PrivateDestinationError';
  }
}

/** True when a connection failed because the floor refused the resolved address (the error or one of its causes). */
export function isPrivateRefusal(e: unknown): boolean {
  for (let x: unknown = e, i = 0; x && i < 6; x = (x as { cause?: unknown }).cause, i++) {
    if (x instanceof PrivateDestinationError) return true;
  }
  return false;
}

type LookupCb = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** A DNS lookup for net.connect that refuses non-public answers outside `allowPrivate`. */
export function guardedLookup(allowPrivate: readonly string[]) {
  const ok = (ip: string) => isPublicAddress(ip) || operatorAllowed(ip, allowPrivate);
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
  return isPublicAddress(h) || operatorAllowed(h, allowPrivate);
}

/**
 * An undici dispatcher whose connections pass the floor. The tools module
 * builds one per cell (its connections are pooled and reused) and closes it
 * when the cell stops.
 */
export function guardedDispatcher(allowPrivate: readonly string[]): Agent {
  return new Agent({ connect: { lookup: guardedLookup(allowPrivate) as never } });
}
