/**
 * A run's event stream and a client that stops reading, on a real cell process over HTTP: the cell does not
 * buffer without bound. A crew of 40 seats whose every answer is 1 MiB streams ~40 MiB of frames (a delta
 * with each whole answer); the client reads the stream's head, then nothing. Past what the sockets hold
 * and MAX_PENDING_BYTES (16 MiB) pending in the cell, the stream is cut off: once the client reads again it
 * gets what was written, then the end, without `run_finished`, though the run completed. Resuming with
 * `Last-Event-ID` gives the rest of the records, `run_finished` last.
 *
 * Needs `node scripts/build.mjs` first.
 */
import assert from 'node:assert/strict';
import { get, type IncomingMessage } from 'node:http';
import { text } from 'node:stream/consumers';
import { after, before, test } from 'node:test';
import { startOpenAIServer, type FakeOpenAI } from '../fixtures/openai-server.ts';
import { type CellProcess, startCellProcess } from '../helpers/cell-process.ts';
import { httpApi, ok, provider, T, team } from '../helpers/teams.ts';
import { jobRunEnded } from './_runs.ts';

const MiB = 1024 * 1024;
const SEATS = 40;

let ai: FakeOpenAI;
let cell: CellProcess;
before(async () => {
  ai = await startOpenAIServer({
    apiKey: 'sk-fake',
    record: false,
    respond: () => ({ content: 'x'.repeat(MiB), usage: { prompt_tokens: 3, completion_tokens: 2 } }),
  });
  // Room for the run's 40 MiB of answers in the store.
  cell = await startCellProcess({
    args: ['--run-storage-cap', String(256 * MiB), '--workspace-quota', String(512 * MiB), '--run-storage-quota', String(512 * MiB)],
  });
});
after(async () => {
  await cell?.stop();
  cell?.cleanup();
  await ai?.close();
});

/** Opens the run's stream (after `lastId`, if given); the response, its head not yet read. */
function open(runId: string, lastId?: string): Promise<IncomingMessage> {
  const url = new URL(`${cell.url}/api/public/v1/admin/jobs/runs/${runId}/events/sse`);
  return new Promise((resolve, reject) => {
    get(url, { headers: { authorization: `Bearer ${cell.adminKey}`, ...(lastId ? { 'last-event-id': lastId } : {}) } }, resolve).on(
      'error',
      reject,
    );
  });
}

test('a client that stops reading is cut off past what the cell may hold for it; it resumes with Last-Event-ID', {
  timeout: 180_000,
}, async () => {
  const api = httpApi(cell.url, cell.adminKey);
  await provider(api, ai);
  const tm = await team(
    api,
    'sequential',
    Array.from({ length: SEATS }, (_, i) => ({ role: `s${i}` })),
  );
  const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' });
  const res = await open(run.run_id);
  assert.equal(res.statusCode, 200);
  // Not read from now on: the client's buffers, then the sockets', then the cell's fill.
  res.pause();
  const ended = await jobRunEnded(api, run.run_id, 150_000);
  assert.equal(ended.state, 'completed', JSON.stringify(ended.error));

  const body = await text(res);
  const ids = [...body.matchAll(/^id: (\d+)$/gm)].map((m) => m[1]!);
  assert.doesNotMatch(body, /event: run_finished/, 'cut off before the end of the run');
  assert.ok(body.length < (SEATS - 4) * MiB, `cut off well before the whole run's frames: ${body.length} bytes read`);
  assert.ok(ids.length > 0, 'the records written before the cut-off were delivered');

  // The client resumes where it was cut off: the rest of the records, the run's end last, none twice.
  const again = await open(run.run_id, ids.at(-1));
  assert.equal(again.statusCode, 200);
  const rest = await text(again);
  const restIds = [...rest.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
  assert.ok(restIds.length > 0);
  assert.equal(restIds[0], Number(ids.at(-1)) + 1, 'resumed right after the last record seen');
  assert.equal([...rest.matchAll(/^event: (\S+)$/gm)].map((m) => m[1]).at(-1), 'run_finished', "the run's end last");
  const journal = await ok(api, 'GET', `/api/public/v1/admin/jobs/runs/${run.run_id}/journal`);
  assert.equal(restIds.at(-1), journal.records.at(-1).seq, 'everything up to the last record');
});
