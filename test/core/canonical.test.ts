// core/canonical.ts: RFC 8785 canonical JSON, SHA-256 content hashes, base64url.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  MAX_DEPTH,
  b64url,
  canonicalJson,
  contentHash,
  fromB64url,
  inCanonicalOrder,
  isPlainJson,
  sha256Hex,
  utf8,
} from '../../core/canonical.ts';

// RFC 8785 test data: the RFC's examples (section 3.2.2 "values", section
// 3.2.3 sorting "weird") and the rest of the author's reference test data
// (github.com/cyberphone/json-canonicalization, testdata/input -> output).
const RFC8785_CASES: { name: string; input: string; output: string }[] = [
  {
    name: 'arrays',
    input: '[\n  56,\n  {\n    "d": true,\n    "10": null,\n    "1": [ ]\n  }\n]',
    output: '[56,{"1":[],"10":null,"d":true}]',
  },
  {
    name: 'french (sorting ignores locale)',
    input:
      '{\n  "peach": "This sorting order",\n  "péché": "is wrong according to French",\n  "pêche": "but canonicalization MUST",\n  "sin":   "ingnore locale"\n}\n',
    output:
      '{"peach":"This sorting order","péché":"is wrong according to French","pêche":"but canonicalization MUST","sin":"ingnore locale"}',
  },
  {
    name: 'structures',
    input: '{\n  "1": {"f": {"f": "hi","F": 5} ,"\\n": 56.0},\n  "10": { },\n  "": "empty",\n  "a": { },\n  "111": [ { } ],\n  "A": { }\n}',
    output: '{"":"empty","1":{"\\n":56,"f":{"F":5,"f":"hi"}},"10":{},"111":[{}],"A":{},"a":{}}',
  },
  {
    name: 'unicode (no normalization)',
    input: '{\n  "Unnormalized Unicode":"\\u1e0d\\u0307"\n}\n',
    output: '{"Unnormalized Unicode":"\u1e0d\u0307"}',
  },
  {
    name: 'values (RFC 8785 section 3.2.2)',
    input:
      '{\n  "numbers": [1E30, 4.50, 333333333.33333329, 2e-3, 0.000000000000000000000000001],\n  "escaping": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",\n  "literals": [null, true, false]\n}',
    output:
      '{"escaping":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/","literals":[null,true,false],"numbers":[1e+30,4.5,333333333.3333333,0.002,1e-27]}',
  },
  {
    name: 'weird (RFC 8785 section 3.2.3 sorting by UTF-16 code units)',
    input:
      '{\n  "\\u20ac": "Euro Sign",\n  "\\r": "Carriage Return",\n  "\\u000a": "Newline",\n  "1": "One",\n  "\\u0080": "Control\\u007f",\n  "\\ud83d\\ude02": "Smiley",\n  "\\u00f6": "Latin Small Letter O With Diaeresis",\n  "\\ufb33": "Hebrew Letter Dalet With Dagesh",\n  "</script>": "Browser Challenge"\n}\n',
    output:
      '{"\\n":"Newline","\\r":"Carriage Return","1":"One","</script>":"Browser Challenge","\u0080":"Control\u007f","\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign","\ud83d\ude02":"Smiley","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
  },
];

test('RFC 8785 test data: every input canonicalizes to its expected output', () => {
  for (const c of RFC8785_CASES) {
    assert.equal(canonicalJson(JSON.parse(c.input)), c.output, c.name);
  }
});

