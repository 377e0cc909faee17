/**
 * Deployment-posture allow-gates for model providers. Pure rule table,
 * evaluated at registration (a forbidden provider is refused there) and again
 * before every call (a cell restarted under a stricter posture fails closed).
 *
 * | provider_type     | where base_url points           | single-cell | multi-cell | sovereign | cloud-enabled |
 * |-------------------|---------------------------------|-------------|------------|-----------|---------------|
 * | openai-compatible | loopback (127/8, ::1, localhost)| allow       | allow      | allow     | allow         |
 * | openai-compatible | private (10/8, 172.16/12, 192.168/16, fc00::/7, fe80::/10, 100.64/10) | allow | allow | allow | allow |
 * | openai-compatible | public IP or DNS name, https    | refuse      | refuse     | refuse    | allow         |
 * | openai-compatible | public IP or DNS name, http     | refuse      | refuse     | refuse    | refuse        |
 * | local-signed      | no base_url (a file on the node)| allow       | allow      | allow     | allow         |
 *
 * Only `cloud-enabled` may reach a model outside the operator's networks;
 * `sovereign` is air-gapped, and `single-cell`/`multi-cell` stay on the
 * operator's own networks (loopback and private ranges). A DNS name other
 * than `localhost` counts as public: a name can resolve anywhere, so it is
 * judged fail-closed. Any other provider_type is refused.
 */
import ipaddr from 'ipaddr.js';
import type { Posture } from '../config.ts';

export const PROVIDER_TYPES = ['openai-compatible', 'local-signed'] as const;
export type ProviderType = (typeof PROVIDER_TYPES)[number];

export type HostClass = 'loopback' | 'private' | 'public';

export interface PostureDecision {
  allowed: boolean;
  /** Stable name of the rule that decided. */
  rule: string;
  reason: string;
  host_class?: HostClass;
}

/** Loopback, private or public, from a URL's host. */
export function classifyHost(hostname: string): HostClass {
  const h = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost' || h.endsWith('.localhost')) return 'loopback';
  if (!ipaddr.isValid(h)) return 'public';
  let addr = ipaddr.parse(h);
  if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress()) addr = (addr as ipaddr.IPv6).toIPv4Address();
  const range = addr.range();
  if (range === 'loopback') return 'loopback';
  if (['private', 'uniqueLocal', 'linkLocal', 'carrierGradeNat'].includes(range)) return 'private';
  return 'public';
}

/** Decisions already made, by posture, type and URL (checked again before every model call). */
const decided = new Map<string, Readonly<PostureDecision>>();
const DECIDED_MAX = 256;

/** The allow-gate: may a provider of this type at this address be used under `posture`? */
export function postureAllows(posture: Posture, provider: { provider_type: string; base_url?: string | null }): Readonly<PostureDecision> {
  const k = `${posture}\u0000${provider.provider_type}\u0000${provider.base_url ?? ''}`;
  let d = decided.get(k);
  if (d === undefined) {
    d = Object.freeze(decide(posture, provider));
    if (decided.size >= DECIDED_MAX) decided.clear();
    decided.set(k, d);
  }
  return d;
}

/** The decision itself: a pure function of posture, provider type and base URL. */
function decide(posture: Posture, provider: { provider_type: string; base_url?: string | null }): PostureDecision {
  if (provider.provider_type === 'local-signed') {
    if (provider.base_url)
      return {
        allowed: false,
        rule: 'local-signed-no-url',
        reason: 'a local-signed provider is a file on this node and takes no base_url',
      };
    return { allowed: true, rule: 'local-signed', reason: 'a local signed model is allowed under every posture' };
  }
  if (provider.provider_type !== 'openai-compatible') {
    return { allowed: false, rule: 'unknown-type', reason: `provider_type must be one of ${PROVIDER_TYPES.join(', ')}` };
  }
  if (!provider.base_url) return { allowed: false, rule: 'url-required', reason: 'an openai-compatible provider needs a base_url' };
  let url: URL;
  try {
    url = new URL(provider.base_url);
  } catch {
    return { allowed: false, rule: 'url-invalid', reason: 'base_url is not a valid URL' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return { allowed: false, rule: 'url-scheme', reason: 'base_url must be http or https' };
  if (url.username || url.password)
    return { allowed: false, rule: 'url-credentials', reason: 'base_url must not carry credentials; use api_key_secret_id' };
  const host_class = classifyHost(url.hostname);
  if (host_class !== 'public')
    return {
      allowed: true,
      rule: `${host_class}-any-posture`,
      reason: `a ${host_class} address is allowed under every posture`,
      host_class,
    };
  if (posture !== 'cloud-enabled') {
    return {
      allowed: false,
      rule: 'public-needs-cloud-enabled',
      reason: `posture ${posture} forbids a provider outside loopback and private networks`,
      host_class,
    };
  }
  if (url.protocol !== 'https:')
    return { allowed: false, rule: 'public-needs-https', reason: 'a public provider must be reached over https', host_class };
  return { allowed: true, rule: 'public-https-cloud-enabled', reason: 'cloud-enabled allows a public https provider', host_class };
}
