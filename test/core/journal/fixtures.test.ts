// Recorded journals (test/fixtures/journals/*.v1.json and *.v2.json, written by generate.ts; the
// -reserved ones by `generate.ts --reserved`: no intent before a model call) verified
// in CI: signatures and chain, the formation recompiles to the recorded graph hash, and
// the run replays from its recorded outputs through today's engine without calling any
// port. A change that breaks old journals fails here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { compileFormation } from '../../../core/compiler/compile.ts';
import { runGraph } from '../../../core/engine/run.ts';
import type { EnginePorts, JournalAppend } from '../../../core/engine/types.ts';
import type { JournalRecord } from '../../../core/journal/record.ts';
import { recordedFrom } from '../../../core/journal/recorded.ts';
import { verifyJournal } from '../../../core/journal/verify.ts';

const DIR = 'test/fixtures/journals';
const files = readdirSync(DIR)
  .filter((f) => /\.v[12]\.json$/.test(f))
  .sort();

interface Fixture {
  name: string;
  /** v1 fixtures: one signer. */
  kid?: string;
  public_jwk?: JsonWebKey;
  /** v2 fixtures: every signer (a run continued by a second cell). */
  keys?: Record<string, JsonWebKey>;
  formation: Parameters<typeof compileFormation>[0];
  billets: Parameters<typeof compileFormation>[1];
  bindings: Parameters<typeof compileFormation>[2];
  requester: string;
  input: unknown;
  graph_hash: string;
  formation_hash: string;
  output: unknown;
  records: JournalRecord[];
  blobs: Record<string, unknown>;
}

test('there are recorded journal fixtures', () => {
  assert.ok(files.filter((f) => f.endsWith('.v1.json')).length >= 2, files.join(','));
  assert.ok(files.filter((f) => f.endsWith('.v2.json')).length >= 2, files.join(','));
});

test('the -reserved fixtures have no intent before a model call (its reservation is its intent), a tool call keeps its own', () => {
  const reserved = files.filter((f) => f.endsWith('-reserved.v2.json'));
  assert.ok(reserved.length >= 2, files.join(','));
  let tools = 0;
  for (const file of reserved) {
    const fx = JSON.parse(readFileSync(join(DIR, file), 'utf8')) as Fixture;
    const intents = fx.records.filter((r) => r.kind === 'intent');
    assert.ok(
      intents.every((r) => r.data?.['call'] === 'tool' && r.step_id.includes('/tool/')),
      `${file}: ${intents.map((r) => r.step_id)}`,
    );
    assert.ok(
      fx.records.some((r) => r.kind === 'step' && r.step_id.includes('/model/')),
      file,
    );
    tools += intents.length;
  }
  assert.ok(tools > 0, 'a tool call is preceded by its intent');
});

for (const file of files) {
  const fx = JSON.parse(readFileSync(join(DIR, file), 'utf8')) as Fixture;
  const keys = (kid: string) => (fx.keys ? fx.keys[kid] : kid === fx.kid ? fx.public_jwk : undefined);

  test(`${file}: verifies; any tampering is detected`, async () => {
    assert.deepEqual(await verifyJournal(fx.records, keys), { ok: true });
    const mid = Math.floor(fx.records.length / 2);
    const tampered = fx.records.map((r) => ({ ...r }));
    tampered[mid] = { ...tampered[mid]!, output_hash: 'sha256:' + 'f'.repeat(64) };
    assert.deepEqual(await verifyJournal(tampered, keys), { ok: false, seq: mid + 1, reason: 'signature does not verify' });
    const dropped = fx.records.filter((_, i) => i !== mid);
    assert.equal((await verifyJournal(dropped, keys)).ok, false);
  });

  test(`${file}: the formation recompiles to the recorded graph hash`, () => {
    const r = compileFormation(fx.formation, fx.billets, fx.bindings);
    assert.ok(r.ok);
    assert.equal(r.formationHash, fx.formation_hash);
    assert.equal(r.graphHash, fx.graph_hash);
    assert.ok(fx.records.every((x) => x.graph_hash === fx.graph_hash));
  });

  test(`${file}: replays from recorded outputs without calling any port`, async () => {
    const compiled = compileFormation(fx.formation, fx.billets, fx.bindings);
    assert.ok(compiled.ok);
    const blobs = new Map(Object.entries(fx.blobs));
    const recorded = recordedFrom(fx.records, (h) => (blobs.has(h) ? blobs.get(h) : undefined));
    const never = (what: string) => () => {
      throw new Error(`replay called ${what}`);
    };
    const appended: JournalAppend[] = [];
    const ports: EnginePorts = {
      clock: { now: () => 1_800_000_000_000 },
      model: { complete: never('model') },
      tools: { describe: () => ({ name: 'calc', description: '', side_effects: false, parameters: {} }), call: never('tools') },
      budget: { hasLedger: async () => true, reserve: never('budget.reserve'), commit: never('budget.commit') },
      approvals: { decisions: never('approvals') },
      journal: { append: async (f) => void appended.push(f) },
      recorded: async (id) => recorded(id),
    };
    const r = await runGraph(compiled.graph, fx.input, ports, {
      run_id: fx.records[0]!.run_id,
      requester: fx.requester,
      graph_hash: fx.graph_hash,
    });
    assert.equal(r.outcome, 'completed', JSON.stringify(r));
    assert.deepEqual(r.output, fx.output);
    assert.deepEqual(
      appended.map((a) => a.kind),
      ['run_finished'],
    );
  });
}
