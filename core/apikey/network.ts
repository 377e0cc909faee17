/**
 * Network constraints of an API key: `allowed_ips` (exact IPv4/IPv6
 * addresses or CIDR ranges) and `allowed_regions`.
 *
 * Rules are parsed by ipaddr.js (pure JS). IPv4 must be dotted four-part
 * decimal without leading zeros (`10.0.0.1`; never `10.1`, `0x0a.0.0.1` or
 * `010.0.0.1`). An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`), in a rule or
 * as the caller's address, is treated as the IPv4 address it maps (a mapped
 * CIDR `::ffff:10.0.0.0/104` becomes `10.0.0.0/8`). A CIDR whose address has
 * host bits set (`10.1.2.3/8`) is accepted and means its network
 * (`10.0.0.0/8`). Zone ids (`fe80::1%eth0`) are refused. An unparsable rule
 * never matches (fail closed); validate rules when keys are minted with
 * `parseIpRule`.
 */
import ipaddr from 'ipaddr.js';

type Addr = ipaddr.IPv4 | ipaddr.IPv6;

/** A parsed `allowed_ips` entry: an address and a prefix length (32 or 128 for an exact address). */
export interface IpRule {
  kind: 'exact' | 'cidr';
  family: 4 | 6;
  addr: Addr;
  bits: number;
  /** Canonical text: `a.b.c.d`, RFC 5952 IPv6, with `/bits` for CIDR (network address). */
  text: string;
}

const V4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const V6_CHARS = /^[0-9A-Fa-f:.]+$/;

/** Parses one address (no prefix). IPv4-mapped IPv6 comes back as IPv4. */
function parseAddr(s: string): Addr | null {
  if (V4.test(s)) return ipaddr.IPv4.parse(s);
  if (!s.includes(':') || !V6_CHARS.test(s)) return null;
  // an embedded IPv4 tail must be strict dotted decimal too
  const tail = s.slice(s.lastIndexOf(':') + 1);
  if (tail.includes('.') && !V4.test(tail)) return null;
  if (!ipaddr.IPv6.isValid(s)) return null;
  const v6 = ipaddr.IPv6.parse(s);
  return v6.isIPv4MappedAddress() ? v6.toIPv4Address() : v6;
}

function text(addr: Addr): string {
  return addr.kind() === 'ipv6' ? (addr as ipaddr.IPv6).toRFC5952String() : addr.toString();
}

/** Zeroes the host bits of `addr` beyond `bits`. */
function network(addr: Addr, bits: number): Addr {
  const bytes = addr.toByteArray();
  for (let i = 0; i < bytes.length; i++) {
    const keep = Math.max(0, Math.min(8, bits - i * 8));
    bytes[i]! &= (0xff << (8 - keep)) & 0xff;
  }
  return ipaddr.fromByteArray(bytes);
}

/** Parses an `allowed_ips` entry; `null` when it is not an exact address or CIDR. */
export function parseIpRule(rule: string): IpRule | null {
  if (typeof rule !== 'string' || rule.length === 0 || rule.length > 64) return null;
  const slash = rule.indexOf('/');
  if (slash < 0) {
    const addr = parseAddr(rule);
    if (addr === null) return null;
    const family = addr.kind() === 'ipv4' ? 4 : 6;
    return { kind: 'exact', family, addr, bits: family === 4 ? 32 : 128, text: text(addr) };
  }
  const addrPart = rule.slice(0, slash);
  const bitsPart = rule.slice(slash + 1);
  if (!/^(0|[1-9]\d{0,2})$/.test(bitsPart)) return null;
  let bits = Number(bitsPart);
  let addr = parseAddr(addrPart);
  if (addr === null) return null;
  const mapped = addr.kind() === 'ipv4' && !V4.test(addrPart);
  if (mapped) {
    if (bits < 96 || bits > 128) return null; // a mapped range must stay inside ::ffff:0:0/96
    bits -= 96;
  }
  const max = addr.kind() === 'ipv4' ? 32 : 128;
  if (bits > max) return null;
  addr = network(addr, bits);
  return { kind: 'cidr', family: max === 32 ? 4 : 6, addr, bits, text: `${text(addr)}/${bits}` };
}

const RULE_CACHE_LIMIT = 4096;
const ruleCache = new Map<string, IpRule | null>();

function cachedRule(rule: string): IpRule | null {
  let r = ruleCache.get(rule);
  if (r === undefined) {
    if (ruleCache.size >= RULE_CACHE_LIMIT) ruleCache.clear();
    r = parseIpRule(rule);
    ruleCache.set(rule, r);
  }
  return r;
}

/** True when `addr` falls in `rule`. */
export function ruleMatches(rule: IpRule, addr: Addr): boolean {
  if (rule.addr.kind() !== addr.kind()) return false;
  return addr.match(rule.addr, rule.bits);
}

/**
 * True when the caller's IP passes the key's `allowed_ips`. No rules: every
 * caller passes. Rules but no (or an unparsable) caller IP: refused.
 */
export function ipAllowed(ip: string | null, rules: readonly string[]): boolean {
  if (rules.length === 0) return true;
  if (ip === null) return false;
  const addr = parseAddr(ip);
  if (addr === null) return false;
  for (const r of rules) {
    const rule = cachedRule(r);
    if (rule !== null && ruleMatches(rule, addr)) return true;
  }
  return false;
}

/**
 * True when the serving region passes the key's `allowed_regions`. No
 * regions listed: every region passes. Matching is exact after trimming and
 * lower-casing both sides (`EU-West-1` = `eu-west-1`); an empty serving
 * region never matches a non-empty list.
 */
export function regionAllowed(region: string, allowed: readonly string[]): boolean {
  if (allowed.length === 0) return true;
  const r = region.trim().toLowerCase();
  if (r === '') return false;
  return allowed.some((a) => a.trim().toLowerCase() === r);
}
