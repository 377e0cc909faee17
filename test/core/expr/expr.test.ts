// The expression language: compile-time checks, limits, JSON in/out, and the
// official cel-spec conformance data (@bufbuild/cel-spec 0.6.1, cel-spec v0.25.1)
// for the files we enable (CONFORMANCE_FILES below).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { celUint, isCelList, isCelMap, isCelUint } from '@bufbuild/cel';
import { getConformanceSuite, type IncrementalTestSuite } from '@bufbuild/cel-spec/testdata/tests.js';
import type { Value } from '@bufbuild/cel-spec/cel/expr/value_pb.js';
import { compileExpr } from '../../../core/expr/compile.ts';
import { evalBool, evalExpr, evalRaw } from '../../../core/expr/evaluate.ts';
import { EXPR_LIMITS } from '../../../core/expr/program.ts';

const V = { variables: ['input', 'context'] };

function ok(src: string, bindings: Record<string, unknown>) {
  const c = compileExpr(src, V);
  assert.ok(c.ok, `compile ${src}: ${!c.ok ? c.error.message : ''}`);
  return evalExpr(c.program, { context: {}, ...bindings });
}

test('evaluates over JSON bindings and returns JSON', () => {
  assert.deepEqual(ok('input.a + 1.0', { input: { a: 2 } }), { ok: true, value: 3 });
  assert.deepEqual(
    ok('input.items.filter(x, x.n > 1.0).map(x, x.name)', {
      input: {
        items: [
          { n: 1, name: 'a' },
          { n: 2, name: 'b' },
        ],
      },
    }),
    { ok: true, value: ['b'] },
  );
  assert.deepEqual(ok('{"sum": size(input.l), "ok": has(input.k)}', { input: { l: [1, 2, 3], k: 1 } }), {
    ok: true,
    value: { sum: 3, ok: true },
  });
  assert.deepEqual(ok("'a' in input && input.s.startsWith('he')", { input: { a: 1, s: 'hello' } }), { ok: true, value: true });
  assert.deepEqual(ok('context.requester == "alice"', { input: null, context: { requester: 'alice' } }), { ok: true, value: true });
  const b = compileExpr('input > 1.0', V);
  assert.ok(b.ok);
  assert.deepEqual(evalBool(b.program, { input: 2, context: {} }), { ok: true, value: true });
  const nb = compileExpr('input', V);
  assert.ok(nb.ok);
  assert.equal(evalBool(nb.program, { input: 'x', context: {} }).ok, false);
});

test('compile-time refusals carry codes', () => {
  const code = (src: string) => {
    const r = compileExpr(src, V);
    return r.ok ? 'ok' : r.error.code;
  };
  assert.equal(code(''), 'syntax');
  assert.equal(code('1 +'), 'syntax');
  assert.equal(code('secret == 1'), 'undeclared');
  assert.equal(code('exec("rm -rf /")'), 'unknown_function');
  assert.equal(code('input.lowerAscii()'), 'unknown_function'); // the strings extension is not enabled
  assert.equal(code('google.protobuf.Duration{seconds: 1}'), 'not_allowed');
  assert.equal(code('x'.repeat(EXPR_LIMITS.max_source_chars + 1)), 'too_long');
  assert.equal(code('1 + ('.repeat(40) + '1' + ')'.repeat(40)), 'too_deep');
  assert.notEqual(code('('.repeat(3000) + '1' + ')'.repeat(3000)), 'ok'); // parser recursion is contained
  assert.equal(code('[' + Array.from({ length: 1100 }, () => 1).join(',') + ']'), 'too_many_nodes');
  assert.equal(code('input.all(a, input.all(b, input.all(c, true)))'), 'nesting');
  assert.equal(code('input.all(a, input.all(b, a == b))'), 'ok');
  assert.equal(code('[1].map(x, x + 1)'), 'ok');
});

