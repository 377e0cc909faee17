/**
 * Live tokens in a group (#24): deltas are produced by the cell that drives
 * the run and exist only there; a subscriber on another cell of the group
 * follows the run's records (the cross-cell catch-up), whose step record
 * carries the whole answer, and gets no delta. Two in-process cells on one
 * PostgreSQL store; skipped on the embedded engine.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { JournalRecord } from '../../../core/journal/record.ts';
import { startOpenAIServer } from '../../fixtures/openai-server.ts';
import { TEST_ENGINE } from '../../helpers/inproc.ts';
import { until, twoCells } from './_two-cells.ts';
import { ok, provider, team, T, type Api } from '../../helpers/teams.ts';
import type { DeltaEvent } from '../../../cell/runs/events.ts';

test('deltas on the driving cell only; a subscriber on another cell gets every record and no delta', {
  skip: TEST_ENGINE !== 'postgres',
  timeout: 120_000,
}, async () => {
  let release!: () => void;
  const gate = new Promise<void>((r) => {
    release = r;
  });
  const pieces = ['one ', 'two ', 'three'];
  const ai = await startOpenAIServer({
    apiKey: 'sk-fake',
    respond: () => ({ content: pieces.join(''), pieces, beforePiece: (i) => (i === 0 ? gate : undefined) }),
  });
  const { a, b, close } = await twoCells();
  try {
    const api: Api = { request: a.request, token: a.adminKey };
    await provider(api, ai, 'sk-fake', true);
    const tm = await team(api, 'sequential', [{ role: 'speaker' }]);
    const r = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'count' });
    const seen = {
      a: { recs: [] as JournalRecord[], deltas: [] as DeltaEvent[] },
      b: { recs: [] as JournalRecord[], deltas: [] as DeltaEvent[] },
    };
    const unA = await a.modules.runs.runs.subscribe(
      r.run_id,
      0,
      (x) => seen.a.recs.push(x),
      (d) => seen.a.deltas.push(d),
    );
    const unB = await b.modules.runs.runs.subscribe(
      r.run_id,
      0,
      (x) => seen.b.recs.push(x),
      (d) => seen.b.deltas.push(d),
    );
    release();
    await until('cell B to hear run_finished', () => seen.b.recs.some((x) => x.kind === 'run_finished'), 60_000);
    await until('cell A to hear run_finished', () => seen.a.recs.some((x) => x.kind === 'run_finished'));
    unA();
    unB();
    const run = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${r.run_id}`);
    assert.equal(run.coordinator, 'cell-a', 'driven by cell A');
    assert.deepEqual(
      seen.a.deltas.map((d) => d.data.text),
      pieces,
      'the driving cell streams the deltas',
    );
    assert.equal(seen.b.deltas.length, 0, 'no delta on another cell');
    assert.deepEqual(
      seen.b.recs.map((x) => x.seq),
      seen.a.recs.map((x) => x.seq),
      'every record on both cells',
    );
  } finally {
    await close();
    await ai.close();
  }
});