test('RFC 8785 section 3.2.3: the sorted example as UTF-8 bytes starts as the RFC shows', () => {
  const weird = RFC8785_CASES.find((c) => c.name.startsWith('weird'))!;
  const hex = sha256Hex(''); // sanity of the hash helper on the empty string (FIPS 180-4)
  assert.equal(hex, 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  const bytes = utf8(canonicalJson(JSON.parse(weird.input)));
  // {"\n":"Newline" -> 7b 22 5c 6e 22 3a 22 4e 65 77 6c 69 6e 65 22
  assert.deepEqual([...bytes.slice(0, 15)], [0x7b, 0x22, 0x5c, 0x6e, 0x22, 0x3a, 0x22, 0x4e, 0x65, 0x77, 0x6c, 0x69, 0x6e, 0x65, 0x22]);
});

// RFC 8785 Appendix B: IEEE 754 double (hex) -> canonical number text.
const APPENDIX_B: [string, string][] = [
  ['0000000000000000', '0'],
  ['8000000000000000', '0'],
  ['0000000000000001', '5e-324'],
  ['8000000000000001', '-5e-324'],
  ['7fefffffffffffff', '1.7976931348623157e+308'],
  ['ffefffffffffffff', '-1.7976931348623157e+308'],
  ['4340000000000000', '9007199254740992'],
  ['c340000000000000', '-9007199254740992'],
  ['4430000000000000', '295147905179352830000'],
  ['44b52d02c7e14af5', '9.999999999999997e+22'],
  ['44b52d02c7e14af6', '1e+23'],
  ['44b52d02c7e14af7', '1.0000000000000001e+23'],
  ['444b1ae4d6e2ef4e', '999999999999999700000'],
  ['444b1ae4d6e2ef4f', '999999999999999900000'],
  ['444b1ae4d6e2ef50', '1e+21'],
  ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7'],
  ['3eb0c6f7a0b5ed8d', '0.000001'],
  ['41b3de4355555553', '333333333.3333332'],
  ['41b3de4355555554', '333333333.33333325'],
  ['41b3de4355555555', '333333333.3333333'],
  ['41b3de4355555556', '333333333.3333334'],
  ['41b3de4355555557', '333333333.33333343'],
  ['becbf647612f3696', '-0.0000033333333333333333'],
  ['43143ff3c1cb0959', '1424953923781206.2'],
];

function fromIeeeHex(hex: string): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt('0x' + hex));
  return view.getFloat64(0);
}

test('RFC 8785 Appendix B number serialization', () => {
  for (const [hex, expected] of APPENDIX_B) {
    assert.equal(canonicalJson(fromIeeeHex(hex)), expected, hex);
  }
});

test('RFC 8785 Appendix B: NaN and Infinity are refused with TypeError', () => {
  for (const hex of ['7fffffffffffffff', '7ff0000000000000', 'fff0000000000000']) {
    assert.throws(() => canonicalJson(fromIeeeHex(hex)), TypeError, hex);
  }
});

test('non-JSON values throw TypeError (a programming mistake, not input)', () => {
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  const bad: [string, unknown][] = [
    ['top-level undefined', undefined],
    ['undefined in array', [1, undefined]],
    ['function', { f: () => 1 }],
    ['symbol', Symbol('x')],
    ['bigint', { n: 1n }],
    ['NaN nested', { a: [NaN] }],
    ['Date', new Date(0)],
    ['Map', new Map()],
    ['Uint8Array', new Uint8Array(2)],
    [
      'class instance',
      new (class X {
        a = 1;
      })(),
    ],
    ['cycle', cyclic],
    ['lone high surrogate', '\ud800'],
    ['lone low surrogate in key', { '\udc00': 1 }],
    ['symbol key', { [Symbol('k')]: 1 }],
    ['toJSON is not consulted', { toJSON: () => 'x' }],
  ];
  for (const [name, v] of bad) assert.throws(() => canonicalJson(v), TypeError, name);
  // isPlainJson answers what canonicalJson would do, without serializing.
  for (const [name, v] of bad) assert.equal(isPlainJson(v), false, name);
  for (const v of [null, 0, 'a', [1, null, { b: [true] }], { z: 1, a: { undef: undefined } }, Object.create(null)])
    assert.equal(isPlainJson(v), true, JSON.stringify(v));
});

test('nesting is bounded by MAX_DEPTH, deterministically (not by the stack size)', () => {
  const nest = (depth: number): unknown => {
    let v: unknown = 1;
    for (let i = 0; i < depth; i++) v = i % 2 ? [v] : { k: v };
    return v;
  };
  assert.doesNotThrow(() => canonicalJson(nest(MAX_DEPTH)));
  assert.throws(() => canonicalJson(nest(MAX_DEPTH + 1)), TypeError);
  assert.throws(() => canonicalJson(JSON.parse('['.repeat(100_000) + ']'.repeat(100_000))), TypeError);
});

test('undefined object members are omitted like JSON.stringify; shared (non-cyclic) references are fine', () => {
  assert.equal(canonicalJson({ b: undefined, a: 1 }), '{"a":1}');
  const shared = { x: 1 };
  assert.equal(canonicalJson({ a: shared, b: [shared, shared] }), '{"a":{"x":1},"b":[{"x":1},{"x":1}]}');
  assert.equal(canonicalJson(Object.assign(Object.create(null), { z: 1, y: 2 })), '{"y":2,"z":1}');
});