test('evaluation cost is bounded before evaluating', () => {
  const c = compileExpr('input.all(a, input.all(b, a != b || a == b))', V);
  assert.ok(c.ok);
  const small = Array.from({ length: 50 }, (_, i) => i);
  assert.deepEqual(evalExpr(c.program, { input: small, context: {} }), { ok: true, value: true });
  const big = Array.from({ length: 5000 }, (_, i) => i);
  const r = evalExpr(c.program, { input: big, context: {} });
  assert.equal(r.ok, false);
  assert.equal(!r.ok && r.error.code, 'cost_exceeded');
});

test('runtime errors and non-JSON results are values, not exceptions', () => {
  assert.equal(ok('input.missing', { input: {} }).ok, false);
  assert.equal(ok('1 / 0', { input: {} }).ok, false);
  const t = ok("timestamp('2024-01-01T00:00:00Z')", { input: {} });
  assert.equal(t.ok, false);
  assert.equal(!t.ok && t.error.code, 'not_json');
  const c = compileExpr('input', V);
  assert.ok(c.ok);
  assert.equal(evalExpr(c.program, { context: {} }).ok, false); // unbound variable
});

// ------------------------------------------------------------ conformance

/** cel-spec conformance files run here: the core language we enable (no extensions, no proto messages).
 * Not run: macros2 (two-variable comprehensions and other extension macros), *_ext, proto2/proto3,
 * wrappers, enums, dynamic, type_deductions, namespace, optionals, unknowns (messages, containers or extensions). */
const CONFORMANCE_FILES = [
  'basic',
  'comparisons',
  'conversions',
  'fp_math',
  'integer_math',
  'lists',
  'logic',
  'macros',
  'plumbing',
  'string',
  'fields',
  'timestamps',
  'parse',
];

function celOf(v: Value): unknown {
  const k = v.kind;
  switch (k.case) {
    case 'nullValue':
      return null;
    case 'boolValue':
    case 'stringValue':
    case 'doubleValue':
    case 'int64Value':
    case 'bytesValue':
      return k.value;
    case 'uint64Value':
      return celUint(k.value);
    case 'listValue':
      return k.value.values.map(celOf);
    case 'mapValue':
      return new Map(k.value.entries.map((e) => [celOf(e.key!), celOf(e.value!)]));
    default:
      throw new Error('unsupported');
  }
}

function same(actual: unknown, expected: unknown): boolean {
  if (typeof expected === 'number') return typeof actual === 'number' && (Object.is(actual, expected) || actual === expected);
  if (typeof expected === 'bigint' || typeof expected === 'string' || typeof expected === 'boolean' || expected === null)
    return actual === expected;
  if (isCelUint(expected)) return isCelUint(actual) && actual.value === expected.value;
  if (expected instanceof Uint8Array)
    return actual instanceof Uint8Array && actual.length === expected.length && actual.every((b, i) => b === expected[i]);
  if (Array.isArray(expected)) {
    if (!isCelList(actual) || actual.size !== expected.length) return false;
    return expected.every((e, i) => same(actual.get(i), e));
  }
  if (expected instanceof Map) {
    if (!isCelMap(actual) || actual.size !== expected.size) return false;
    for (const [ek, ev] of expected) {
      const key = isCelUint(ek) ? ek : (ek as string | bigint | boolean);
      if (!actual.has(key as never) || !same(actual.get(key as never), ev)) return false;
    }
    return true;
  }
  return false;
}

function* tests(s: IncrementalTestSuite, prefix: string): Generator<[string, IncrementalTestSuite['tests'][number]]> {
  for (const t of s.tests) yield [`${prefix}/${t.name}`, t];
  for (const sub of s.suites) yield* tests(sub, `${prefix}/${sub.name}`);
}

