// The closed set of refusal reasons (core/reasons.ts, issue 27): every reason literal the
// sources put in a refusal is declared there, and every declared reason is used somewhere.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ERROR_STATUS } from '../../core/errors.ts';
import { REASONS, isReason, reasonStatuses, relayedReason, type Reason } from '../../core/reasons.ts';
import { TOKEN_ERROR_CODES, type TokenErrorCode } from '../../core/tokens/errors.ts';
import { RETRY_REASONS, type RetryReason } from '../../core/engine/policy.ts';
import type { CompileErrorCode } from '../../core/compiler/types.ts';
import type { KeyRefusalReason } from '../../core/apikey/verify.ts';

const ROOTS = ['cell', 'core', 'runtime', 'edge', 'bundles'];
const REGISTRY = join('core', 'reasons.ts');

/** Where a reason is written down in the sources (multi-line aware). */
const PATTERNS: RegExp[] = [
  // reason: 'x', reason === 'x', reason = 'x', details?.['reason'] === 'x' (and `: 'x'` after it in a ternary)
  /\breason'?\]?\s*(?::|===|!==|=)\s*'([a-z][a-z0-9_]*)'/g,
  // reason = cond ? 'x' : 'y' (both names)
  /\breason\s*[:=][^;\n]*?\?\s*'([a-z][a-z0-9_]*)'\s*:\s*'([a-z][a-z0-9_]*)'/g,
  // the helpers that build refusals, the reason first (after ctx and a run id for the run refusers)
  /\b(?:refuse|fail|refused|toolRefusal|refuseRun)\(\s*(?:ctx,\s*[^,()]+,\s*)?'([a-z][a-z0-9_]*)'/g,
  /\bnew (?:EngineRefusal|JobStepFailure)\(\s*'([a-z][a-z0-9_]*)'/g,
  /\bnew Stop\(\s*'[a-z]+',\s*'([a-z][a-z0-9_]*)'/g,
  /\brelayedReason\([^,()]+,\s*'([a-z][a-z0-9_]*)'/g,
];

/**
 * Literals the patterns find that are not refusal reasons, by file, each with why.
 * `'string'` of a `typeof reason === 'string'` is skipped everywhere.
 */
const NOT_REASONS: Record<string, { names: string[]; why: string }> = {
  'cell/discovery/curate.ts': {
    names: ['untagged', 'tag_not_allowlisted', 'missing_x_status', 'invalid_x_status', 'partial_without_description'],
    why: 'why an operation is left out of the curated document: a build report, not a refusal',
  },
  'cell/runs/lease.ts': {
    names: ['owned', 'terminal', 'unqualified', 'refused_at_start'],
    why: 'outcomes of a lease claim, never on the wire',
  },
  'cell/runs/drive.ts': { names: ['refused_at_start'], why: 'the outcome of a lease claim (lease.ts), never on the wire' },
  'cell/store/postgres.ts': { names: ['notifications_lost'], why: "a store health check, under /readyz's details.checks" },
  'cell/iam/reset-owner.ts': { names: ['reset_owner'], why: 'the audit record of an allowed action' },
  'cell/jobs/routes-definitions.ts': {
    names: ['requested'],
    why: 'why a definition was disabled, by request (audit of an allowed action)',
  },
  'cell/jobs/scheduler.ts': { names: ['dispatch_failed'], why: "a fire's detail, not an envelope or run reason" },
  'cell/teams/crew-runs/runs.ts': { names: ['time_budget', 'cost_budget'], why: 'why a run is flagged for investigation; not a refusal' },
  'cell/ai/complete.ts': { names: ['error'], why: 'the metrics label of a model call that failed without a reason' },
  'core/apikey/verify.ts': { names: ['unauthorized', 'forbidden'], why: 'the error code, the first argument of its refuse(code, reason)' },
};

function* files(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) yield* files(p);
    else if (p.endsWith('.ts')) yield p;
  }
}

const sources = (): { file: string; text: string }[] =>
  ROOTS.flatMap((r) => [...files(r)])
    .filter((f) => f !== REGISTRY)
    .map((file) => ({ file: file.split('\\').join('/'), text: readFileSync(file, 'utf8') }));

/** The reason literals of one source text, with their line numbers. */
export function reasonLiterals(text: string): { name: string; line: number }[] {
  const found: { name: string; line: number }[] = [];
  for (const re of PATTERNS) {
    for (const m of text.matchAll(re)) {
      const line = text.slice(0, m.index).split('\n').length;
      for (const name of m.slice(1)) if (name !== undefined && name !== 'string') found.push({ name, line });
    }
  }
  return found;
}

test('the scanner finds reasons in every form a refusal is written', () => {
  const text = [
    "throw invalid('bad', { reason: 'a_1' });",
    "if (err.details?.['reason'] === 'a_2') return;",
    "const r = cond ? 'x' : 'y'; let reason = ok ? 'a_3' : 'a_4';",
    "throw refused('a_5', 'message', 'forbidden');",
    "return refuse(\n  ctx,\n  run.run_id,\n  'a_6',\n  'message',\n);",
    "throw new EngineRefusal('a_7', 'm'); throw new JobStepFailure('a_8', 'm');",
    "throw new Stop('waiting', 'a_9'); relayedReason(e, 'a_10');",
    "if (typeof reason === 'string') return; const finish_reason = 'stop'; reason: 'a sentence, not a name';",
  ].join('\n');
  assert.deepEqual(
    reasonLiterals(text)
      .map((f) => f.name)
      .sort(),
    ['a_1', 'a_10', 'a_2', 'a_3', 'a_4', 'a_5', 'a_6', 'a_7', 'a_8', 'a_9'],
  );
});

test('every reason literal in cell/, core/, runtime/, edge/ and bundles/ is declared in core/reasons.ts', () => {
  const undeclared: string[] = [];
  let sites = 0;
  for (const { file, text } of sources()) {
    const skip = NOT_REASONS[file]?.names ?? [];
    for (const { name, line } of reasonLiterals(text)) {
      if (skip.includes(name)) continue;
      sites++;
      if (!isReason(name)) undeclared.push(`${file}:${line} ${name}`);
    }
  }
  assert.deepEqual(undeclared, [], 'declare each in core/reasons.ts with its codes and a sentence (or reuse a declared one)');
  assert.ok(sites > 200, `the scan found only ${sites} sites: a pattern is broken`);
});

test('every declared reason is used by some source (no dead reasons)', () => {
  const all = sources()
    .map((s) => s.text)
    .join('\n');
  const dead = Object.keys(REASONS).filter((r) => !all.includes(`'${r}'`));
  assert.deepEqual(dead, [], 'a reason no source writes: remove it from core/reasons.ts');
});

test('the exclusions name only literals that are still there and not declared reasons', () => {
  for (const [file, { names }] of Object.entries(NOT_REASONS)) {
    const found = new Set(reasonLiterals(readFileSync(file, 'utf8')).map((f) => f.name));
    for (const n of names) {
      assert.ok(found.has(n), `${file} no longer writes ${n}: drop it from NOT_REASONS`);
      assert.ok(!isReason(n) || file === 'core/apikey/verify.ts', `${n} is a declared reason: no need to exclude it in ${file}`);
    }
  }
});

test('each entry: a snake_case name, envelope codes from the closed set, run codes, one sentence; sorted', () => {
  const names = Object.keys(REASONS);
  assert.deepEqual(names, [...names].sort(), 'keep core/reasons.ts alphabetical');
  for (const [name, e] of Object.entries(REASONS)) {
    assert.match(name, /^[a-z][a-z0-9_]*$/);
    for (const c of e.codes) assert.ok(Object.hasOwn(ERROR_STATUS, c), `${name}: ${c}`);
    assert.equal(new Set(e.codes).size, e.codes.length, name);
    const runs: readonly string[] = 'runs' in e ? e.runs : [];
    for (const r of runs) assert.ok(['refused', 'failed', 'cancelled', 'internal_error'].includes(r), `${name}: ${r}`);
    assert.match(e.sentence, /^[A-Z`a-z].*\.$/, `${name}: one sentence, ending with a full stop`);
  }
  assert.deepEqual(reasonStatuses('bad_signature'), [401, 403]);
});

// Closed sets declared elsewhere in core are reasons too; the compiler checks it here (and where they flow).
type Declared<T extends Reason> = T;
export type ClosedSets = [Declared<TokenErrorCode>, Declared<CompileErrorCode>, Declared<KeyRefusalReason>, Declared<RetryReason>];

test('the closed sets of core (token codes, retry reasons) are declared reasons', () => {
  for (const c of [...TOKEN_ERROR_CODES, ...RETRY_REASONS]) assert.ok(isReason(c), c);
});

test('a relayed refusal keeps its reason, else carries the fallback or its code', () => {
  assert.equal(relayedReason({ code: 'forbidden', details: { reason: 'egress_denied' } }), 'egress_denied');
  assert.equal(relayedReason({ code: 'forbidden', details: {} }), 'forbidden');
  assert.equal(relayedReason({ code: 'forbidden' }, 'tool_refused'), 'tool_refused');
});
