// core/apikey/network.ts: allowed_ips (exact / CIDR, v4 / v6, IPv4-mapped) and allowed_regions.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ipAllowed, parseIpRule, regionAllowed } from '../../../core/apikey/network.ts';

test('parseIpRule: exact and CIDR, v4 and v6, canonical text', () => {
  const cases: [string, { kind: 'exact' | 'cidr'; family: 4 | 6; bits: number; text: string }][] = [
    ['10.0.0.1', { kind: 'exact', family: 4, bits: 32, text: '10.0.0.1' }],
    ['0.0.0.0/0', { kind: 'cidr', family: 4, bits: 0, text: '0.0.0.0/0' }],
    ['192.168.1.0/24', { kind: 'cidr', family: 4, bits: 24, text: '192.168.1.0/24' }],
    ['10.1.2.3/8', { kind: 'cidr', family: 4, bits: 8, text: '10.0.0.0/8' }],
    ['255.255.255.255/32', { kind: 'cidr', family: 4, bits: 32, text: '255.255.255.255/32' }],
    ['2001:db8::1', { kind: 'exact', family: 6, bits: 128, text: '2001:db8::1' }],
    ['2001:DB8:0:0:0:0:0:1', { kind: 'exact', family: 6, bits: 128, text: '2001:db8::1' }],
    ['2001:db8::/32', { kind: 'cidr', family: 6, bits: 32, text: '2001:db8::/32' }],
    ['2001:db8:ffff::1/33', { kind: 'cidr', family: 6, bits: 33, text: '2001:db8:8000::/33' }],
    ['::/0', { kind: 'cidr', family: 6, bits: 0, text: '::/0' }],
    ['::1', { kind: 'exact', family: 6, bits: 128, text: '::1' }],
    ['::ffff:10.0.0.1', { kind: 'exact', family: 4, bits: 32, text: '10.0.0.1' }],
    ['::ffff:10.0.0.0/104', { kind: 'cidr', family: 4, bits: 8, text: '10.0.0.0/8' }],
    ['::ffff:0a00:0001', { kind: 'exact', family: 4, bits: 32, text: '10.0.0.1' }],
  ];
  for (const [rule, want] of cases) {
    const r = parseIpRule(rule);
    assert.ok(r, rule);
    assert.deepEqual({ kind: r.kind, family: r.family, bits: r.bits, text: r.text }, want, rule);
  }
});

test('parseIpRule refuses anything that is not an exact address or a CIDR', () => {
  const bad = [
    '',
    '10',
    '10.1',
    '10.0.0',
    '10.0.0.256',
    '010.0.0.1',
    '0x0a.0.0.1',
    '10.0.0.1/33',
    '10.0.0.1/',
    '10.0.0.1/-1',
    '10.0.0.1/08',
    '10.0.0.1/8/8',
    '2001:db8::/129',
    '2001:db8:::1',
    'fe80::1%eth0',
    '::ffff:10.0.0.0/95',
    '::ffff:010.0.0.1',
    'localhost',
    'example.com',
    ' 10.0.0.1',
    '10.0.0.1 ',
    '*',
    '1'.repeat(100),
  ];
  for (const r of bad) assert.equal(parseIpRule(r), null, JSON.stringify(r));
  assert.equal(parseIpRule(null as unknown as string), null);
});

test('ipAllowed decision table', () => {
  const rows: [string | null, string[], boolean, string][] = [
    ['203.0.113.9', [], true, 'no rules: everyone'],
    [null, [], true, 'no rules, unknown IP: allowed'],
    [null, ['10.0.0.0/8'], false, 'rules but unknown IP: refused'],
    ['garbage', ['10.0.0.0/8'], false, 'rules but unparsable IP: refused'],
    ['10.0.0.1', ['10.0.0.1'], true, 'exact v4'],
    ['10.0.0.2', ['10.0.0.1'], false, 'exact v4 miss'],
    ['10.255.255.255', ['10.0.0.0/8'], true, 'CIDR v4 last address'],
    ['11.0.0.0', ['10.0.0.0/8'], false, 'CIDR v4 first address past'],
    ['192.168.1.77', ['10.0.0.0/8', '192.168.1.0/24'], true, 'second rule matches'],
    ['2001:db8::42', ['2001:db8::/32'], true, 'CIDR v6'],
    ['2001:db9::42', ['2001:db8::/32'], false, 'CIDR v6 miss'],
    ['2001:0db8:0000::0042', ['2001:db8::42'], true, 'exact v6 in another spelling'],
    ['::ffff:10.1.2.3', ['10.0.0.0/8'], true, 'IPv4-mapped caller vs v4 rule'],
    ['::FFFF:10.1.2.3', ['10.1.2.3'], true, 'IPv4-mapped caller (upper case) vs exact v4 rule'],
    ['10.1.2.3', ['::ffff:10.0.0.0/104'], true, 'v4 caller vs mapped rule'],
    ['10.1.2.3', ['::/0'], false, 'a v6 rule never matches a v4 caller'],
    ['2001:db8::1', ['0.0.0.0/0'], false, 'a v4 rule never matches a v6 caller'],
    ['::1', ['127.0.0.1'], false, 'v6 loopback is not v4 loopback'],
    ['10.0.0.1', ['not-a-rule'], false, 'an unparsable rule never matches (fail closed)'],
    ['10.0.0.1', ['not-a-rule', '10.0.0.0/8'], true, 'unparsable rules are skipped'],
    ['fe80::1%eth0', ['fe80::/10'], false, 'zone ids are refused'],
  ];
  for (const [ip, rules, want, why] of rows) assert.equal(ipAllowed(ip, rules), want, why);
});

