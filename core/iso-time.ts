/**
 * Times on the wire: every timestamp in an API answer (cell and edge) is an
 * ISO 8601 / RFC 3339 date-time in UTC with milliseconds
 * (`2026-01-01T00:00:00.000Z`), and every time a request carries (a query
 * parameter, a body field) is read with `parseIsoTime`. Stores and signed
 * file formats keep epoch milliseconds (docs/architecture.md, "Times"); the
 * conversion happens once, in the views, with these functions.
 *
 * @example
 * isoTime(Date.UTC(2026, 0, 1)) // '2026-01-01T00:00:00.000Z'
 * parseIsoTime('2026-01-01T01:00:00+01:00') // Date.UTC(2026, 0, 1)
 */

/** Epoch milliseconds → `YYYY-MM-DDTHH:MM:SS.sssZ`. A non-finite or out-of-range number is a programming mistake (TypeError). */
export function isoTime(ms: number): string {
  const d = new Date(ms);
  if (!Number.isFinite(ms) || Number.isNaN(d.getTime())) throw new TypeError(`isoTime: not a time: ${String(ms)}`);
  return d.toISOString();
}

/** `isoTime`, with null kept as null (a time that has not happened: finished_at of a running run). */
export function isoTimeOrNull(ms: number | null): string | null {
  return ms === null ? null : isoTime(ms);
}

// RFC 3339 §5.6 date-time: full-date "T" full-time, offset Z or ±hh:mm; fraction optional. No leap second (JS time has none).
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/**
 * An RFC 3339 date-time (`2026-01-01T00:00:00Z`, `…T00:00:00.123+02:00`) → epoch milliseconds, or
 * null when the text is not one (a date alone, no offset, day 31 of a 30-day month, hour 24, …).
 * Digits beyond milliseconds are dropped.
 */
export function parseIsoTime(text: string): number | null {
  const m = DATE_TIME.exec(text);
  if (!m) return null;
  const [year, month, day, hour, minute, second] = [m[1], m[2], m[3], m[4], m[5], m[6]].map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (month < 1 || month > 12 || hour > 23 || minute > 59 || second > 59) return null;
  // Day 0 of the next month is the last of this one (setUTCFullYear: years 0-99 are not 1900-1999 there).
  const last = new Date(0);
  last.setUTCFullYear(year, month, 0);
  if (day < 1 || day > last.getUTCDate()) return null;
  let offsetMinutes = 0;
  if (m[8] === undefined) {
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 23 || om > 59) return null;
    offsetMinutes = (m[9] === '-' ? -1 : 1) * (oh * 60 + om);
  }
  const ms = m[7] === undefined ? 0 : Number(m[7].slice(0, 3).padEnd(3, '0'));
  const d = new Date(0);
  d.setUTCFullYear(year, month - 1, day);
  d.setUTCHours(hour, minute, second, ms);
  const t = d.getTime() - offsetMinutes * 60_000;
  return Number.isFinite(t) ? t : null;
}