test('cel-spec conformance (selected files) through compileExpr/evalRaw', () => {
  const suite = getConformanceSuite();
  const summary: Record<string, { run: number; pass: number; skipped: number; refusedByLimits: number; refusedByPolicy: number }> = {};
  const failures: string[] = [];
  for (const file of CONFORMANCE_FILES) {
    const fs = suite.suites.find((s) => s.name === file);
    assert.ok(fs, `conformance file ${file}`);
    const st = { run: 0, pass: 0, skipped: 0, refusedByLimits: 0, refusedByPolicy: 0 };
    summary[file] = st;
    for (const [name, t] of tests(fs, file)) {
      const o = t.original;
      const m = o.resultMatcher;
      // Out of scope: proto containers/messages/enums, typed declarations of messages, checkOnly tests.
      let expected: unknown;
      let wantError = false;
      let bindings: Record<string, unknown> = {};
      try {
        if (o.container !== '' || o.checkOnly || o.disableMacros) throw new Error('skip');
        if (o.typeEnv.some((d) => d.name.includes('.'))) throw new Error('skip'); // qualified (dotted) variable names are not offered
        if (m.case === 'value') expected = celOf(m.value);
        else if (m.case === 'evalError' || m.case === 'anyEvalErrors') wantError = true;
        else throw new Error('skip');
        for (const [k, ev] of Object.entries(o.bindings)) {
          if (ev.kind.case !== 'value') throw new Error('skip');
          bindings[k] = celOf(ev.kind.value);
        }
        for (const d of o.typeEnv)
          if (d.declKind.case === 'ident' && d.declKind.value.type?.typeKind.case === 'messageType') throw new Error('skip');
      } catch {
        st.skipped++;
        continue;
      }
      st.run++;
      const vars = [...new Set([...o.typeEnv.filter((d) => d.declKind.case === 'ident').map((d) => d.name), ...Object.keys(bindings)])];
      const c = compileExpr(o.expr, { variables: vars });
      if (!c.ok) {
        if (['too_deep', 'too_many_nodes', 'nesting', 'too_long'].includes(c.error.code)) {
          st.refusedByLimits++;
          continue;
        }
        if (wantError) st.pass++;
        // Our checks are stricter than CEL's runtime: undeclared names, unknown functions and
        // message construction (google.protobuf wrappers) are compile errors here.
        else if (['undeclared', 'unknown_function', 'not_allowed'].includes(c.error.code)) st.refusedByPolicy++;
        else failures.push(`${name}: compile ${c.error.code} ${o.expr}`);
        continue;
      }
      bindings = Object.fromEntries(vars.map((v) => [v, bindings[v] ?? null]));
      const r = evalRaw(c.program, bindings);
      if (wantError ? !r.ok : r.ok && same(r.value, expected)) st.pass++;
      else failures.push(`${name}: ${o.expr}`);
    }
  }
  const total = Object.values(summary).reduce((a, s) => a + s.run, 0);
  const passed = Object.values(summary).reduce((a, s) => a + s.pass, 0);
  // Known divergences of @bufbuild/cel 0.6.1 or of our stricter checks (listed, never silently growing).
  const KNOWN = new Set<string>(KNOWN_FAILURES);
  const unexpected = failures.filter((f) => !KNOWN.has(f.split(':')[0]!));
  assert.deepEqual(unexpected, [], JSON.stringify(summary));
  const policy = Object.values(summary).reduce((a, s) => a + s.refusedByPolicy, 0);
  assert.ok(policy < 60, `refused by policy: ${policy} ${JSON.stringify(summary)}`);
  assert.ok(total > 500 && passed / total > 0.9, `${passed}/${total} ${JSON.stringify(summary)}`);
});

// @bufbuild/cel 0.6.1 does not parse backquoted field names (cel-spec v0.25 addition) and
// differs on one heterogeneous-key map literal.
const KNOWN_FAILURES: string[] = [
  'fields/quoted_map_fields/field_access_slash',
  'fields/quoted_map_fields/field_access_dash',
  'fields/quoted_map_fields/field_access_dot',
  'fields/quoted_map_fields/has_field_slash',
  'fields/quoted_map_fields/has_field_dash',
  'fields/quoted_map_fields/has_field_dot',
  'fields/qualified_identifier_resolution/map_value_repeat_key_heterogeneous',
];
