// core/iso-time.ts: the one conversion between stored epoch milliseconds and
// the ISO 8601 / RFC 3339 (§5.6 date-time) text every API answer carries.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { isoTime, isoTimeOrNull, parseIsoTime } from '../../core/iso-time.ts';

test('isoTime: UTC with milliseconds; null stays null; a non-time is a TypeError', () => {
  assert.equal(isoTime(Date.UTC(2026, 0, 1)), '2026-01-01T00:00:00.000Z');
  assert.equal(isoTime(0), '1970-01-01T00:00:00.000Z');
  assert.equal(isoTime(Date.UTC(2026, 1, 28, 23, 59, 59, 7)), '2026-02-28T23:59:59.007Z');
  assert.equal(isoTimeOrNull(null), null);
  assert.equal(isoTimeOrNull(1), '1970-01-01T00:00:00.001Z');
  for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, 8.65e15]) assert.throws(() => isoTime(bad), TypeError);
});

test('parseIsoTime: RFC 3339 date-times, with Z or an offset, fractions to the millisecond', () => {
  const t0 = Date.UTC(2026, 0, 1);
  const cases: [string, number][] = [
    ['2026-01-01T00:00:00Z', t0],
    ['2026-01-01T00:00:00.000Z', t0],
    ['2026-01-01t00:00:00z', t0],
    ['2026-01-01T01:00:00+01:00', t0],
    ['2025-12-31T19:30:00-04:30', t0],
    ['2026-01-01T00:00:00.5Z', t0 + 500],
    ['2026-01-01T00:00:00.123456789Z', t0 + 123],
    ['2024-02-29T12:00:00Z', Date.UTC(2024, 1, 29, 12)],
    ['0000-02-29T00:00:00Z', Date.parse('0000-02-29T00:00:00.000Z')],
  ];
  for (const [text, ms] of cases) assert.equal(parseIsoTime(text), ms, text);
});

test('parseIsoTime: anything else is null (no offset, a date alone, impossible fields, epoch numbers)', () => {
  for (const bad of [
    '',
    '2026-01-01',
    '2026-01-01T00:00:00',
    '2026-01-01 00:00:00Z',
    '2026-1-1T00:00:00Z',
    '2026-02-29T00:00:00Z',
    '2026-04-31T00:00:00Z',
    '2026-13-01T00:00:00Z',
    '2026-00-10T00:00:00Z',
    '2026-01-00T00:00:00Z',
    '2026-01-01T24:00:00Z',
    '2026-01-01T00:60:00Z',
    '2026-01-01T00:00:60Z',
    '2026-01-01T00:00:00+24:00',
    '2026-01-01T00:00:00.Z',
    '2026-01-01T00:00:00Z ',
    '1767225600000',
    'Thu, 01 Jan 2026 00:00:00 GMT',
  ]) {
    assert.equal(parseIsoTime(bad), null, bad);
  }
});

test('parseIsoTime(isoTime(t)) === t for every representable millisecond in years 0000-9999', () => {
  fc.assert(
    fc.property(fc.integer({ min: -62_167_219_200_000, max: 253_402_300_799_999 }), (t) => parseIsoTime(isoTime(t)) === t),
    { numRuns: 2000 },
  );
});
