// Security round 3, finding 13: the egress guard classed the IPv4-compatible
// IPv6 address `::7f00:2` (that is ::127.0.0.2) as public, so http.get reached
// loopback through it. Every IPv6 form that embeds an IPv4 address is judged by
// the embedded address: compatible ::a.b.c.d (RFC 4291), mapped ::ffff:a.b.c.d,
// translated ::ffff:0:a.b.c.d (RFC 6145), NAT64 64:ff9b::/96 (RFC 6052) and
// 6to4 2002::/16 (RFC 3056).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import ipaddr from 'ipaddr.js';
import { embeddedIPv4, isPublicAddress, literalHostAllowed } from '../../../runtime/ssrf.ts';

/** [IPv6 form, the IPv4 address it embeds], one row per form, private and public embedded addresses alike. */
const FORMS: [string, string][] = [
  // IPv4-compatible, in hex (as the URL parser writes it) and dotted
  ['::7f00:2', '127.0.0.2'],
  ['::127.0.0.1', '127.0.0.1'],
  ['::a00:1', '10.0.0.1'],
  ['::a9fe:a9fe', '169.254.169.254'],
  ['::808:808', '8.8.8.8'],
  // IPv4-mapped
  ['::ffff:7f00:1', '127.0.0.1'],
  ['::ffff:192.168.1.1', '192.168.1.1'],
  ['::ffff:808:808', '8.8.8.8'],
  // IPv4-translated
  ['::ffff:0:7f00:1', '127.0.0.1'],
  ['::ffff:0:808:808', '8.8.8.8'],
  // NAT64 well-known prefix
  ['64:ff9b::7f00:1', '127.0.0.1'],
  ['64:ff9b::10.1.2.3', '10.1.2.3'],
  ['64:ff9b::a9fe:a9fe', '169.254.169.254'],
  ['64:ff9b::808:808', '8.8.8.8'],
  // 6to4
  ['2002:7f00:1::', '127.0.0.1'],
  ['2002:c0a8:101::1', '192.168.1.1'],
  ['2002:6440:1::', '100.64.0.1'],
  ['2002:808:808::1', '8.8.8.8'],
];

test('embeddedIPv4 finds the IPv4 address of every embedding form', () => {
  for (const [v6, v4] of FORMS) {
    assert.equal(embeddedIPv4(ipaddr.parse(v6) as ipaddr.IPv6)?.toString(), v4, v6);
  }
  for (const plain of ['2001:4860:4860::8888', 'fe80::1', 'fd00::1', '2606:4700::1111']) {
    assert.equal(embeddedIPv4(ipaddr.parse(plain) as ipaddr.IPv6), null, plain);
  }
});

test('each embedding form is judged by its embedded address: private inside is refused, public inside is public', () => {
  for (const [v6, v4] of FORMS) {
    const expected = isPublicAddress(v4);
    assert.equal(isPublicAddress(v6), expected, `${v6} embeds ${v4}`);
    assert.equal(literalHostAllowed(`[${v6}]`, []), expected, `[${v6}] as a URL host`);
  }
  // The address the issue names, as a URL writes it.
  const host = new URL('http://[::127.0.0.2]/').hostname;
  assert.equal(host, '[::7f00:2]');
  assert.equal(literalHostAllowed(host, []), false);
  assert.equal(isPublicAddress('::7f00:2'), false);
});

test('transition forms with no recoverable address, and the plain private ranges, stay refused', () => {
  for (const ip of [
    '2001::1',
    '2001:0:4136:e378:8000:63bf:3fff:fdd2',
    '64:ff9b:1::808:808',
    '::1',
    '::',
    'fe80::1',
    'fd12::1',
    'ff02::1',
  ]) {
    assert.equal(isPublicAddress(ip), false, ip);
  }
  assert.equal(isPublicAddress('2606:4700:4700::1111'), true);
});

test("the operator's private allow-list covers an embedded address as it covers the plain one", () => {
  assert.equal(literalHostAllowed('[64:ff9b::a00:5]', ['10.0.0.0/8']), true);
  assert.equal(literalHostAllowed('[::a00:5]', ['10.0.0.0/8']), true);
  assert.equal(literalHostAllowed('[2002:7f00:1::]', ['10.0.0.0/8']), false);
});