const v4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255));

test("property: an IPv4 address is in a CIDR iff its first `bits` bits equal the network's", () => {
  fc.assert(
    fc.property(v4, v4, fc.integer({ min: 0, max: 32 }), (a, n, bits) => {
      const num = (o: number[]) => ((o[0]! << 24) >>> 0) + (o[1]! << 16) + (o[2]! << 8) + o[3]!;
      const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
      const expected = (num(a) & mask) >>> 0 === (num(n) & mask) >>> 0;
      const ip = a.join('.');
      const rule = `${n.join('.')}/${bits}`;
      assert.equal(ipAllowed(ip, [rule]), expected, `${ip} in ${rule}`);
      assert.equal(ipAllowed(`::ffff:${ip}`, [rule]), expected, `mapped ${ip} in ${rule}`);
    }),
    { numRuns: 1000 },
  );
});

test('property: every address matches itself as an exact rule and as /32 or /128', () => {
  const v6 = fc.array(fc.nat(0xffff), { minLength: 8, maxLength: 8 }).map((p) => p.map((x) => x.toString(16)).join(':'));
  fc.assert(
    fc.property(
      v4.map((o) => o.join('.')),
      v6,
      (a, b) => {
        assert.equal(ipAllowed(a, [a]), true);
        assert.equal(ipAllowed(a, [`${a}/32`]), true);
        assert.equal(ipAllowed(b, [b]), true);
        assert.equal(ipAllowed(b, [`${b}/128`]), true);
      },
    ),
    { numRuns: 300 },
  );
});

test('regionAllowed: empty list allows all; otherwise exact match, trimmed and case-insensitive', () => {
  assert.equal(regionAllowed('eu-west-1', []), true);
  assert.equal(regionAllowed('', []), true);
  assert.equal(regionAllowed('eu-west-1', ['eu-west-1']), true);
  assert.equal(regionAllowed('EU-West-1', ['eu-west-1 ']), true);
  assert.equal(regionAllowed('eu-west-2', ['eu-west-1']), false);
  assert.equal(regionAllowed('eu-west', ['eu-west-1']), false, 'no prefix matching');
  assert.equal(regionAllowed('eu-west-1', ['eu-west']), false, 'no prefix matching');
  assert.equal(regionAllowed('', ['eu-west-1']), false);
  assert.equal(regionAllowed('  ', ['', ' ']), false, 'an empty serving region never matches');
  assert.equal(regionAllowed('us-east-1', ['eu-west-1', 'us-east-1']), true);
});

test('property: hostile strings never throw: parseIpRule gives null or a rule, ipAllowed/regionAllowed a boolean', () => {
  const hostile = fc.oneof(
    fc.string(),
    fc.string({ unit: fc.constantFrom(...'0123456789abcdefABCDEF:./%x-'.split('')) }),
    fc.tuple(fc.ipV4(), fc.nat(40)).map(([ip, bits]) => `${ip}/${bits}`),
    fc.ipV6(),
    fc.ipV4Extended(),
  );
  fc.assert(
    fc.property(hostile, fc.array(hostile, { maxLength: 3 }), (s, rules) => {
      const r = parseIpRule(s);
      assert.ok(r === null || typeof r.text === 'string');
      if (r !== null) assert.deepEqual(parseIpRule(r.text)?.text, r.text, 'canonical text re-parses to itself');
      assert.equal(typeof ipAllowed(s, rules), 'boolean');
      assert.equal(typeof regionAllowed(s, rules), 'boolean');
    }),
    { numRuns: 2000 },
  );
});

test("property: fast-check's IPv6 addresses parse and match themselves; extended IPv4 forms are refused unless dotted decimal", () => {
  fc.assert(
    fc.property(fc.ipV6(), (ip) => {
      const r = parseIpRule(ip);
      assert.ok(r, ip);
      assert.equal(ipAllowed(ip, [ip]), true);
    }),
    { numRuns: 500 },
  );
  fc.assert(
    fc.property(fc.ipV4Extended(), (ip) => {
      const strict = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/.test(ip);
      assert.equal(parseIpRule(ip) !== null, strict, ip);
    }),
    { numRuns: 500 },
  );
});
