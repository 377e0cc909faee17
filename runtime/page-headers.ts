/**
 * The static pages both programs serve themselves, every byte from their own origin (the cell's docs page
 * and console, the device's approvals page): the headers every response of such a page carries beside its
 * Content-Security-Policy, the policy the cell's two pages share, and their strong ETags.
 */
import { createHash } from 'node:crypto';

/** The cell's pages' policy (docs page, console): its own origin only, no inline code, no framing. */
export const SELF_ONLY_CSP_DIRECTIVES: readonly string[] = Object.freeze([
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
  "form-action 'self'",
]);

/** For a page an operator signs in to (the console, the approvals page): no framing, no device features. */
export const NO_FRAMING_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'X-Frame-Options': 'DENY',
  'Permissions-Policy': 'camera=(), microphone=(), geolocation=(), payment=(), usb=()',
});

/** A page's headers: its policy, no sniffing, no referrer, same-origin resources, then `more` in order. */
export function pageHeaders(csp: string, more: Readonly<Record<string, string>> = {}): Readonly<Record<string, string>> {
  return Object.freeze({
    'Content-Security-Policy': csp,
    'X-Content-Type-Options': 'nosniff',
    // A page's URL may carry an authorization code (the console's return page): never send it onwards.
    'Referrer-Policy': 'no-referrer',
    'Cross-Origin-Resource-Policy': 'same-origin',
    ...more,
  });
}

/** A strong ETag of a body. */
export function etagOf(body: string): string {
  return `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;
}
