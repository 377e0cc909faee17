// replaysToCompletion (core/engine/replay.ts) on the recorded journal fixtures: a journal of a completed
// run replays to completion; one cut short and ended by hand, or ended with another output, does not.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { contentHash } from '../../../core/canonical.ts';
import { compileFormation } from '../../../core/compiler/compile.ts';
import { replaysToCompletion } from '../../../core/engine/replay.ts';
import type { JournalRecord } from '../../../core/journal/record.ts';

const fx = JSON.parse(readFileSync('test/fixtures/journals/sequential-tools-gate.v1.json', 'utf8')) as {
  formation: Parameters<typeof compileFormation>[0];
  billets: Parameters<typeof compileFormation>[1];
  bindings: Parameters<typeof compileFormation>[2];
  records: JournalRecord[];
  blobs: Record<string, unknown>;
};
const compiled = compileFormation(fx.formation, fx.billets, fx.bindings);
assert.ok(compiled.ok);
const graph = compiled.graph;
const blob = (h: string) => (Object.hasOwn(fx.blobs, h) ? fx.blobs[h] : undefined);
const end = fx.records.at(-1)!;

test('a completed journal replays to completion without calling any port', async () => {
  assert.deepEqual(await replaysToCompletion(graph, fx.records, blob), { ok: true });
});

test('a journal cut short before a step and ended by hand does not: the replay needs the step it lacks', async () => {
  let lastStep = fx.records.length - 1;
  while (lastStep > 0 && !(fx.records[lastStep]!.kind === 'step' && !fx.records[lastStep]!.step_id.includes('/'))) lastStep--;
  const cut = [...fx.records.slice(0, lastStep), end];
  const v = await replaysToCompletion(graph, cut, blob);
  assert.equal(v.ok, false);
});

test('a journal whose end records another output, or that does not end, does not', async () => {
  const other = [...fx.records.slice(0, -1), { ...end, output_hash: contentHash('all clear') }];
  assert.equal((await replaysToCompletion(graph, other, blob)).ok, false);
  assert.equal((await replaysToCompletion(graph, fx.records.slice(0, -1), blob)).ok, false);
  assert.equal((await replaysToCompletion(graph, fx.records.slice(1), blob)).ok, false, 'no run_started');
});