test('contentHash = sha256: + hex SHA-256 of the canonical form; key order does not matter', () => {
  assert.equal(contentHash({}), 'sha256:' + sha256Hex('{}'));
  // SHA-256("abc"), FIPS 180-4 example
  assert.equal(sha256Hex('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  assert.equal(sha256Hex(utf8('abc')), sha256Hex('abc'));
  assert.equal(contentHash({ a: 1, b: [1, 2] }), contentHash({ b: [1, 2], a: 1 }));
  assert.notEqual(contentHash({ a: 1 }), contentHash({ a: 2 }));
  assert.match(contentHash([1]), /^sha256:[0-9a-f]{64}$/);
});

test('property: contentHash is the hash of canonicalJson whether or not its JSON.stringify fast path is taken', () => {
  fc.assert(
    fc.property(fc.jsonValue(), (v) => {
      const want = 'sha256:' + sha256Hex(canonicalJson(v));
      assert.equal(contentHash(v), want);
      // Keys inserted in canonical order: the fast path (JSON.stringify) is taken, unless integer-like keys reorder them.
      assert.equal(contentHash(JSON.parse(canonicalJson(v))), want);
    }),
    { numRuns: 300 },
  );
  assert.equal(inCanonicalOrder({ '': [1, 'é', null], a: { b: true } }), true);
  assert.equal(contentHash({ '': [1, 'é', null], a: { b: true } }), 'sha256:' + sha256Hex('{"":[1,"é",null],"a":{"b":true}}'));
  // Not JSON, or not in canonical order: the slow path canonicalizes or throws as canonicalJson does.
  assert.equal(inCanonicalOrder({ b: 1, a: 2 }), false);
  assert.equal(contentHash({ b: 1, a: 2 }), 'sha256:' + sha256Hex('{"a":2,"b":1}'));
  assert.equal(inCanonicalOrder({ 10: 1, 9: 2 }), false);
  assert.equal(contentHash({ 10: 1, 9: 2 }), 'sha256:' + sha256Hex('{"10":1,"9":2}'));
  assert.equal(contentHash({ a: undefined, b: 1 }), 'sha256:' + sha256Hex('{"b":1}'));
  let deep: unknown = 1;
  for (let i = 0; i < MAX_DEPTH + 1; i++) deep = [deep];
  assert.equal(inCanonicalOrder(deep), false);
  assert.throws(() => contentHash(deep), TypeError);
  for (const bad of [undefined, Number.NaN, '\uD800', { a: () => 1 }, [Number.POSITIVE_INFINITY], { d: new Date(0) }]) {
    assert.throws(() => contentHash(bad), TypeError);
  }
});

test('property: canonicalJson is stable under JSON round trip and key permutation, and parses back to an equal value', () => {
  fc.assert(
    fc.property(fc.jsonValue(), (v) => {
      const c = canonicalJson(v);
      assert.equal(canonicalJson(JSON.parse(c)), c);
      assert.equal(canonicalJson(JSON.parse(JSON.stringify(v))), c);
      assert.deepEqual(JSON.parse(c), JSON.parse(JSON.stringify(v)));
    }),
    { numRuns: 300 },
  );
  fc.assert(
    fc.property(fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 })), (obj) => {
      const reversed = Object.fromEntries(Object.entries(obj).reverse());
      assert.equal(canonicalJson(reversed), canonicalJson(obj));
    }),
    { numRuns: 200 },
  );
});

test('base64url: RFC 4648 section 10 vectors (unpadded, url alphabet)', () => {
  const vectors: [string, string][] = [
    ['', ''],
    ['f', 'Zg'],
    ['fo', 'Zm8'],
    ['foo', 'Zm9v'],
    ['foob', 'Zm9vYg'],
    ['fooba', 'Zm9vYmE'],
    ['foobar', 'Zm9vYmFy'],
  ];
  for (const [plain, enc] of vectors) {
    assert.equal(b64url(utf8(plain)), enc);
    assert.deepEqual(fromB64url(enc), utf8(plain));
  }
  assert.equal(b64url(new Uint8Array([0xfb, 0xff, 0xfe])), '-__-');
  assert.deepEqual(fromB64url('-__-'), new Uint8Array([0xfb, 0xff, 0xfe]));
});

test('fromB64url is strict: padding, foreign characters, impossible lengths and non-zero trailing bits are refused', () => {
  for (const bad of ['Zg==', 'Zm9v+', 'Zm9v/', 'Z', 'Zm9vY', 'Zh', 'Zm9', 'a b', 'Zé']) {
    assert.throws(() => fromB64url(bad), TypeError, bad);
  }
});

test('property: fromB64url(b64url(x)) = x and encodings are canonical', () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 100 }), (bytes) => {
      const enc = b64url(bytes);
      assert.match(enc, /^[A-Za-z0-9_-]*$/);
      assert.deepEqual(fromB64url(enc), bytes);
      assert.equal(enc, Buffer.from(bytes).toString('base64url'));
    }),
    { numRuns: 500 },
  );
});
